"""Latency distributions as the reference reports them.

Per-request distributions (TTFT, TTST, TPOT, E2E) keep every sample: percentile p is the sorted
sample at rank round((n - 1) * p / 100) (halves rounded up). Token-level distributions (ITL and the
per-user token rate 1000 / ITL) arrive as (gap_ms, count) runs and go through the reference's
DDSketch (`sketch.py`), with rank r read at quantile (r + 0.5) / (n - 1) (1.0 at the top).

Means and population standard deviations are computed exactly (integer sums of the binary
fractions) and rounded once, so they do not depend on summation order or on how runs were split;
they can differ from the reference's running float sums in the last bits.
"""

from __future__ import annotations

import math
import operator
from collections import Counter
from collections.abc import Iterable
from itertools import islice
from operator import itemgetter

from kvreplay.engine.sketch import Sketch

PERCENTILES = (("median", 50.0), ("p75", 75.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0))


_STATS = ("count", "mean", "min", "max", "median", "p75", "p90", "p95", "p99", "std")


class Distribution:
    """mean, min, max, median, p75, p90, p95, p99 and std of one metric (all 0.0 when empty).

    A plain value class (what `@attrs.frozen` gave it: equality, hashing, repr; not importing
    attrs at each run's start, issue 29), compiled by mypyc with the engine core."""


    def __init__(self, count: int = 0, mean: float = 0.0, min: float = 0.0, max: float = 0.0,
                 median: float = 0.0, p75: float = 0.0, p90: float = 0.0, p95: float = 0.0,
                 p99: float = 0.0, std: float = 0.0) -> None:
        self.count = count
        self.mean = mean
        self.min = min
        self.max = max
        self.median = median
        self.p75 = p75
        self.p90 = p90
        self.p95 = p95
        self.p99 = p99
        self.std = std

    def _values(self) -> tuple[float, ...]:
        return (self.count, self.mean, self.min, self.max, self.median, self.p75, self.p90,
                self.p95, self.p99, self.std)

    def __eq__(self, other: object) -> bool:
        if type(other) is not Distribution:
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in zip(_STATS, self._values(), strict=True))
        return f"Distribution({shown})"

    def summary(self, name: str, unit: str = "_ms") -> dict[str, float]:
        """Summary keys `{stat}_{name}{unit}`, e.g. `p90_ttft_ms`."""
        return {f"{stat}_{name}{unit}": getattr(self, stat)
                for stat in ("mean", "min", "max", "median", "p75", "p90", "p95", "p99", "std")}


def round_half_up(x: float) -> int:
    """Rust's f64::round for x >= 0."""
    whole = math.floor(x)
    return int(whole) + (1 if x - whole >= 0.5 else 0)


def percentile_rank(n: int, percentile: float) -> int:
    """0-based rank of a percentile among n sorted samples."""
    return min(round_half_up((n - 1) * percentile / 100.0), n - 1)


_MANTISSA = 9007199254740992.0  # 2**53: a float's mantissa from frexp, as an integer


class ExactMoments:
    """Count, sum and sum of squares kept exactly. A finite float is m * 2**(e - 53) with m an
    integer of at most 53 bits (frexp): the values of one binary exponent e are summed as
    integers, one group per exponent, and the groups are shifted to a common scale only when
    the moments are read (runs sorted by value change exponent a few times, so a run costs a
    multiplication and two additions of small integers, never a shift of the whole sum)."""

    __slots__ = ("_groups", "count")

    def __init__(self) -> None:
        self.count = 0
        self._groups: dict[int, list[int]] = {}  # exponent -> [sum of m, sum of m * m]

    def add(self, value: float, count: int = 1) -> None:
        self.add_runs(((value, count),))

    def add_runs(self, runs: Iterable[tuple[float, int]]) -> None:
        """add(value, count) for each (value, count), in one loop (the same integers)."""
        groups = self._groups
        frexp = math.frexp
        n = self.count
        exponent = 0
        total = total_sq = 0
        group: list[int] | None = None
        for value, count in runs:
            mantissa, e = frexp(value)
            if group is None or e != exponent:
                if group is not None:
                    group[0] += total
                    group[1] += total_sq
                exponent = e
                group = groups.get(e)
                if group is None:
                    group = groups[e] = [0, 0]
                total = total_sq = 0
            whole = int(mantissa * _MANTISSA)
            weighted = count * whole
            total += weighted
            total_sq += weighted * whole
            n += count
        if group is not None:
            group[0] += total
            group[1] += total_sq
        self.count = n

    def _sums(self) -> tuple[int, int, int]:
        """(scale, sum, sum of squares), both sums integers over 2**scale (2**(2 scale))."""
        groups = self._groups
        scale = max(0, *(53 - e for e in groups))  # >= 0: values from 2**53 up are whole
        total = total_sq = 0
        for e, (part, part_sq) in groups.items():
            up = scale - 53 + e
            total += part << up
            total_sq += part_sq << (2 * up)
        return scale, total, total_sq

    def mean(self) -> float:
        if self.count == 0:
            return 0.0
        scale, total, _ = self._sums()
        # operator.truediv: Python's correctly rounded int division (mypyc's `/` on ints below
        # 2**62 divides their float roundings, which can differ in the last bit)
        mean: float = operator.truediv(total, self.count << scale)
        return mean

    def std(self) -> float:
        """Population standard deviation."""
        if self.count == 0:
            return 0.0
        scale, total, total_sq = self._sums()
        spread = self.count * total_sq - total * total
        variance: float = operator.truediv(spread, (self.count * self.count) << (2 * scale))
        return math.sqrt(variance)


_RUNS_AT_ONCE = 1 << 16  # samples counted at once: memory stays small when they all differ


def exact_distribution(values: Iterable[float]) -> Distribution:
    """Statistics over every sample."""
    ordered = sorted(values)
    if not ordered:
        return Distribution()
    moments = ExactMoments()
    n = len(ordered)
    for start in range(0, n, _RUNS_AT_ONCE):  # equal samples as one run: the same exact sums
        moments.add_runs(Counter(ordered[start:start + _RUNS_AT_ONCE]).items())
    picks = {name: ordered[percentile_rank(n, p)] for name, p in PERCENTILES}
    return Distribution(count=n, mean=moments.mean(), min=ordered[0], max=ordered[-1],
                        std=moments.std(), **picks)


class StreamingDistribution:
    """Token-level samples as (value, count) runs: exact moments and extremes, sketched ranks."""

    __slots__ = ("_moments", "_sketch")

    def __init__(self) -> None:
        self._sketch = Sketch()
        self._moments = ExactMoments()

    @property
    def count(self) -> int:
        return self._moments.count

    def add(self, value: float, count: int = 1) -> None:
        if count <= 0 or not math.isfinite(value):
            return
        self._sketch.add(value, count)
        self._moments.add(value, count)

    def add_runs(self, runs: Iterable[tuple[float, int]]) -> None:
        """add(value, count) for each (value, count), a list as it is, any other iterable a
        few thousand runs at a time; values are checked once: a chunk whose sum is finite and
        counts positive is kept whole (an infinite or NaN value makes the sum non-finite), any
        other is filtered run by run."""
        if isinstance(runs, list):
            self._add_chunk(runs)
            return
        runs = iter(runs)
        while chunk := list(islice(runs, 4096)):
            self._add_chunk(chunk)

    def _add_chunk(self, chunk: list[tuple[float, int]]) -> None:
        if not chunk:
            return
        isfinite = math.isfinite
        kept = chunk
        if not (isfinite(sum(map(itemgetter(0), chunk))) and min(map(itemgetter(1), chunk)) > 0):
            kept = [(value, count) for value, count in chunk if count > 0 and isfinite(value)]
        self._sketch.add_finite_runs(kept)
        self._moments.add_runs(kept)

    def percentile(self, percentile: float) -> float:
        span = self.count - 1
        rank = round_half_up(span * percentile / 100.0)
        q = 1.0 if span <= 0 or rank >= span else (rank + 0.5) / span
        return self._sketch.quantile(q)

    def finish(self) -> Distribution:
        if self.count == 0:
            return Distribution()
        picks = {name: self.percentile(p) for name, p in PERCENTILES}
        return Distribution(count=self.count, mean=self._moments.mean(), min=self._sketch.min,
                            max=self._sketch.max, std=self._moments.std(), **picks)
