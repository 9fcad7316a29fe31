"""Downsampled series for the plots: CDFs at ~1,000 quantiles, timelines on a shared grid.

Everything here is exact arithmetic on sorted columns, in a fixed order, rounded to 6
significant digits at the end: the same columns give the same numbers on every machine.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from itertools import accumulate, pairwise
from typing import Any

import attrs

CDF_POINTS = 1000
TIMELINE_POINTS = 2000
RATIO_POINTS = 100
# 1, 2, 2.5, 5 x 10**k: bin widths that read well on an axis (parsed, so exact everywhere).
_NICE = [float(f"{m}e{e}") for e in range(-3, 16) for m in ("1", "2", "2.5", "5")]


def rounded(value: float) -> float:
    """6 significant digits: invisible on a plot, and a third of the JSON text."""
    return float(f"{value:.6g}")


def nice_width(span: float, points: int) -> float:
    """The smallest 1-2-2.5-5 width that covers `span` ms in at most `points` bins."""
    target = span / max(points, 1)
    return next((w for w in _NICE if w >= target), _NICE[-1])


@attrs.frozen
class Grid:
    """Bins [start + k*width, start + (k+1)*width) for k < bins; points sit at bin ends."""

    start: float
    width: float
    bins: int

    def edges(self) -> list[float]:
        return [self.start + k * self.width for k in range(self.bins + 1)]

    def axis_s(self) -> list[float]:
        """Bin ends in seconds (the x of every timeline series)."""
        return [rounded(e / 1000.0) for e in self.edges()[1:]]

    def to_json(self) -> dict[str, Any]:
        return {"start_s": rounded(self.start / 1000.0), "bin_s": rounded(self.width / 1000.0),
                "t_s": self.axis_s()}


def make_grid(first: float, last: float, points: int) -> Grid:
    """A grid from `first` to past `last` (ms) with at most about `points` bins."""
    width = nice_width(max(last - first, 1e-3), points)
    start = math.floor(first / width) * width
    bins = max(1, math.ceil((last - start) / width))
    if start + bins * width <= last:  # the last instant belongs to a bin
        bins += 1
    return Grid(start, width, bins)


def bin_points(events: int, full: int, floor: int, per_event: int) -> int:
    """Bins for a run of `events` requests: no finer than the events can fill, at most `full`."""
    return max(floor, min(full, events * per_event))


def cdf(values: Sequence[float]) -> dict[str, list[float]] | None:
    """The empirical CDF at up to CDF_POINTS ranks (min and max included): x, P(X <= x); it
    starts from 0 at the smallest value, so the curve rises from the axis."""
    n = len(values)
    if n == 0:
        return None
    ordered = sorted(values)
    if n <= CDF_POINTS:
        ranks = list(range(n))
    else:  # rank round(i (n-1) / (K-1)), in integers
        k = CDF_POINTS - 1
        ranks = [(2 * i * (n - 1) + k) // (2 * k) for i in range(CDF_POINTS)]
    xs = [rounded(ordered[r]) for r in ranks]
    return {"x": [xs[0], *xs], "p": [0.0, *(rounded((r + 1) / n) for r in ranks)]}


_SUMMARY_QUANTILES = (("min", 0.0), ("median", 0.5), ("p75", 0.75), ("p90", 0.9),
                      ("p95", 0.95), ("p99", 0.99), ("max", 1.0))


# The sample count behind each summary distribution (a token gap needs a TPOT sample too).
_SAMPLES = {"ttft": "num_ttft_samples", "tpot": "num_tpot_samples", "itl": "num_tpot_samples",
            "e2e_latency": "num_e2e_latency_samples"}


def summary_cdf(summary: Mapping[str, Any], name: str) -> dict[str, list[float]] | None:
    """The CDF through the summary's percentiles of `name` (e.g. `itl`), when it has them
    (an empty distribution reports zeros: that is no CDF)."""
    if summary.get(_SAMPLES.get(name, ""), 1) == 0:
        return None
    xs: list[float] = []
    ps: list[float] = []
    for stat, p in _SUMMARY_QUANTILES:
        value = summary.get(f"{stat}_{name}_ms")
        if isinstance(value, int | float) and not isinstance(value, bool):
            # Sketch percentiles are within 0.1 % and may dip below the exact min: keep x sorted.
            xs.append(rounded(max(float(value), xs[-1]) if xs else float(value)))
            ps.append(p)
    return {"x": xs, "p": ps} if xs else None


def cumulative(times: Sequence[float], grid: Grid) -> list[int]:
    """How many of `times` are at or before each bin end."""
    ordered = sorted(times)
    return [bisect_right(ordered, edge) for edge in grid.edges()[1:]]


def occupancy(starts: Sequence[float], ends: Sequence[float], grid: Grid) -> list[float]:
    """The time-weighted mean number of open intervals [start, end) in each bin."""
    a = sorted(starts)
    b = sorted(ends)
    sum_a = [0.0, *accumulate(a)]
    sum_b = [0.0, *accumulate(b)]

    def area(t: float) -> float:  # integral of the open count over (-inf, t]
        i, j = bisect_left(a, t), bisect_left(b, t)
        return (i * t - sum_a[i]) - (j * t - sum_b[j])

    edges = grid.edges()
    areas = [area(t) for t in edges]
    return [rounded(max((hi - lo) / grid.width, 0.0)) for lo, hi in pairwise(areas)]


def sums(times: Sequence[float], values: Sequence[float], grid: Grid) -> list[float]:
    """`values` summed per bin of their `times` (times outside the grid go to the edge bins)."""
    out = [0.0] * grid.bins
    for t, v in zip(times, values, strict=True):
        k = min(max(int((t - grid.start) // grid.width), 0), grid.bins - 1)
        out[k] += v
    return out


def ratios(numerators: Sequence[float], denominators: Sequence[float]) -> list[float | None]:
    """Per-bin ratio; None where a bin has no denominator (a gap on the plot)."""
    return [rounded(n / d) if d > 0 else None
            for n, d in zip(numerators, denominators, strict=True)]
