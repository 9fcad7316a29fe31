"""G2 host traffic over simulated time, in a bounded number of bins (the report's `g2_timeline`).

Bins are [k x width, (k + 1) x width) of simulated time since the run's origin (its start, or
the warmup barrier). A copy counts when the pool accounts it, as `g2_transfers` does: a store
when its pass reserves the cohort, a restore when its admission pins the pool's blocks; so the
bins add up to `g2_transfers` exactly. Occupancy is each pool's used blocks (resident plus
pending) at the bin's end: it changes only when a store reserves (growing, or evicting to make
room, which leaves the pool full), so the end value is also the bin's maximum.

Width starts at 1 ms and doubles, merging neighbour pairs, whenever a bin past the cap is
needed: at most `max_bins` bins whatever the run's length. Merging is exact: counts add, the
occupancy of a merged bin is its later half's.
"""

from __future__ import annotations

from collections.abc import Sized
from typing import Any, Protocol

from kvreplay.engine.simtime import NS_PER_MS

MAX_BINS = 1024
FIRST_WIDTH_NS = NS_PER_MS


class Clock(Protocol):
    @property
    def now(self) -> int:
        """Simulated ns (the loop's port)."""
        ...


class Pool(Protocol):
    """What the timeline reads of a pool (a G2 HostPool, or a view of a G3 pool)."""

    @property
    def index(self) -> int: ...

    @property
    def block_bytes(self) -> int: ...

    @property
    def entries(self) -> Sized: ...


class HostTimeline:
    """Per-bin copy counts of a deployment's host pools and each pool's occupancy.

    The G3 tier keeps one too (g3_runtime.py): its writes are the stores, its reads the loads,
    named by `directions` in the report."""

    __slots__ = ("clock", "d2h_blocks", "d2h_bytes", "directions", "evicted", "h2d_blocks",
                 "h2d_bytes", "level", "max_bins", "origin", "used", "width")

    def __init__(self, clock: Clock, pools: int, max_bins: int = MAX_BINS,
                 directions: tuple[str, str] = ("d2h", "h2d")) -> None:
        self.clock = clock
        self.directions = directions
        self.max_bins = max_bins
        self.level = [0] * pools  # each pool's used blocks now
        self.origin = 0
        self.restart(0)

    def restart(self, origin_ns: int) -> None:
        """Count from `origin_ns` on (the warmup barrier); occupancy carries on."""
        self.origin = origin_ns
        self.width = FIRST_WIDTH_NS
        self.d2h_blocks: list[int] = []
        self.d2h_bytes: list[int] = []
        self.h2d_blocks: list[int] = []
        self.h2d_bytes: list[int] = []
        self.used: list[list[int]] = [[] for _ in self.level]
        self.evicted: list[list[int]] = [[] for _ in self.level]

    def add_pool(self) -> None:
        """A pool joins (at the start, or a worker added by scaling): empty until now."""
        self.level.append(0)
        self.used.append([0] * len(self.d2h_blocks))
        self.evicted.append([0] * len(self.d2h_blocks))

    # -- recording (host_pool.py) ------------------------------------------------------------

    def stored(self, pool: Pool, blocks: int, evicted: int) -> None:
        k = (self.clock.now - self.origin) // self.width
        if k >= len(self.d2h_blocks):
            k = self._bin(self.clock.now)
        self.d2h_blocks[k] += blocks
        self.d2h_bytes[k] += blocks * pool.block_bytes
        i = pool.index
        if evicted:
            self.evicted[i][k] += evicted
        used = len(pool.entries)
        self.level[i] = used
        self.used[i][k] = used

    def loaded(self, pool: Pool, blocks: int) -> None:
        k = self._bin(self.clock.now)
        self.h2d_blocks[k] += blocks
        self.h2d_bytes[k] += blocks * pool.block_bytes

    def _bin(self, now_ns: int) -> int:
        """The bin of `now_ns`, created (and the width doubled as needed) if new."""
        k = (now_ns - self.origin) // self.width
        if k >= len(self.d2h_blocks):
            while k >= self.max_bins:
                self._halve()
                k = (now_ns - self.origin) // self.width
            self._extend(k + 1)
        return k

    def _extend(self, bins: int) -> None:
        more = bins - len(self.d2h_blocks)
        if more <= 0:
            return
        zeros = [0] * more
        for series in (self.d2h_blocks, self.d2h_bytes, self.h2d_blocks, self.h2d_bytes,
                       *self.evicted):
            series.extend(zeros)
        for used, level in zip(self.used, self.level, strict=True):
            used.extend([level] * more)

    def _halve(self) -> None:
        """Double the width: bins 2j and 2j + 1 become bin j."""
        self.width *= 2
        for name in ("d2h_blocks", "d2h_bytes", "h2d_blocks", "h2d_bytes"):
            setattr(self, name, _pair_sums(getattr(self, name)))
        self.evicted = [_pair_sums(s) for s in self.evicted]
        self.used = [s[1::2] + s[-1:] if len(s) % 2 else s[1::2] for s in self.used]

    # -- report ------------------------------------------------------------------------------

    def to_report(self, end_ns: int, names: list[tuple[str, str, int]]) -> dict[str, Any]:
        """The bins up to `end_ns` (the run's end); `names`: (name, scope, capacity) per pool."""
        span = end_ns - self.origin
        self._bin(self.origin + max(span - 1, 0))  # the last instant's bin exists
        out, into = self.directions
        return {
            "bin_ms": self.width / NS_PER_MS,
            f"{out}_blocks": list(self.d2h_blocks),
            f"{out}_bytes": list(self.d2h_bytes),
            f"{into}_blocks": list(self.h2d_blocks),
            f"{into}_bytes": list(self.h2d_bytes),
            "pools": [{"name": name, "scope": scope, "capacity_blocks": capacity,
                       "used_blocks": list(used), "evicted_blocks": list(evicted)}
                      for (name, scope, capacity), used, evicted
                      in zip(names, self.used, self.evicted, strict=True)],
        }


def _pair_sums(series: list[int]) -> list[int]:
    out = [a + b for a, b in zip(series[::2], series[1::2], strict=False)]
    if len(series) % 2:
        out.append(series[-1])
    return out
