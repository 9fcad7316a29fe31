"""Trace-level analysis on the engine's own chained-identity interning.

`prefix_hit_blocks` is the exact upper bound of G1 prefix reuse: one rank whose cache never
evicts, every hash id one block. A row's hit blocks are its longest common prefix with all
earlier rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kvreplay.engine.identity import ROOT, BlockIdentities


def prefix_hit_blocks(rows: Iterable[Sequence[int]]) -> tuple[int, int]:
    """(hit blocks, total blocks) over rows of hash ids, in row order."""
    identities = BlockIdentities()
    hits = total = 0
    for hash_ids in rows:
        parent = ROOT
        matching = True
        for hash_id in hash_ids:
            parent, new = identities.intern(parent, hash_id)
            if new:
                matching = False
            elif matching:
                hits += 1
        total += len(hash_ids)
    return hits, total
