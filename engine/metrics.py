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
_LOW_BITS = (1 << 26) - 1
_FLUSH_AT = 64  # counts summed in machine-size partial sums before they are folded in
_SCALED = 960  # exponents whose 2**(53 - e) and 2**e are normal floats


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
        """add(value, count) for each (value, count) (the same integers as add_columns)."""
        pairs = runs if isinstance(runs, list | tuple) else list(runs)
        self.add_columns([value for value, _ in pairs], [count for _, count in pairs])

    def add_columns(self, values: list[float], counts: list[int]) -> None:
        """add(values[i], counts[i]) for each i, in one loop. A positive value of the current
        exponent e (inside [low, high) = [2**(e - 1), 2**e)) gives its mantissa as value *
        2**(53 - e), exact, without frexp; the mantissa is split at bit 26 so the partial sums
        of a few runs stay machine-size integers (under 2**62 while `pending`, the counts since
        the last flush, is below _FLUSH_AT and no run is heavier), and they are folded into
        the exponent's exact sums then (whole**2 = hi**2 2**52 + 2 hi lo 2**26 + lo**2)."""
        groups = self._groups
        frexp, ldexp = math.frexp, math.ldexp
        n = self.count
        low = high = scale = 0.0
        group: list[int] = [0, 0]
        sum_hi = sum_lo = sq_hh = sq_hl = sq_ll = pending = 0
        for value, count in zip(values, counts, strict=True):
            if low <= value < high:
                whole = int(value * scale)
            else:
                if pending:
                    group[0] += (sum_hi << 26) + sum_lo
                    group[1] += (sq_hh << 52) + (sq_hl << 27) + sq_ll
                    sum_hi = sum_lo = sq_hh = sq_hl = sq_ll = pending = 0
                mantissa, e = frexp(value)
                found = groups.get(e)
                if found is None:
                    found = groups[e] = [0, 0]
                group = found
                whole = int(mantissa * _MANTISSA)
                if value > 0.0 and -_SCALED < e < _SCALED:
                    low, high, scale = ldexp(0.5, e), ldexp(1.0, e), ldexp(1.0, 53 - e)
                else:  # zero, negative or extreme: every such value takes this branch
                    low = high = 0.0
            hi = whole >> 26
            lo = whole & _LOW_BITS
            count_hi = count * hi
            count_lo = count * lo
            sum_hi += count_hi
            sum_lo += count_lo
            sq_hh += count_hi * hi
            sq_hl += count_hi * lo
            sq_ll += count_lo * lo
            pending += count
            n += count
            if pending >= _FLUSH_AT:
                group[0] += (sum_hi << 26) + sum_lo
                group[1] += (sq_hh << 52) + (sq_hl << 27) + sq_ll
                sum_hi = sum_lo = sq_hh = sq_hl = sq_ll = pending = 0
        if pending:
            group[0] += (sum_hi << 26) + sum_lo
            group[1] += (sq_hh << 52) + (sq_hl << 27) + sq_ll
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
        """add(value, count) for each (value, count), a few thousand runs at a time."""
        runs = iter(runs)
        while chunk := list(islice(runs, 4096)):
            self.add_columns([value for value, _ in chunk], [count for _, count in chunk])

    def add_columns(self, values: list[float], counts: list[int]) -> None:
        """add(values[i], counts[i]) for each i; values are checked once: columns whose sum is
        finite and counts positive are kept whole (an infinite or NaN value makes the sum
        non-finite), any other are filtered run by run."""
        if len(values) != len(counts):
            raise ValueError(f"{len(values)} values for {len(counts)} counts")
        if not values:
            return
        if not (math.isfinite(sum(values)) and min(counts) > 0):
            isfinite = math.isfinite
            kept = [(value, count) for value, count in zip(values, counts, strict=True)
                    if count > 0 and isfinite(value)]
            values = [value for value, _ in kept]
            counts = [count for _, count in kept]
        self._sketch.add_finite_columns(values, counts)
        self._moments.add_columns(values, counts)

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
