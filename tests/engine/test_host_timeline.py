"""G2 host traffic over time (engine/host_timeline.py): bins, exact merging, the report key."""

from __future__ import annotations

import random
from typing import Any

import pytest
from g2_support import EXAMPLE5, g2, rank, run_agg

from kvreplay.engine.host_timeline import HostTimeline
from kvreplay.engine.report import report_from_run

MS = 1_000_000


class FakePool:
    """What the timeline reads of a host pool: its index, block bytes and entries."""

    def __init__(self, index: int, block_bytes: int) -> None:
        self.index = index
        self.block_bytes = block_bytes
        self.entries: list[int] = []


class Clock:
    def __init__(self) -> None:
        self.now = 0


Event = tuple[int, int, str, int, int, int]  # (ns, pool, kind, blocks, evicted, used after)


def random_events(seed: int, pools: int, count: int, span_ns: int) -> list[Event]:
    rng = random.Random(seed)
    times = sorted(rng.randrange(span_ns) for _ in range(count))
    used = [0] * pools
    out = []
    for t in times:
        p = rng.randrange(pools)
        if rng.random() < 0.5:
            blocks = rng.randint(1, 5)
            evicted = min(rng.randint(0, 3), used[p])
            used[p] += blocks - evicted
            out.append((t, p, "store", blocks, evicted, used[p]))
        else:
            out.append((t, p, "load", rng.randint(1, 5), 0, used[p]))
    return out


def record(events: list[Event], pools: list[FakePool], max_bins: int, end_ns: int,
           ) -> dict[str, Any]:
    clock = Clock()
    timeline = HostTimeline(clock, len(pools), max_bins)
    for t, p, kind, blocks, evicted, used in events:
        clock.now = t
        pool = pools[p]
        if kind == "store":
            pool.entries = list(range(used))
            timeline.stored(pool, blocks, evicted)  # type: ignore[arg-type]
        else:
            timeline.loaded(pool, blocks)  # type: ignore[arg-type]
    names = [(f"p{i}", "dp_rank_local", 100) for i in range(len(pools))]
    return timeline.to_report(end_ns, names)


def direct(events: list[Event], pools: list[FakePool], width_ns: int, bins: int,
           ) -> dict[str, Any]:
    """The same events binned at one width, without any merging."""
    out: dict[str, Any] = {key: [0] * bins for key in ("d2h_blocks", "d2h_bytes", "h2d_blocks",
                                                        "h2d_bytes")}
    used = [[0] * bins for _ in pools]
    evicted = [[0] * bins for _ in pools]
    for t, p, kind, blocks, gone, level in events:
        k = t // width_ns
        side = "d2h" if kind == "store" else "h2d"
        out[f"{side}_blocks"][k] += blocks
        out[f"{side}_bytes"][k] += blocks * pools[p].block_bytes
        if kind == "store":
            evicted[p][k] += gone
            for j in range(k, bins):
                used[p][j] = level
    out["used"] = used
    out["evicted"] = evicted
    return out


@pytest.mark.parametrize("seed", range(12))
def test_merged_bins_equal_binning_at_the_final_width(seed: int) -> None:
    """However many times the width doubled, the bins are what the final width gives
    directly: counts summed, occupancy the level at each bin's end."""
    pools = [FakePool(0, 1000), FakePool(1, 3000)]
    events = random_events(seed, 2, 200, 997 * MS)
    got = record(events, pools, 8, 1000 * MS)
    width = round(got["bin_ms"] * MS)
    bins = len(got["d2h_blocks"])
    assert bins <= 8 and width > MS and (width // MS) & (width // MS - 1) == 0
    assert (bins - 1) * width < 1000 * MS <= bins * width
    want = direct(events, pools, width, bins)
    for key in ("d2h_blocks", "d2h_bytes", "h2d_blocks", "h2d_bytes"):
        assert got[key] == want[key], key
    assert [p["used_blocks"] for p in got["pools"]] == want["used"]
    assert [p["evicted_blocks"] for p in got["pools"]] == want["evicted"]


def test_bins_stay_bounded_for_a_long_run() -> None:
    """A run of years of simulated time still has at most 1,024 bins."""
    clock = Clock()
    pool = FakePool(0, 1)
    timeline = HostTimeline(clock, 1)
    for t in (0, 5 * MS, 10**17):
        clock.now = t
        timeline.loaded(pool, 1)  # type: ignore[arg-type]
    report = timeline.to_report(10**17 + 1, [("p", "cluster_shared", 4)])
    assert 512 < len(report["h2d_blocks"]) <= 1024
    assert sum(report["h2d_blocks"]) == 3 and report["h2d_blocks"][0] == 2


def test_restart_counts_from_the_barrier_and_carries_occupancy() -> None:
    """After a warmup barrier bins start at the barrier; the pool's level carries over."""
    clock = Clock()
    pool = FakePool(0, 10)
    timeline = HostTimeline(clock, 1)
    clock.now = 3 * MS
    pool.entries = [1, 2, 3]
    timeline.stored(pool, 3, 0)  # type: ignore[arg-type]
    clock.now = 50 * MS
    timeline.restart(clock.now)
    clock.now = 52 * MS
    timeline.loaded(pool, 2)  # type: ignore[arg-type]
    report = timeline.to_report(54 * MS, [("p", "dp_rank_local", 8)])
    assert report["d2h_blocks"] == [0, 0, 0, 0] and report["h2d_blocks"] == [0, 0, 2, 0]
    assert report["h2d_bytes"] == [0, 0, 20, 0]
    assert report["pools"] == [{"name": "p", "scope": "dp_rank_local", "capacity_blocks": 8,
                                "used_blocks": [3, 3, 3, 3], "evicted_blocks": [0, 0, 0, 0]}]


@pytest.mark.parametrize(("scope", "name"), [("cluster_shared", "shared"),
                                             ("dp_rank_local", "agg 0")])
def test_example_5_timeline(scope: str, name: str) -> None:
    """engine.md example 5: A's two blocks are stored at 0, B's at 100, A restores two at 200;
    1 ms bins until the run ends at 204 ms; 2 then 4 of 8 host blocks used."""
    summary = report_from_run(run_agg(EXAMPLE5, rank(g2(scope=scope))))["summary"]
    timeline = summary["g2_timeline"]
    assert timeline["bin_ms"] == 1.0 and len(timeline["d2h_blocks"]) == 204
    nonzero = {key: {i: v for i, v in enumerate(timeline[key]) if v}
               for key in ("d2h_blocks", "d2h_bytes", "h2d_blocks", "h2d_bytes")}
    assert nonzero == {"d2h_blocks": {0: 2, 100: 2}, "d2h_bytes": {0: 2_000_000, 100: 2_000_000},
                       "h2d_blocks": {200: 2}, "h2d_bytes": {200: 2_000_000}}
    [pool] = timeline["pools"]
    assert (pool["name"], pool["scope"], pool["capacity_blocks"]) == (name, scope, 8)
    assert pool["used_blocks"] == [2] * 100 + [4] * 104
    assert pool["evicted_blocks"] == [0] * 204


def test_no_host_tier_no_timeline() -> None:
    """Without G2 the summary has no g2_timeline (reports stay as they were)."""
    summary = report_from_run(run_agg(EXAMPLE5, rank(None)))["summary"]
    assert "g2_timeline" not in summary
