"""The reference engine's block hashes, for the one place where their values are observable.

The engine compares blocks by interned identity (identity.py); the reference compares XXH3
sequence hashes, and so do we wherever only equality matters. Its G2 tier, however, breaks LRU
ties between blocks of one completed cohort by the smaller hash value (checked against the
reference: which block of a two-block cohort survives a one-block eviction follows the hash
order, 12 cases out of 12). To evict the same blocks, the G2 tier orders ties by these hashes.

How the reference builds them (engine.md section 1.4): every trace token value is interned to a
dense u32 in first-seen order; a block's local hash is XXH3-64 (seed 1337) of its u32 tokens as
little-endian bytes; block 0's sequence hash is its local hash, block k's is XXH3-64 (seed 1337) of
the 16 little-endian bytes (parent sequence hash, local hash).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

import xxhash

from kvreplay.engine.identity import ROOT, BlockIdentities

SEED = 1337
_U32 = struct.Struct("<I")
_PAIR = struct.Struct("<QQ")


class TokenInterner:
    """Token values to dense u32 ids in first-seen order (all prompts, as they arrive).

    `identity`: the workload's values already are the reference's dense ids (agentic traces
    intern their hashes in graph order), so they are used as they are."""

    __slots__ = ("dense", "identity")

    def __init__(self, identity: bool = False) -> None:
        self.dense: dict[int, int] = {}
        self.identity = identity

    def observe(self, runs: Iterable[tuple[int, int]]) -> None:
        if self.identity:
            return
        dense = self.dense
        for value, _ in runs:
            if value not in dense:
                dense[value] = len(dense) & 0xFFFFFFFF

    def token(self, value: int) -> int:
        return value & 0xFFFFFFFF if self.identity else self.dense.get(value, 0)


class SequenceHasher:
    """Sequence hash of an identity's block at one block size (cached)."""

    __slots__ = ("_cache", "block_size", "identities", "interner")

    @property
    def cache(self) -> dict[int, int]:
        """Identities hashed so far (read-only use)."""
        return self._cache

    def __init__(self, identities: BlockIdentities, interner: TokenInterner,
                 block_size: int) -> None:
        if identities.keys is None:
            raise ValueError("block hashes need identities that keep their keys")
        self.identities = identities
        self.interner = interner
        self.block_size = block_size
        self._cache: dict[int, int] = {}

    def __call__(self, ident: int) -> int:
        cached = self._cache.get(ident)
        if cached is not None:
            return cached
        if ident < 0:  # a generated-token block: request-private, any stable value will do
            value = (-ident * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
            self._cache[ident] = value
            return value
        keys = self.identities.keys
        assert keys is not None
        cache = self._cache
        parent, content = keys[ident]
        if parent == ROOT or parent in cache:  # the usual case: blocks are hashed in order
            local = xxhash.xxh3_64_intdigest(self._tokens(content), seed=SEED)
            value = local if parent == ROOT else xxhash.xxh3_64_intdigest(
                _PAIR.pack(cache[parent], local), seed=SEED)
            cache[ident] = value
            return value
        # Walk up to the first ancestor already hashed (chains can be thousands of blocks long).
        path = [ident]
        while parent != ROOT and parent not in cache:
            path.append(parent)
            parent = keys[parent][0]
        value = 0
        for node in reversed(path):
            parent, content = keys[node]
            local = xxhash.xxh3_64_intdigest(self._tokens(content), seed=SEED)
            if parent == ROOT:
                value = local
            else:
                value = xxhash.xxh3_64_intdigest(_PAIR.pack(cache[parent], local), seed=SEED)
            cache[node] = value
        return value

    def _tokens(self, content: object) -> bytes:
        token = self.interner.token
        if isinstance(content, tuple):
            parts = []
            for i in range(0, len(content), 2):
                parts.append(_U32.pack(token(content[i])) * content[i + 1])
            return b"".join(parts)
        assert isinstance(content, int)
        return _U32.pack(token(content)) * self.block_size
