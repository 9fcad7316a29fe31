"""Chained block identities: (parent identity, block content) interned to a dense int.

Two blocks get the same identity exactly when their whole token prefixes are equal, which is
what prefix caching needs; interning is exact (no hash collisions) and deterministic (first-seen
order). This replaces the reference's XXH3 sequence hashes, which only ever get compared.

Content of a block is the runs of its tokens: a block lying inside one run of value v is keyed
by v itself, a block crossing runs by the tuple (v1, n1, v2, n2, ...). Blocks holding generated
tokens get fresh negative identities (they can only be hit by the same request after a
preemption), unless the workload says which tokens the request generates (delta sessions,
whose next turn's prompt holds them): then they are chained like prompt blocks.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Final

ROOT = -1  # parent of block 0 (identities are >= 0; fresh output identities are < -1)
# One-value contents below this are keyed by one int, parent * 2**68 + value: 68 bits cover the
# trace hash ids (< 2**64) and the value spaces above them (traces/values.py, < 2**67), so a
# synthetic prompt's blocks take the inline path too.
_SHIFT: Final = 68
_WIDE: Final = 1 << _SHIFT


def block_key(parent: int, content: object) -> object:
    """The interning key of (parent, content): parent * 2**68 + content for a one-value block
    of a value in 0..2**68-1 (the usual case: cheaper to hash and compare, and one to one),
    else the pair itself (never equal to an int)."""
    if type(content) is int and 0 <= content < _WIDE:
        return (parent << _SHIFT) | content
    return (parent, content)


class BlockIdentities:
    __slots__ = ("_ids", "_next_fresh", "keys")

    def __init__(self, keep_keys: bool = False) -> None:
        self._ids: dict[object, int] = {}  # block_key(parent, content) -> identity
        self._next_fresh = -2
        # identity -> (parent, content), kept only when something must read a block's tokens back
        # (the G2 tier orders its LRU ties by the reference's block hashes).
        self.keys: list[tuple[int, object]] | None = [] if keep_keys else None

    def __len__(self) -> int:
        return len(self._ids)

    def intern(self, parent: int, content: object) -> tuple[int, bool]:
        """The identity of `content` after `parent`, and whether it was new."""
        key = block_key(parent, content)
        ident = self._ids.get(key)
        if ident is None:
            ident = len(self._ids)
            self._ids[key] = ident
            if self.keys is not None:
                self.keys.append((parent, content))
            return ident, True
        return ident, False

    def block_at(self, runs: Sequence[tuple[int, int]], index: int, block_size: int,
                 parent: int) -> int | None:
        """The identity of block `index` of the token runs after `parent` (as prompt_blocks
        would give it), or None when the runs end before the block does."""
        parts = _content(runs, index * block_size, block_size)
        if parts is None:
            return None
        content: object = parts[0] if len(parts) == 2 else tuple(parts)
        return self.intern(parent, content)[0]

    def unit_key(self, runs: Sequence[tuple[int, int]], start: int, count: int, parent: int,
                 create: bool) -> int | None:
        """The identity of the `count` tokens of the runs from `start` (a block's start) after
        `parent`, a page ending inside its block (a hybrid rank's unit alias, never equal to a
        full block's identity); None when the runs end first, or when it was never interned
        and `create` is False."""
        parts = _content(runs, start, count)
        if parts is None:
            return None
        key = block_key(parent, ("unit", *parts))
        if not create:
            found = self._ids.get(key)
            return found
        ident = self._ids.get(key)
        if ident is None:
            ident = len(self._ids)
            self._ids[key] = ident
            if self.keys is not None:
                self.keys.append((parent, ("unit", *parts)))
        return ident

    def fresh(self) -> int:
        """A new identity no other block will ever share."""
        ident = self._next_fresh
        self._next_fresh -= 1
        return ident

    def prompt_blocks(self, prompt: Sequence[tuple[int, int]], input_length: int,
                      block_size: int) -> list[int]:
        """Identities of the prompt's full blocks (input_length // block_size of them)."""
        full = input_length // block_size
        out: list[int] = []
        if full == 0:
            return out
        runs = iter(prompt)
        value, left, parent = self._run_blocks(runs, full, block_size, out)
        if len(out) < full:
            self._cut_blocks(runs, value, left, parent, full, block_size, input_length, out)
        return out

    def _run_blocks(self, runs: Iterator[tuple[int, int]], full: int, block_size: int,
                    out: list[int]) -> tuple[int, int, int]:
        """Fast path: leading runs of exactly one block each (a Mooncake prompt whose hash ids
        cover block_size tokens), each block keyed by its run's value (block_key, inline).
        Returns the run it stopped at (value, tokens left; 0 when the runs ran out) and the
        last block's identity."""
        ids = self._ids
        keys = self.keys
        parent = ROOT
        value, left = 0, 0
        for value, left in runs:
            if left != block_size or len(out) == full:
                break
            if type(value) is int and 0 <= value < _WIDE:
                key: object = (parent << _SHIFT) | value
            else:
                key = (parent, value)
            ident = ids.get(key)
            if ident is None:
                ident = len(ids)
                ids[key] = ident
                if keys is not None:
                    keys.append((parent, value))
            out.append(ident)
            parent = ident
        else:
            left = 0
        return value, left, parent

    def _cut_blocks(self, runs: Iterator[tuple[int, int]], value: int, left: int, parent: int,
                    full: int, block_size: int, input_length: int, out: list[int]) -> None:
        """The general path, from the run `value` with `left` tokens on: blocks cut across runs
        (content: the block's (value, count, ...) runs, or its one value)."""
        ids = self._ids
        keys = self.keys
        while len(out) < full:
            if left == 0:
                value, left = _next_run(runs, input_length)
            if left >= block_size and type(value) is int and 0 <= value < _WIDE:
                # Whole blocks inside one run of a one-int value (a synthetic prompt's long
                # run): block_key inline, block after block.
                whole = min(left // block_size, full - len(out))
                left -= whole * block_size
                for _ in range(whole):
                    wide = (parent << _SHIFT) | value
                    ident = ids.get(wide)
                    if ident is None:
                        ident = len(ids)
                        ids[wide] = ident
                        if keys is not None:
                            keys.append((parent, value))
                    out.append(ident)
                    parent = ident
                continue
            content: object
            if left >= block_size:
                content = value
                left -= block_size
            else:
                parts: list[int] = []
                need = block_size
                while need:
                    if left == 0:
                        value, left = _next_run(runs, input_length)
                    take = left if left < need else need
                    _extend(parts, value, take)
                    need -= take
                    left -= take
                content = value if len(parts) == 2 else tuple(parts)
            key = block_key(parent, content)
            ident = ids.get(key)
            if ident is None:
                ident = len(ids)
                ids[key] = ident
                if keys is not None:
                    keys.append((parent, content))
            out.append(ident)
            parent = ident


def _content(runs: Sequence[tuple[int, int]], start: int, count: int) -> list[int] | None:
    """The (value, count, ...) runs of `count` tokens from `start` (None: the runs end first)."""
    parts: list[int] = []
    pos = 0
    need = count
    for value, length in runs:
        end = pos + length
        if end <= start:
            pos = end
            continue
        offset = start - pos if start > pos else 0
        take = length - offset if length - offset < need else need
        _extend(parts, value, take)
        need -= take
        pos = end
        if need == 0:
            return parts
    return None


def _next_run(runs: Iterator[tuple[int, int]], input_length: int) -> tuple[int, int]:
    """The next run with tokens in it."""
    for value, count in runs:
        if count:
            return value, count
    raise ValueError(f"prompt runs cover fewer than input_length={input_length} tokens")


def _extend(parts: list[int], value: int, take: int) -> None:
    """Append `take` tokens of `value` to a block's (value, count, ...) runs."""
    if parts and parts[-2] == value:
        parts[-1] += take
    else:
        parts.append(value)
        parts.append(take)
