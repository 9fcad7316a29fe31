"""The router's view of KV: which schedulers hold which prompt blocks (from KV events).

Identities are chained, so one flat map from block identity to a bitmask of schedulers is the
radix tree: a scheduler's overlap with a request is how many leading blocks of the request's
chain it holds. Two tiers: device (G1) and host_pinned (G2). The host tier is also the residency
mirror of engine.md section 8: a G2 `Stored` for a block the scheduler already holds, or a
`Removed` for one it does not, means a duplicated, lost or reordered event, and the replay fails
naming it instead of letting the router's view drift from the engine.
"""

from __future__ import annotations

from kvreplay.engine.errors import EngineError
from kvreplay.engine.pool import STORED

DEVICE, HOST = 0, 1


class KvEventError(EngineError):
    """A KV event the router's residency mirror cannot accept."""


class KvIndex:
    __slots__ = ("holders", "host_holders")

    def __init__(self) -> None:
        self.holders: dict[int, int] = {}
        self.host_holders: dict[int, int] = {}

    def apply(self, scheduler_id: int, events: list[tuple[int, int]], tier: int = DEVICE) -> None:
        bit = 1 << scheduler_id
        if tier == HOST:
            self._apply_host(scheduler_id, bit, events)
            return
        holders = self.holders
        for kind, ident in events:
            if kind == STORED:
                holders[ident] = holders.get(ident, 0) | bit
            else:
                left = holders.get(ident, 0) & ~bit
                if left:
                    holders[ident] = left
                else:
                    holders.pop(ident, None)

    def _apply_host(self, scheduler_id: int, bit: int, events: list[tuple[int, int]]) -> None:
        holders = self.host_holders
        for kind, ident in events:
            held = holders.get(ident, 0)
            if kind == STORED:
                if held & bit:
                    raise KvEventError(
                        f"failed to apply replay KV event: host_pinned stored block {ident} on "
                        f"scheduler {scheduler_id}, which already holds it (a duplicated or "
                        "reordered event)")
                holders[ident] = held | bit
            else:
                if not held & bit:
                    raise KvEventError(
                        f"failed to apply replay KV event: host_pinned removed block {ident} on "
                        f"scheduler {scheduler_id}, which never stored it (a lost or reordered "
                        "event)")
                left = held & ~bit
                if left:
                    holders[ident] = left
                else:
                    del holders[ident]

    def clear(self, scheduler_id: int) -> None:
        """A `Cleared` event (or the scheduler's removal): drop both tiers of its residency."""
        bit = 1 << scheduler_id
        for holders in (self.holders, self.host_holders):
            for ident in [i for i, m in holders.items() if m & bit]:
                left = holders[ident] & ~bit
                if left:
                    holders[ident] = left
                else:
                    del holders[ident]

    def host_extensions(self, chain: list[int], device: list[int]) -> list[int]:
        """Per scheduler, host-pinned blocks contiguous beyond its device prefix."""
        host = self.host_holders
        out = [0] * len(device)
        if not host:
            return out
        for s, depth in enumerate(device):
            bit = 1 << s
            n = 0
            for ident in chain[depth:]:
                if host.get(ident, 0) & bit:
                    n += 1
                else:
                    break
            out[s] = n
        return out

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
