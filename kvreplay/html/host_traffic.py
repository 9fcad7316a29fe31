"""The host-tier (G2) traffic charts' data, from the report's `summary.g2_timeline`, and the
G3 tier's from `summary.g3_timeline` (the same shape, its directions named write and read).

Each run keeps its own bins (runs of different lengths have different bin widths), so counts
become rates: blocks and GB per simulated second. Occupancy is a share of capacity: all pools
together, and the fullest and emptiest pool when there are several, so the page stays the same
size whatever the number of pools. At most 256 points per run: neighbouring bins are merged
(counts summed over the merged span, occupancy read at its end).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import attrs

from kvreplay.engine.simtime import HORIZON_MS, NS_PER_MS
from kvreplay.html.columns import ReportShapeError, listing, mapping, number
from kvreplay.html.series import rounded

MAX_POINTS = 256  # per run: a report has up to 1,024 bins (engine/host_timeline.py)
PATH = "summary.g2_timeline"
G3_PATH = "summary.g3_timeline"
OCCUPANCY = "pools[].used_blocks / capacity_blocks"


def host_traffic(value: Any, path: str = PATH, directions: tuple[str, str] = ("d2h", "h2d"),
                 ) -> dict[str, Any] | None:
    """Rates and occupancy per bin end (None when the report has no timeline). `directions`
    name the timeline's copies into the tier ("stored") and out of it ("restored")."""
    if value is None:
        return None
    timeline = mapping(value, path)
    width = _bin_width(timeline.get("bin_ms"), path)
    into, out_of = directions
    keys = (f"{into}_blocks", f"{into}_bytes", f"{out_of}_blocks", f"{out_of}_bytes")
    traffic = {key: _numbers(timeline.get(key), f"{path}.{key}") for key in keys}
    bins = len(traffic[keys[0]])
    pools = [_pool(p, f"{path}.pools[{i}]", bins, keys[0])
             for i, p in enumerate(listing(timeline.get("pools"), path, "pools"))]
    for key, series in traffic.items():
        _same_length(series, bins, f"{path}.{key}", keys[0])
    group = max(1, -(-bins // MAX_POINTS))
    ends = [min(k + group, bins) for k in range(0, bins, group)]
    seconds = [(end - start) * width / 1000.0 for start, end in pairwise([0, *ends])]

    def rate(series: Sequence[float], scale: float = 1.0, key: str = "") -> list[float]:
        sums = [sum(series[k:k + group]) for k in range(0, bins, group)]
        return _finite([rounded(total / scale / s) for total, s in zip(sums, seconds,
                                                                       strict=True)], path, key)

    evicted = [sum(col) for col in zip(*(p.evicted for p in pools), strict=True)]
    out: dict[str, Any] = {
        "t_s": [rounded(end * width / 1000.0) for end in ends],
        "stored_blocks_per_s": rate(traffic[keys[0]], key=keys[0]),
        "restored_blocks_per_s": rate(traffic[keys[2]], key=keys[2]),
        "evicted_blocks_per_s": rate(evicted, key="pools[].evicted_blocks") if pools else None,
        "stored_gb_per_s": rate(traffic[keys[1]], 1e9, keys[1]),
        "restored_gb_per_s": rate(traffic[keys[3]], 1e9, keys[3]),
        "pools": len(pools),
        "occupancy": None, "occupancy_max": None, "occupancy_min": None,
    }
    if pools and bins:
        at_ends = [[p.used[end - 1] for end in ends] for p in pools]
        capacity = sum(p.capacity for p in pools)
        out["occupancy"] = _finite([rounded(sum(col) / capacity)
                                    for col in zip(*at_ends, strict=True)], path, OCCUPANCY)
        if len(pools) > 1:
            shares = [[u / p.capacity for u in used]
                      for p, used in zip(pools, at_ends, strict=True)]
            out["occupancy_max"] = _finite([rounded(max(col)) for col in zip(*shares, strict=True)],
                                           path, OCCUPANCY)
            out["occupancy_min"] = [rounded(min(col)) for col in zip(*shares, strict=True)]
    return out


@attrs.frozen
class _Pool:
    capacity: float
    used: list[float]
    evicted: list[float]


def _pool(value: Any, path: str, bins: int, first: str) -> _Pool:
    pool = mapping(value, path)
    used = _numbers(pool.get("used_blocks"), f"{path}.used_blocks")
    evicted = _numbers(pool.get("evicted_blocks"), f"{path}.evicted_blocks")
    _same_length(used, bins, f"{path}.used_blocks", first)
    _same_length(evicted, bins, f"{path}.evicted_blocks", first)
    return _Pool(_positive(pool.get("capacity_blocks"), path, "capacity_blocks"), used, evicted)


def _finite(values: list[float], path: str, key: str) -> list[float]:
    """The values, or a ReportShapeError when counts that no replay makes overflow a double."""
    if not all(math.isfinite(v) for v in values):
        raise ReportShapeError(f"{path}.{key}: counts too large for a rate or a share of "
                               "capacity (a double overflows): not what a replay counts")
    return values


def _bin_width(value: Any, path: str) -> float:
    """bin_ms: at least the engine's clock tick (1 ns), and bins that end within its horizon."""
    width = _positive(value, path, "bin_ms")
    if not 1 / NS_PER_MS <= width <= HORIZON_MS:
        raise ReportShapeError(f"{path}.bin_ms: {value:.6g} ms is not a bin width a replay "
                               "writes (between the engine's clock tick, 1 ns, and its horizon, "
                               "2**62 ns)")
    return width


def _positive(value: Any, path: str, key: str) -> float:
    n = number(value, path, key, optional=False)
    assert n is not None
    if n <= 0:
        raise ReportShapeError(f"{path}.{key}: expected a positive number, found {value}")
    return n


def _numbers(value: Any, path: str) -> list[float]:
    if value is None:
        raise ReportShapeError(f"{path}: expected an array, found null")
    out = []
    for i, item in enumerate(listing(value, path)):
        n = number(item, f"{path}[{i}]", optional=False)
        assert n is not None
        out.append(n)
    return out


def _same_length(series: Sequence[float], bins: int, path: str, first: str) -> None:
    if len(series) != bins:
        raise ReportShapeError(f"{path}: {len(series)} bins where {first} has {bins}")
