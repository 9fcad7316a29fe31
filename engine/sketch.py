"""The reference's quantile sketch for token-level distributions (ITL, per-user token rate).

A replica of `ddsketchy` as the reference configures it: relative accuracy 0.001, logarithmic
keys `ceil(ln(v) / ln(gamma))`, a zero bucket below the smallest normal value, and stores capped
at 32,768 bins that collapse their lowest keys. A quantile q reads the bin at rank
floor(q * (count - 1)) and returns `gamma**key * 2 / (1 + gamma)`; a one-sample sketch returns
that sample. Bins are kept as {key: count}, so values arrive as (value, count) runs and the result
does not depend on how runs were split.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

RELATIVE_ACCURACY = 0.001
MAX_BINS = 32_768
GAMMA = 1.0 + (2.0 * RELATIVE_ACCURACY) / (1.0 - RELATIVE_ACCURACY)
INV_LN_GAMMA = 1.0 / math.log1p((2.0 * RELATIVE_ACCURACY) / (1.0 - RELATIVE_ACCURACY))
_LN_GAMMA = 1.0 / INV_LN_GAMMA
_VALUE_FACTOR = 2.0 / (1.0 + GAMMA)
MIN_INDEXABLE = max(math.exp(-(2.0 ** 31) / INV_LN_GAMMA + 1.0), 2.2250738585072014e-308 * GAMMA)
# A bin's sure interval: its edges gamma**(key - 1) and gamma**key pulled in by a relative
# 1e-9, a million times the error of ceil(log(v) * INV_LN_GAMMA) near an edge, so a value
# inside has the bin's key exactly; only for values whose edges neither under- nor overflow.
_ABOVE, _BELOW = 1.0 + 1e-9, 1.0 - 1e-9
_SURE_LOW, _SURE_HIGH = 1e-300, 1e300


def key_of(value: float) -> int:
    """The bin of a positive value."""
    return math.ceil(math.log(value) * INV_LN_GAMMA)


def value_of(key: int) -> float:
    """The value a bin reports."""
    return math.exp(key * _LN_GAMMA) * _VALUE_FACTOR


class Sketch:
    """Counts per bin for positive and negative values, plus zeros and the exact extremes."""

    __slots__ = ("count", "max", "min", "negative", "positive", "zeros")

    def __init__(self) -> None:
        self.positive: dict[int, int] = {}
        self.negative: dict[int, int] = {}
        self.zeros = 0
        self.count = 0
        self.min = math.inf
        self.max = -math.inf

    def add(self, value: float, count: int = 1) -> None:
        """Add `count` copies of a value (non-finite values are ignored, as in the reference)."""
        if count <= 0 or not math.isfinite(value):
            return
        if value >= MIN_INDEXABLE:
            key = key_of(value)
            self.positive[key] = self.positive.get(key, 0) + count
        elif value <= -MIN_INDEXABLE:
            key = key_of(-value)
            self.negative[key] = self.negative.get(key, 0) + count
        else:
            self.zeros += count
        self.count += count
        self.min = min(self.min, value)
        self.max = max(self.max, value)

    def add_runs(self, runs: Iterable[tuple[float, int]]) -> None:
        """add(value, count) for each (value, count), in one loop."""
        isfinite = math.isfinite
        self.add_finite_runs([(value, count) for value, count in runs
                              if count > 0 and isfinite(value)])

    def add_finite_runs(self, runs: Iterable[tuple[float, int]]) -> None:
        """add_runs of runs already known to hold finite values and positive counts."""
        pairs = runs if isinstance(runs, list | tuple) else list(runs)
        self.add_finite_columns([value for value, _ in pairs], [count for _, count in pairs])

    def add_finite_columns(self, values: list[float], counts: list[int]) -> None:
        """add(values[i], counts[i]) for each i, the values already known to be finite and the
        counts positive (the caller checked them once, StreamingDistribution.add_columns)."""
        positive, negative = self.positive, self.negative
        zeros, total, low, high = self.zeros, self.count, self.min, self.max
        log, ceil, exp = math.log, math.ceil, math.exp
        # The last positive key's sure interval (inside, top]: values there have that key
        # without a log (values come sorted, so most share their neighbour's bin).
        # `held`: counts of that key not yet written to `positive`.
        key, inside, top, held = 0, math.inf, -math.inf, 0
        for value, count in zip(values, counts, strict=True):
            if inside < value <= top:
                held += count
            elif value >= MIN_INDEXABLE:
                if held:
                    positive[key] += held
                    held = 0
                key = ceil(log(value) * INV_LN_GAMMA)
                positive[key] = positive.get(key, 0) + count
                if _SURE_LOW < value < _SURE_HIGH:
                    inside = exp((key - 1) * _LN_GAMMA) * _ABOVE
                    top = exp(key * _LN_GAMMA) * _BELOW
                else:
                    inside, top = math.inf, -math.inf
            elif value <= -MIN_INDEXABLE:  # its own key: the positive one's interval stays
                below = ceil(log(-value) * INV_LN_GAMMA)
                negative[below] = negative.get(below, 0) + count
            else:
                zeros += count
            total += count
            if value < low:  # min() and max() keep the first of equal values, as here
                low = value
            if value > high:
                high = value
        if held:
            positive[key] += held
        self.zeros, self.count, self.min, self.max = zeros, total, low, high

    def quantile(self, q: float) -> float:
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile must be in [0, 1], got {q}")
        if self.count == 0:
            return 0.0
        if self.count == 1:
            return self.min
        rank = int(q * (self.count - 1))
        negatives = sum(self.negative.values())
        if rank < negatives:
            return -value_of(_key_at_rank(self.negative, negatives - 1 - rank))
        if rank < negatives + self.zeros:
            return 0.0
        return value_of(_key_at_rank(self.positive, rank - negatives - self.zeros))


def _key_at_rank(bins: dict[int, int], rank: int) -> int:
    """The key holding the rank-th (0-based) count, lowest keys collapsed like a capped store."""
    keys = sorted(bins)
    floor_key = keys[-1] - MAX_BINS + 1
    seen = 0
    for key in keys:
        seen += bins[key]
        if seen > rank:
            return max(key, floor_key)
    return keys[-1]
