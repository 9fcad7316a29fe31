"""Distribution statistics: exact percentile ranks, exact moments, and the reference's sketch."""

from __future__ import annotations

import math
import random
from fractions import Fraction
from unittest import mock

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kvreplay.engine import metrics
from kvreplay.engine import sketch as sketch_module
from kvreplay.engine.metrics import (
    ExactMoments,
    StreamingDistribution,
    exact_distribution,
    percentile_rank,
)
from kvreplay.engine.sketch import (
    GAMMA,
    MAX_BINS,
    MIN_INDEXABLE,
    Sketch,
    key_of,
    value_of,
)


@pytest.mark.parametrize(("n", "p", "rank"), [
    (1, 99.0, 0),     # a single sample is every percentile
    (4, 50.0, 2),     # 1.5 rounds up
    (4, 75.0, 2),     # 2.25
    (4, 90.0, 3),     # 2.7
    (100, 50.0, 50),  # 49.5 rounds up
    (100, 99.0, 98),  # 98.01
    (101, 99.0, 99),
    (2000, 95.0, 1899),  # 1899.05
])
def test_percentile_rank_rounds_half_up(n: int, p: float, rank: int) -> None:
    """rank = round((n - 1) * p / 100), halves up, capped at n - 1."""
    assert percentile_rank(n, p) == rank


def test_exact_distribution_of_the_reference_fixture_ttfts() -> None:
    """TTFTs 2, 2, 4, 2 (the reference's weka fixture): median 2, p90 4, mean 2.5, std sqrt(.75)."""
    d = exact_distribution([2.0, 2.0, 4.0, 2.0])
    assert (d.count, d.mean, d.min, d.max, d.median, d.p75, d.p90, d.p95, d.p99) == (
        4, 2.5, 2.0, 4.0, 2.0, 2.0, 4.0, 4.0, 4.0)
    assert d.std == math.sqrt(0.75)


def test_exact_distribution_of_one_to_hundred() -> None:
    """1..100: median 51 (rank 50), p75 75, p90 90, p95 95, p99 99; std sqrt((100^2 - 1) / 12)."""
    d = exact_distribution(float(v) for v in range(100, 0, -1))
    assert (d.median, d.p75, d.p90, d.p95, d.p99, d.mean) == (51.0, 75.0, 90.0, 95.0, 99.0, 50.5)
    assert d.std == math.sqrt(9999 / 12)


def test_empty_distribution_is_all_zero() -> None:
    """No samples report 0.0 everywhere, as the reference does."""
    d = exact_distribution([])
    assert d.summary("ttft") == dict.fromkeys(d.summary("ttft"), 0.0)
    assert StreamingDistribution().finish() == d


def test_exact_moments_are_exact_and_split_invariant() -> None:
    """Mean and std equal the exact rational values, however the runs are split."""
    values = [0.1, 0.2, 0.3, 1e-9, 12345.678, 0.1]
    whole, split = ExactMoments(), ExactMoments()
    whole.add(0.1, 2)
    for v in values[1:5]:
        whole.add(v)
    for v in values:
        split.add(v)
    exact = [Fraction(v) for v in values]
    mean = sum(exact) / len(exact)
    variance = sum((v - mean) ** 2 for v in exact) / len(exact)
    for m in (whole, split):
        assert m.mean() == float(mean)
        assert m.std() == math.sqrt(float(variance))


@given(st.lists(st.tuples(st.floats(min_value=-1e12, max_value=1e12, allow_nan=False)
                          | st.floats(min_value=-1e150, max_value=1e150)
                          | st.sampled_from([5e-324, 2.2e-308, 0.5, 1.0, 2.0, 1000.0 / 3,
                                             2.0 ** 53, 3.0 * 2 ** 60, 1e150]),
                          st.integers(1, 10**6)), min_size=1, max_size=40), st.randoms())
@example([(2.0 ** 60, 3), (3.0 * 2 ** 60, 1)], random.Random(0))  # every exponent above 53
def test_exact_moments_of_runs_in_any_order(runs: list[tuple[float, int]],
                                            rng: random.Random) -> None:
    """Runs in any order (exponents interleaved, subnormals, negatives, values from 2**53 up,
    big counts): mean and std are the exact rational values rounded once, as one run at a time
    or all at once."""
    shuffled = list(runs)
    rng.shuffle(shuffled)
    at_once, one_by_one, shuffled_at_once = ExactMoments(), ExactMoments(), ExactMoments()
    at_once.add_runs(sorted(runs))
    at_once.add_runs([])
    shuffled_at_once.add_columns([v for v, _ in shuffled], [c for _, c in shuffled])
    for value, count in shuffled:
        one_by_one.add(value, count)
    n = sum(count for _, count in runs)
    mean = sum(Fraction(v) * c for v, c in runs) / n
    variance = sum((Fraction(v) - mean) ** 2 * c for v, c in runs) / n
    for m in (at_once, one_by_one, shuffled_at_once):
        assert m.count == n
        assert m.mean() == float(mean)
        assert m.std() == math.sqrt(float(variance))


@given(st.lists(st.tuples(st.floats(min_value=4.0, max_value=8.0, exclude_max=True)
                          | st.floats(min_value=1e-3, max_value=1e3), st.integers(1, 70)),
                min_size=1, max_size=300))
@example([(4.0 + k / 64, 63) for k in range(200)])  # machine-size partial sums, flushed
def test_exact_moments_of_many_light_runs_of_one_exponent(runs: list[tuple[float, int]]) -> None:
    """Sorted light runs (the report's gaps: many values of one binary exponent, small counts)
    are summed in machine-size partial sums folded in every few runs: still the exact rational
    mean and std, rounded once."""
    moments = ExactMoments()
    ordered = sorted(runs)
    moments.add_columns([v for v, _ in ordered], [c for _, c in ordered])
    n = sum(c for _, c in runs)
    mean = sum(Fraction(v) * c for v, c in runs) / n
    variance = sum((Fraction(v) - mean) ** 2 * c for v, c in runs) / n
    assert (moments.count, moments.mean(), moments.std()) == (
        n, float(mean), math.sqrt(float(variance)))


@given(st.lists(st.sampled_from([0.0, -0.0, 5.0, 20.0, 0.1, 1e-7, 3539594.0])
                | st.floats(min_value=0.0, max_value=1e9, allow_nan=False), max_size=60))
def test_exact_distribution_adds_equal_samples_as_one_run(values: list[float]) -> None:
    """Equal samples (ttfts repeat a lot) enter the moments as one run, a few samples at a time
    (runs split across them): the same distribution, to the bit, as adding them one by one."""
    with mock.patch.object(metrics, "_RUNS_AT_ONCE", 7):
        got = exact_distribution(values)
    one_by_one = ExactMoments()
    for v in values:
        one_by_one.add(v)
    assert got.count == len(values)
    if values:
        assert (got.mean, got.std) == (one_by_one.mean(), one_by_one.std())
        assert (got.min, got.max, got.median) == (min(values), max(values),
                                                  sorted(values)[percentile_rank(len(values),
                                                                                 50.0)])


def test_sketch_values_match_the_reference_report() -> None:
    """5 ms gaps report 4.997811098765266 and 200 tok/s 200.13682673977726 (reference fixture)."""
    assert value_of(key_of(5.0)) == 4.997811098765266
    assert value_of(key_of(200.0)) == 200.13682673977726
    assert abs(value_of(key_of(7.3)) / 7.3 - 1) <= 0.001


def test_streaming_percentiles_read_the_rounded_rank() -> None:
    """Gaps 2, 2, 2, 2, 12 report the reference's median 1.99970... and p90 12.0011..."""
    # median: rank round(2.0) = 2 read at q = 2.5 / 4; p90: rank round(3.6) = 4 = the top bin
    d = StreamingDistribution()
    d.add(2.0, 3)
    d.add(12.0)
    d.add(2.0)
    stats = d.finish()
    assert (stats.median, stats.p75, stats.p90, stats.p99) == (
        1.9997051226201907, 1.9997051226201907, 12.001124195202625, 12.001124195202625)
    assert (stats.min, stats.max, stats.count, stats.mean) == (2.0, 12.0, 5, 4.0)


def test_one_sample_sketch_returns_the_sample() -> None:
    """A single value is every percentile, unbinned."""
    d = StreamingDistribution()
    d.add(3.3)
    assert d.finish().p99 == 3.3


def test_zero_gaps_fall_in_the_zero_bucket() -> None:
    """Zero gaps report 0.0 below the first positive bin."""
    d = StreamingDistribution()
    d.add(0.0, 3)
    d.add(5.0)
    stats = d.finish()
    assert (stats.median, stats.p99, stats.min) == (0.0, 4.997811098765266, 0.0)


def test_sketch_collapses_its_lowest_bins_beyond_the_cap() -> None:
    """Values spanning more than 32,768 bins: the lowest are read from the lowest kept bin."""
    sketch = Sketch()
    sketch.add(1e-20)
    sketch.add(1e20)
    sketch.add(1e20)
    top = key_of(1e20)
    assert sketch.quantile(0.0) == value_of(top - MAX_BINS + 1)
    assert sketch.quantile(1.0) == value_of(top)
    assert sketch.min == 1e-20


def _edges() -> list[float]:
    """Bin edges gamma**k and their float neighbours, both ways (where a key is most fragile)."""
    out = []
    for k in [*range(-40, 40), 2_000, -2_000, 300_000, -300_000]:
        edge = value_of(k) * (1.0 + GAMMA) / 2.0  # gamma**k
        for direction in (math.inf, 0.0):
            v = edge
            for _ in range(4):
                out.append(v)
                v = math.nextafter(v, direction)
    return out


@given(st.lists(st.floats(min_value=0.0, max_value=1e6, allow_nan=False), max_size=200))
def test_sketch_keys_without_a_log_equal_key_of(values: list[float]) -> None:
    """A value inside the last bin's sure interval takes that key without a log: the bins equal
    key_of per value, in ascending, descending and given order (bin edges included)."""
    values = values + _edges() + [1e-310, 1.7e308, 1e305]
    for order in (sorted(values), sorted(values, reverse=True), values):
        sketch = Sketch()
        sketch.add_runs([(v, 1) for v in order])
        expected: dict[int, int] = {}
        for v in order:
            if v >= MIN_INDEXABLE:
                expected[key_of(v)] = expected.get(key_of(v), 0) + 1
        assert sketch.positive == expected
        assert sketch.zeros == sum(1 for v in order if v < MIN_INDEXABLE)


def test_sketch_keeps_a_positive_bin_across_a_negative_value() -> None:
    """A negative value between two positive values of one bin leaves that bin's key alone
    (a regression: the negative value's key was taken for the next positive value's bin)."""
    mixed, one_by_one = Sketch(), Sketch()
    mixed.add_runs([(1.5, 1), (-3.0, 2), (1.5, 4), (0.0, 1), (1.5, 1)])
    for value, count in [(1.5, 1), (-3.0, 2), (1.5, 4), (0.0, 1), (1.5, 1)]:
        one_by_one.add(value, count)
    assert (mixed.positive, mixed.negative, mixed.zeros, mixed.count) == (
        one_by_one.positive, one_by_one.negative, one_by_one.zeros, one_by_one.count)
    assert mixed.positive == {key_of(1.5): 6}


def test_sorted_runs_take_a_log_per_bin_not_per_value() -> None:
    """10,000 sorted gaps over about 60 bins: the sketch computes about one log per bin."""
    calls = []
    real = math.log

    def counting(value: float) -> float:
        calls.append(value)
        return real(value)

    runs = [(5.0 + i * 1e-5, 1) for i in range(10_000)]
    with mock.patch.object(sketch_module.math, "log", counting):
        sketch = Sketch()
        sketch.add_runs(runs)
    bins = len({key_of(v) for v, _ in runs})
    assert sum(sketch.positive.values()) == 10_000
    assert len(calls) <= bins + 1


def test_streaming_checks_each_value_once() -> None:
    """A chunk of finite values with positive counts is checked by its sum, not value by
    value; one with an infinite value or a zero count is filtered run by run."""
    checked = []
    real = math.isfinite

    def counting(value: float) -> bool:
        checked.append(value)
        return real(value)

    with mock.patch.object(metrics.math, "isfinite", counting):
        plain = StreamingDistribution()
        plain.add_runs([(float(v), 1) for v in range(1, 1001)])
        odd = StreamingDistribution()
        odd.add_runs([(1.0, 1), (math.inf, 2), (2.0, 0), (3.0, 1)])
    assert len(checked) == 1 + 1 + 3  # the zero count is dropped before its check
    assert (plain.count, odd.count) == (1000, 2)
