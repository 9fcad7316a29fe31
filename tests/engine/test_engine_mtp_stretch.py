"""Fast-forwarded MTP decode stretches (engine/mtp_stretch.py): the passes of a decode-only
speculative stretch are planned at once, not each an event, with the records and report bytes of
stepping every pass; verifications drawn ahead are the stream's; and a time cap cuts any stretch
where single passes stop."""

from __future__ import annotations

import random
from typing import Any

import pytest
from engine_support import ListWorkload, mooncake_workload, native, rank, record_dict, request
from test_engine_fast_forward import report_text

from kvreplay.engine import run_native
from kvreplay.engine.mtp_rng import PyStdRng, threshold
from kvreplay.engine.records import BurstGaps, RequestRecord
from kvreplay.engine.report import _fold_gaps
from kvreplay.engine.result import RunResult
from kvreplay.engine.speculation import MtpSampler


def mtp(**overrides: Any) -> dict[str, Any]:
    return rank(**{"aic_nextn": 2, "aic_nextn_accept_rates": "0.8,0.6", "aic_mtp_seed": 3,
                   **overrides})


def both(doc: dict[str, Any], rows: list[dict[str, Any]],
         block_size: int = 4) -> tuple[RunResult, RunResult]:
    """The replay fast-forwarded and step by step, asserted equal (records and report)."""
    fast = run_native(doc, workload=mooncake_workload(rows, block_size), stepwise=False)
    slow = run_native(doc, workload=mooncake_workload(rows, block_size), stepwise=True)
    assert [record_dict(r) for r in fast.records] == [record_dict(r) for r in slow.records]
    assert report_text(fast) == report_text(slow)
    return fast, slow


def test_a_long_speculative_decode_is_one_stretch_not_a_pass_an_event() -> None:
    """One request decoding 3,000 tokens with nextn 2: step by step about 1,300 passes, each an
    event; fast-forwarded its prefill, a few stretches (each one event, planned at most
    mtp_stretch.MAX_PLAN passes ahead) and the pass of its last token, the same records."""
    rows = [{"timestamp": 0, "input_length": 8, "output_length": 3_000, "hash_ids": [1, 2]}]
    fast, slow = both(native(mtp(num_gpu_blocks=1_000)), rows)
    assert slow.facts.passes > 1_000 and slow.facts.fast_forwarded_passes == 0
    assert fast.facts.passes <= 4
    assert fast.facts.fast_forwarded_passes == slow.facts.passes - fast.facts.passes
    (rec,) = fast.records
    assert rec.output_length == 3_000
    assert any(isinstance(entry, BurstGaps) for entry in rec.itl_gaps)
    # Every pass is a speculative step (the prefill's emits the first burst).
    assert rec.speculative_steps == slow.facts.passes


@pytest.mark.parametrize("seed", range(30))
def test_mtp_stretches_equal_step_by_step(seed: int) -> None:
    """Random speculative workloads (nextn 1-3, rates with 0 and 1, fixed and polynomial
    timing, 1-2 workers, DP 1-2, prefix caching on and off, capacity from ample to tight,
    round robin and KV router, max_model_len, a time cap, telemetry): the records and report
    bytes of single passes."""
    rnd = random.Random(seed)
    rows = []
    t = 0.0
    for _ in range(rnd.randint(1, 6)):
        t += rnd.choice([0.0, 1.0, 7.0, 40.0, 300.0])
        blocks = rnd.randint(1, 4)
        rows.append({"timestamp": t, "input_length": 4 * blocks - rnd.randint(0, 3),
                     "output_length": rnd.choice([1, 3, 30, 200, 700]),
                     "hash_ids": [rnd.randint(1, 6) for _ in range(blocks)]})
    nextn = rnd.randint(1, 3)
    rates = ",".join(str(rnd.choice([0.0, 0.3, 0.7, 0.9, 1.0])) for _ in range(nextn))
    longest = max(-(-(r["input_length"] + r["output_length"] + nextn) // 4) for r in rows)
    timing = rnd.choice([{"type": "fixed", "prefill_ms": 3.0, "decode_ms": 1.0},
                         {"type": "polynomial"}])
    args = mtp(aic_nextn=nextn, aic_nextn_accept_rates=rates, aic_mtp_seed=rnd.randrange(2**64),
               num_gpu_blocks=rnd.choice([3000, 2 * longest, longest + 2]),
               enable_prefix_caching=rnd.random() < 0.7, max_num_seqs=rnd.choice([2, 8]),
               timing_model=timing)
    if rnd.random() < 0.2:
        args["max_model_len"] = max(r["input_length"] for r in rows) + rnd.choice([5, 100])
    doc = native(args, workers=rnd.choice([1, 2]), dp_size=rnd.choice([1, 2]),
                 router=rnd.choice(["round_robin", "kv_router"]),
                 max_sim_time_ms=rnd.choice([None, None, 150.0]))
    if rnd.random() < 0.25:  # telemetry's samples are in the report compared
        doc["spec"]["telemetry"] = {"sample_interval_ms": rnd.choice([5.0, 20.0])}
    both(doc, rows)


def test_mtp_stretches_run_on_the_random_workloads() -> None:
    """The random workloads above do fast-forward (they would prove nothing otherwise)."""
    rows = [{"timestamp": 0, "input_length": 5, "output_length": 200, "hash_ids": [1, 2]},
            {"timestamp": 1, "input_length": 7, "output_length": 700, "hash_ids": [1, 3]}]
    fast, _ = both(native(mtp(timing_model={"type": "polynomial"}, num_gpu_blocks=1000),
                          dp_size=2), rows)
    assert fast.facts.fast_forwarded_passes > fast.facts.passes


def test_a_stretch_evicts_cached_blocks_as_single_passes_would() -> None:
    """A decode on a rank full of an earlier request's cached blocks: each reservation past
    free capacity evicts LRU heads. No router hears of it (round robin), so a stretch runs
    through them, evicting in each pass's place; with a KV router (it hears of evictions) the
    passes that evict are single passes. Records equal step by step either way."""
    rows = [{"timestamp": 0, "input_length": 380, "output_length": 2,
             "hash_ids": list(range(1, 96))},
            {"timestamp": 500, "input_length": 8, "output_length": 300, "hash_ids": [200, 201]}]
    silent, slow = both(native(mtp(num_gpu_blocks=100)), rows)
    assert silent.facts.passes <= 8 < slow.facts.passes // 10
    heard, slow = both(native(mtp(num_gpu_blocks=100), router="kv_router"), rows)
    assert heard.facts.passes > slow.facts.passes // 3


@pytest.mark.parametrize("speculative", [False, True])
def test_a_time_cap_cuts_a_stretch_where_single_passes_stop(speculative: bool) -> None:
    """A 40-token decode capped at 41 ms: the passes that end by the cap count (tokens, billed
    time), as step by step; a stretch used to run past the cap and lose them."""
    args = mtp() if speculative else rank()
    doc = native(args, max_sim_time_ms=41.0)
    fast = run_native(doc, workload=ListWorkload([request(0, 0.0, 8, 40, [1, 2])]))
    slow = run_native(doc, workload=ListWorkload([request(0, 0.0, 8, 40, [1, 2])]),
                      stepwise=True)
    assert fast.facts.fast_forwarded_passes > 0
    assert [record_dict(r) for r in fast.records] == [record_dict(r) for r in slow.records]
    assert report_text(fast) == report_text(slow)
    assert fast.records[0].last_token_ms == slow.records[0].last_token_ms > 30.0


def test_verifications_drawn_ahead_are_the_streams() -> None:
    """Looking ahead draws what single verifications would draw next, in order; the
    verifications after use them first, and the histogram counts what was used."""
    plain, ahead = MtpSampler(3, (0.9, 0.5, 1.0), 11), MtpSampler(3, (0.9, 0.5, 1.0), 11)
    expected = [plain.burst(9) for _ in range(300)]
    got = [b + 1 for b in ahead.lookahead(40)]
    ahead.take(25)
    got = got[:25] + [ahead.burst(9) for _ in range(10)]
    got += [b + 1 for b in ahead.lookahead(100)]
    ahead.take(100)
    got += [ahead.burst(9) for _ in range(165)]
    assert got == expected
    assert ahead.accepted_hist == plain.accepted_hist


def test_many_verifications_at_once_equal_one_at_a_time() -> None:
    """accepted_many(thresholds, n) is n accepted() calls (the pure-Python stream)."""
    limits = tuple(threshold(r) for r in (0.8, 1.0, 0.6))
    one, many = PyStdRng(5), PyStdRng(5)
    assert list(many.accepted_many(limits, 200)) == [one.accepted(limits) for _ in range(200)]
    assert one.next_u64() == many.next_u64()


def test_burst_gaps_fold_like_their_expansion() -> None:
    """A record's BurstGaps (fixed and polynomial timing) count in the report as the gaps
    single passes stamp; itl_runs expands them in order."""
    from array import array

    for durations in (None, array("q", [7_000_000, 5_000_000, 5_500_000])):
        rec = RequestRecord(0, "r0", 0.0, 4, 12)
        rec.itl_gaps = [(2.0, 1), BurstGaps(6.0, 5.0, durations, bytes([3, 1, 2]))]
        rec.output_length = 1 + rec.itl_count()
        gaps: dict[float, int] = {}
        _fold_gaps(rec, gaps, {}, [0, 0, 0, 0])
        expanded: dict[float, int] = {}
        for gap, count in rec.itl_runs():
            expanded[gap] = expanded.get(gap, 0) + count
        assert gaps == expanded
        middle = [(5.0, 2)] if durations is None else [(5.0, 1), (5.5, 1)]
        assert rec.itl_runs() == [(2.0, 1), (6.0, 1), (0.0, 2), *middle, (0.0, 1)]
