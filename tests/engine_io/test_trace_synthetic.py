"""Synthetic traffic: lengths, prefixes, sessions and the four ways sessions start.

Arrival times marked "reference" were read from the reference engine's
run_synthetic_trace_replay with the same rate and seed; group assignments likewise (StdRng(42)).
"""

from __future__ import annotations

import pytest
from engine_io_support import drive, traffic

from kvreplay.engine.traces import SyntheticWorkload, workload_from_traffic
from kvreplay.engine.traces.rng import StdRng
from kvreplay.engine.traces.synthetic import round_half_away, shared_prefix_tokens
from kvreplay.engine.traces.values import (
    SYNTHETIC_GROUP_BASE,
    SYNTHETIC_SHARED_PREFIX,
    SYNTHETIC_UNIQUE_BASE,
)


def _single(load: str, **keys: object) -> SyntheticWorkload:
    section = traffic(source_type="synthetic", input_tokens=8, output_tokens=2,
                      cached_prefix_tokens=0, load_type=load, **keys)
    workload = workload_from_traffic(section, base_dir=".")
    assert isinstance(workload, SyntheticWorkload)
    return workload


def _sessions(load: str, block_size: int | None = None, **keys: object) -> SyntheticWorkload:
    section = traffic(source_type="synthetic-session", input_tokens=keys.pop("input_tokens", 8),
                      output_tokens=2, load_type=load, **keys)
    workload = workload_from_traffic(section, base_dir=".", block_size=block_size)
    assert isinstance(workload, SyntheticWorkload)
    return workload


def test_constant_rate_spaces_requests_by_one_over_rate() -> None:
    """Reference: 20 req/s starts requests at 0, 50, 100, 150, 200 ms."""
    done = drive(_single("constant_rate", request_rate=20.0, stop_requests=5))
    assert [d.release_ms for d in done] == [0.0, 50.0, 100.0, 150.0, 200.0]
    assert [(d.session_id, d.turn_index) for d in done] == [(None, None)] * 5


def test_poisson_arrivals_match_the_reference_bit_for_bit() -> None:
    """Reference, 10 req/s, default seed 42: 0, 74.772..., 153.019..., 254.207..., 306.278..."""
    done = drive(_single("poisson", request_rate=10.0, stop_requests=5))
    assert [d.release_ms for d in done] == [
        0.0, 74.77246176406965, 153.01953951913882, 254.207536844964, 306.2785951560703]


def test_poisson_seed_changes_arrivals_and_is_reproducible() -> None:
    """Another seed gives other gaps; the same seed the same ones."""
    first = [d.release_ms for d in drive(_single("poisson", request_rate=10.0, arrival_seed=7,
                                                 stop_requests=20))]
    again = [d.release_ms for d in drive(_single("poisson", request_rate=10.0, arrival_seed=7,
                                                 stop_requests=20))]
    default = [d.release_ms for d in drive(_single("poisson", request_rate=10.0,
                                                   stop_requests=20))]
    assert first == again and first != default


def test_concurrency_is_a_closed_loop() -> None:
    """Two slots: a new request starts exactly when one ends (toy latency 12 ms)."""
    done = drive(_single("concurrency", concurrency=2, stop_requests=5))
    assert [d.release_ms for d in done] == [0.0, 0.0, 12.0, 12.0, 24.0]


def test_prompts_are_unique_apart_from_the_cached_prefix() -> None:
    """cached_prefix_tokens is one run shared by every prompt; the rest is unique per request."""
    section = traffic(source_type="synthetic", input_tokens=8, output_tokens=1,
                      cached_prefix_tokens=6, load_type="concurrency", concurrency=1,
                      stop_requests=2)
    done = drive(workload_from_traffic(section, base_dir="."))
    assert [d.prompt for d in done] == [
        ((SYNTHETIC_SHARED_PREFIX, 6), (SYNTHETIC_UNIQUE_BASE + 0, 2)),
        ((SYNTHETIC_SHARED_PREFIX, 6), (SYNTHETIC_UNIQUE_BASE + 1, 2))]
    assert [(d.input_length, d.output_length) for d in done] == [(8, 1), (8, 1)]


def test_every_turn_is_a_fresh_prompt_of_input_tokens() -> None:
    """Reference (turns_per_session 3, 8 in, 2 out): every turn is an 8-token prompt of new
    tokens; no earlier prompt or output is carried into the next turn."""
    workload = _sessions("concurrency", concurrency=1, turns_per_session=3, stop_sessions=2,
                         inter_turn_delay_ms=5.0)
    assert workload.total_requests == 6
    done = drive(workload)
    assert [(d.session_id, d.turn_index, d.input_length) for d in done] == [
        ("session_0", 0, 8), ("session_0", 1, 8), ("session_0", 2, 8),
        ("session_1", 0, 8), ("session_1", 1, 8), ("session_1", 2, 8)]
    assert [d.prompt for d in done] == [((SYNTHETIC_UNIQUE_BASE + i, 8),) for i in range(6)]
    assert [d.ordinal for d in done] == list(range(6))


def test_every_turn_starts_with_its_sessions_prefix_family() -> None:
    """Reference: the family is drawn once per session and leads every turn's prompt
    (round(0.5 * 4 blocks) = 2 blocks); the rest of each turn is new tokens."""
    done = drive(_sessions("concurrency", block_size=4, concurrency=1, turns_per_session=2,
                           stop_sessions=3, input_tokens=16, shared_prefix_ratio=0.5,
                           num_prefix_groups=5))
    assert [d.prompt for d in done] == [
        ((SYNTHETIC_GROUP_BASE + group, 8), (SYNTHETIC_UNIQUE_BASE + ordinal, 8))
        for group, ordinal in ((0, 0), (0, 1), (2, 2), (2, 3), (1, 4), (1, 5))]


def test_turns_follow_completion_plus_inter_turn_delay() -> None:
    """Reference: 10 sessions/s Poisson, delay 5 ms: turns at 0, 17, 34 then 74.77, 91.77, ..."""
    done = drive(_sessions("poisson", request_rate=10.0, turns_per_session=3, stop_sessions=2,
                           inter_turn_delay_ms=5.0))
    assert [d.release_ms for d in done] == [
        0.0, 17.0, 34.0, 74.77246176406965, 91.77246176406965, 108.77246176406965]


def test_concurrency_holds_a_session_slot_across_its_turns() -> None:
    """Reference: one slot, delay 5 ms: session 1 starts when session 0's last turn ends."""
    done = drive(_sessions("concurrency", concurrency=1, turns_per_session=2, stop_sessions=2,
                           inter_turn_delay_ms=5.0))
    assert [(d.session_id, d.release_ms) for d in done] == [
        ("session_0", 0.0), ("session_0", 17.0), ("session_1", 29.0), ("session_1", 46.0)]


def test_prefix_groups_are_drawn_like_the_reference() -> None:
    """Groups come from StdRng(42) draws, as the reference's reuse pattern shows."""
    # Reference, 5 groups: turn-0 reuse is cold, cold, cold, warm, cold, cold, warm, warm.
    done = drive(_sessions("concurrency", block_size=4, concurrency=1, turns_per_session=1,
                           stop_sessions=8, input_tokens=16, shared_prefix_ratio=0.5,
                           num_prefix_groups=5))
    assert [d.prompt[0] for d in done] == [(SYNTHETIC_GROUP_BASE + g, 8)
                                           for g in (0, 2, 1, 2, 4, 3, 4, 2)]


@pytest.mark.parametrize(("tokens", "ratio", "block", "shared"), [
    (16, 0.5, 4, 8),      # 4 blocks, 2 shared
    (16, 0.3, 4, 4),      # round(1.2) = 1 block
    (16, 0.375, 4, 8),    # round(1.5) = 2 blocks (halves round up)
    (16, 0.625, 4, 12),   # round(2.5) = 3 blocks
    (10, 1.0, 4, 10),     # every block, the last one partial
    (1024, 0.3, 64, 320),  # round(16 * 0.3 = 4.8) = 5 blocks
    (1024, 0.3, 1, 307),  # token granularity without an engine block size
])
def test_shared_prefix_is_whole_blocks(tokens: int, ratio: float, block: int,
                                       shared: int) -> None:
    """Shared tokens are round(ratio * blocks) whole blocks of the engine block size."""
    assert shared_prefix_tokens(tokens, ratio, block) == shared


def test_round_half_away() -> None:
    """Halves round up for non-negative values, like Rust's f64::round."""
    assert [round_half_away(x) for x in (0.5, 1.5, 2.5, 2.4999999999999996, 3.0)] == [
        1, 2, 3, 2, 3]


def test_std_rng_draws_match_rand_stdrng() -> None:
    """StdRng(42): first u32 draws pinned (they reproduce the reference's arrival gaps above)."""
    rng = StdRng(42)
    assert [rng.below_u32(5) for _ in range(8)] == [0, 2, 1, 2, 4, 3, 4, 2]
    with pytest.raises(ValueError):
        StdRng(-1)


def test_single_turn_requests_draw_prefix_families_like_sessions() -> None:
    """`synthetic` with shared_prefix_ratio: each request's leading blocks come from a family
    drawn as for one-turn sessions (same StdRng(42) draws), the rest is unique."""
    section = traffic(source_type="synthetic", input_tokens=16, output_tokens=2,
                      cached_prefix_tokens=0, load_type="concurrency", concurrency=1,
                      stop_requests=8, shared_prefix_ratio=0.5, num_prefix_groups=5)
    workload = workload_from_traffic(section, base_dir=".", block_size=4)
    assert isinstance(workload, SyntheticWorkload)
    done = drive(workload)
    assert [d.prompt[0] for d in done] == [(SYNTHETIC_GROUP_BASE + g, 8)
                                           for g in (0, 2, 1, 2, 4, 3, 4, 2)]
    assert [d.prompt[1] for d in done] == [(SYNTHETIC_UNIQUE_BASE + i, 8) for i in range(8)]


def test_single_turn_prefix_families_and_cached_prefix_exclude_each_other() -> None:
    """Both kinds of shared prefix at once is a WORKLOAD-VALUE error, not a silent choice."""
    section = traffic(source_type="synthetic", input_tokens=16, output_tokens=2,
                      cached_prefix_tokens=4, load_type="concurrency", concurrency=1,
                      stop_requests=8, shared_prefix_ratio=0.5, num_prefix_groups=5)
    from kvreplay.engine.traces.traffic import check_traffic

    found = check_traffic(section, base_dir=".")
    assert [(d.rule, "shared_prefix_ratio" in d.message) for d in found] == [
        ("WORKLOAD-VALUE", True)]
