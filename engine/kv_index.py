"""The router's view of device KV: which schedulers hold which prompt blocks (from KV events).

Identities are chained, so one flat map from block identity to a bitmask of schedulers is the
radix tree: a scheduler's overlap with a request is how many leading blocks of the request's
chain it holds.
"""

from __future__ import annotations

from kvreplay.engine.pool import STORED


class KvIndex:
    __slots__ = ("holders",)

    def __init__(self) -> None:
        self.holders: dict[int, int] = {}

    def apply(self, scheduler_id: int, events: list[tuple[int, int]]) -> None:
        holders = self.holders
        bit = 1 << scheduler_id
        for kind, ident in events:
            if kind == STORED:
                holders[ident] = holders.get(ident, 0) | bit
            else:
                left = holders.get(ident, 0) & ~bit
                if left:
                    holders[ident] = left
                else:
                    holders.pop(ident, None)

    def overlaps(self, chain: list[int], schedulers: int) -> list[int]:
        """Per scheduler, the number of leading chain blocks it holds."""
        out = [0] * schedulers
        mask = (1 << schedulers) - 1
        holders = self.holders
        depth = 0
        for ident in chain:
            held = holders.get(ident, 0) & mask
            dropped = mask & ~held
            if dropped:
                s = 0
                while dropped:
                    if dropped & 1:
                        out[s] = depth
                    dropped >>= 1
                    s += 1
            mask = held
            if not mask:
                return out
            depth += 1
        s = 0
        while mask:
            if mask & 1:
                out[s] = depth
            mask >>= 1
            s += 1
        return out
