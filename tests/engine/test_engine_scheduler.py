"""Scheduler and G1 behaviours, each checked against the reference engine on the same input.

Rank defaults in these tests: vLLM, block 4, fixed timing prefill 10 ms / decode 2 ms.
"""

from __future__ import annotations

from typing import Any

import pytest
from engine_support import ListWorkload, native, rank, request

from kvreplay.engine import ReplayStalled, run_native
from kvreplay.engine.records import RequestRecord
from kvreplay.engine.traces.request import TraceRequest


def run(requests: list[TraceRequest], *, workers: int = 1, dp_size: int = 1,
        **rank_overrides: Any) -> list[RequestRecord]:
    doc = native(rank(**rank_overrides), workers=workers, dp_size=dp_size)
    return run_native(doc, workload=ListWorkload(requests)).records


def test_arrivals_join_the_pass_starting_at_their_time() -> None:
    """An arrival mid-pass waits for the next pass; one at a pass boundary joins that pass."""
    a, b, c, d = run([request(0, 0.0, 8, 5, [1, 2]), request(1, 5.0, 4, 3, [3]),
                      request(2, 10.0, 5, 3, [4, 5]), request(3, 13.0, 6, 3, [6, 7])])
    assert (a.first_token_ms, a.terminal_time_ms) == (10.0, 38.0)
    assert (b.first_admit_ms, b.first_token_ms, b.terminal_time_ms) == (10.0, 22.0, 36.0)
    assert (c.first_admit_ms, c.first_token_ms) == (10.0, 22.0)
    assert (d.first_admit_ms, d.first_token_ms, d.terminal_time_ms) == (22.0, 34.0, 38.0)


def test_blocks_are_cached_when_scheduled_so_a_later_request_in_the_pass_hits_them() -> None:
    """Two prompts sharing a first block, admitted in one pass: the second reuses it."""
    first, second = run([request(0, 0.0, 8, 1, [1, 2]), request(1, 0.0, 9, 1, [1, 3, 4])])
    assert first.reused_input_tokens == 0
    assert second.reused_input_tokens == 4


def test_lru_evicts_a_released_sequence_suffix_before_its_prefix() -> None:
    """Pool of 3: after [1,2] is released, [3,4] evicts its leaf block, so [1,2,5] reuses 4."""
    *_, probe = run([request(0, 0.0, 8, 1, [1, 2]), request(1, 100.0, 8, 1, [3, 4]),
                     request(2, 200.0, 9, 1, [1, 2, 5])], num_gpu_blocks=3)
    assert probe.reused_input_tokens == 4


def test_full_output_blocks_are_cached_and_take_lru_places() -> None:
    """A decoded full block stays cached after release, so it is evicted like a prompt block:
    with it in the LRU, [20]'s block is evicted first and a later [20, 30] reuses nothing."""
    records = run([request(0, 0.0, 4, 1, [20]), request(1, 100.0, 4, 6, [1]),
                   request(2, 200.0, 12, 1, [8, 9, 10]), request(3, 300.0, 8, 2, [20, 30])],
                  num_gpu_blocks=5)
    assert records[3].reused_input_tokens == 0


def test_a_block_completed_only_by_the_dangling_token_is_not_cached() -> None:
    """The last sampled token is never computed: its block stays private and frees capacity,
    so [20]'s block survives and a later [20, 30] reuses it."""
    records = run([request(0, 0.0, 4, 1, [20]), request(1, 100.0, 4, 4, [1]),
                   request(2, 200.0, 4, 1, [8]), request(3, 300.0, 8, 2, [20, 30])],
                  num_gpu_blocks=3)
    assert records[3].reused_input_tokens == 4


def test_lifo_preemption_and_readmission_recompute() -> None:
    """Pool of 4: the newest request is preempted when KV cannot grow, waits while the pool is
    busy, is readmitted when the other finishes and recomputes its prompt (prefill + decode)."""
    a, b = run([request(0, 0.0, 4, 10, [1]), request(1, 0.0, 5, 10, [2, 3])], num_gpu_blocks=4)
    assert (a.terminal_time_ms, a.readmission_count) == (28.0, 0)
    assert (b.first_token_ms, b.terminal_time_ms, b.readmission_count) == (10.0, 50.0, 1)
    assert [(x.at_ms, x.is_readmission) for x in b.admission_history] == [(0.0, False),
                                                                         (28.0, True)]


def test_fifo_preemption_gives_back_a_decode_token_scheduled_earlier_in_the_pass() -> None:
    """FIFO, a 4-token budget: a request preempted after the pass's fast path scheduled its
    decode token gives that token back to the budget, so the chunk that preempted it is one
    token longer (times checked against the reference, ai-dynamo 1.6.1; kvreplay at the commit
    that stopped entering decode steps in the pass's dict, without the give-back, differed)."""
    records = run([request(0, 0.0, 9, 9, [13, 16, 27]), request(1, 0.0, 3, 3, [15]),
                   request(2, 10.0, 1, 6, [10]), request(3, 12.0, 4, 5, [22]),
                   request(4, 12.0, 10, 2, [7, 17, 25])],
                  num_gpu_blocks=6, max_num_batched_tokens=4, preemption_mode="fifo",
                  enable_chunked_prefill=True)
    assert [(r.first_token_ms, r.terminal_time_ms, r.readmission_count, r.output_length)
            for r in records] == [(30.0, 90.0, 1, 9), (30.0, 54.0, 0, 3), (42.0, 88.0, 1, 6),
                                  (54.0, 72.0, 0, 5), (120.0, 122.0, 0, 2)]


def test_readmission_hits_its_own_cached_output_blocks() -> None:
    """A preempted request's prompt and output blocks stay cached: it readmits reusing 8 tokens
    (5 prompt + 3 output) and, with no prompt token left to compute, its readmission pass is
    decode-only. The request reports its 5 reused input tokens (the reference reports 8)."""
    _, b = run([request(0, 0.0, 4, 5, [1]), request(1, 0.0, 5, 10, [2, 3])], num_gpu_blocks=4)
    assert [x.reused_input_tokens for x in b.admission_history] == [0, 8]
    assert b.reused_input_tokens == 5
    assert b.terminal_time_ms == 30.0


def test_reused_input_tokens_is_the_best_admission() -> None:
    """First admission reuses 4, the readmission 0 (its blocks were evicted): the request
    reports 4."""
    *_, b = run([request(0, 0.0, 4, 1, [2]), request(1, 100.0, 4, 12, [1]),
                 request(2, 100.0, 5, 10, [2, 3])], num_gpu_blocks=4)
    assert [x.reused_input_tokens for x in b.admission_history] == [4, 0]
    assert b.reused_input_tokens == 4
    assert b.terminal_time_ms == 154.0


def test_prompt_larger_than_the_pool_is_rejected_at_pass_end() -> None:
    """A 12-token prompt can never fit 2 blocks: rejected, stamped at the end of its pass."""
    big, small = run([request(0, 0.0, 12, 2, [1, 2, 3]), request(1, 0.0, 4, 2, [4])],
                     num_gpu_blocks=2)
    assert (big.terminal_status, big.terminal_time_ms, big.first_admit_ms) == ("rejected", 10.0,
                                                                               None)
    assert (small.terminal_status, small.terminal_time_ms) == ("completed", 12.0)
    assert (big.rejection, small.rejection) == (("kv_cache", 8), None)


def test_max_model_len_rejects_prompts_and_caps_generation() -> None:
    """max_model_len 8: an 8-token prompt is rejected; a 7-token one generates 1 token."""
    long, capped = run([request(0, 0.0, 8, 2, [1, 2]), request(1, 5.0, 7, 5, [4, 5])],
                       max_model_len=8, num_gpu_blocks=20)
    assert (long.terminal_status, long.terminal_time_ms) == ("rejected", 0.0)
    assert long.rejection == ("max_model_len", 8)
    assert (capped.output_length, capped.terminal_time_ms) == (1, 15.0)


def test_attention_dp_ranks_run_in_lockstep() -> None:
    """Two DP ranks of one worker: every pass ends when the slowest rank ends, so the decoding
    rank's tokens come at 10, 20, 30 while the other rank prefills in 10 ms chunks."""
    a, b = run([request(0, 0.0, 4, 3, [1]), request(1, 0.0, 12, 2, [2, 3, 4])], dp_size=2,
               max_num_batched_tokens=4)
    assert (a.first_token_ms, a.terminal_time_ms) == (10.0, 30.0)
    assert (b.first_token_ms, b.terminal_time_ms) == (30.0, 32.0)


def test_round_robin_rotates_workers_then_ranks() -> None:
    """2 workers x 2 ranks: (0,0) (1,0) (0,1) (1,1) (0,0) (1,0); an idle rank waits for its
    worker's pass in flight."""
    records = run([request(i, float(i), 4 + i, 1, [i + 1] * 3) for i in range(6)], workers=2,
                  dp_size=2)
    routes = [(r.routing_history[0].logical_worker_id, r.routing_history[0].dp_rank)
              for r in records]
    assert routes == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 0), (1, 0)]
    assert [r.first_admit_ms for r in records] == [0.0, 1.0, 10.0, 11.0, 10.0, 11.0]


def test_polynomial_prefill_uses_the_batch_mean_lengths() -> None:
    """Polynomial prefill of 19 (16 cached), 10 and 7 new-token prompts: T = 3 * (36 // 3 -
    16 // 3) = 21 tokens, as the reference sizes a batch."""
    *_, r1, r2, r3 = run([request(0, 0.0, 16, 1, [7, 8, 9, 10]),
                          request(1, 100.0, 19, 2, [7, 8, 9, 10, 11]),
                          request(2, 100.0, 10, 3, [1, 2, 3]), request(3, 100.0, 7, 4, [4, 5])],
                         num_gpu_blocks=100, timing_model={"type": "polynomial"})
    expected = 4.209989e-7 * 21 * 21 + 1.518344e-2 * 21 + 16.50142
    assert r1.reused_input_tokens == 16
    assert r1.first_token_ms == r2.first_token_ms == r3.first_token_ms
    assert r1.first_token_ms == pytest.approx(100.0 + expected, abs=1e-6)


def test_polynomial_decode_counts_only_ongoing_decoders() -> None:
    """A request emitting its first token does not enter the decode batch's KV size: decode
    u is the decoders' total length over capacity (here 501 of 4000 tokens)."""
    a, _ = run([request(0, 0.0, 500, 3, [1], block_size=1000),
                request(1, 0.0, 2000, 1, [2, 3], block_size=1000)],
               num_gpu_blocks=1000, max_num_batched_tokens=600,
               timing_model={"type": "polynomial"})
    prefill = [4.209989e-7 * t * t + 1.518344e-2 * t + 16.50142 for t in (600, 599, 599)]
    decode = [max(1.0, -25.74 * u * u + 54.01 * u + 5.74) for u in (501 / 4000, 502 / 4000)]
    assert a.terminal_time_ms == pytest.approx(sum(prefill) + sum(decode), abs=1e-5)


def test_speedup_ratios_divide_durations() -> None:
    """speedup 2 halves every part; decode_speedup 4 divides decode again."""
    (r,) = run([request(0, 0.0, 4, 3, [2])], speedup_ratio=2.0, decode_speedup_ratio=4.0)
    assert (r.first_token_ms, r.terminal_time_ms) == (5.0, 5.5)


def test_a_sequence_outgrowing_its_pool_stalls_the_replay() -> None:
    """A request needing 5 blocks of a 4-block pool preempts itself and can never come back:
    the run fails naming it (the reference fails too)."""
    with pytest.raises(ReplayStalled, match="r1") as caught:
        run([request(0, 0.0, 4, 1, [2]), request(1, 100.0, 4, 14, [1])], num_gpu_blocks=4)
    assert "reaches 18 tokens, 5 KV blocks of 4 tokens, and the rank has 4" in str(caught.value)


def test_a_prompt_over_the_budget_without_chunking_stalls_saying_so() -> None:
    """Chunked prefill off and a 12-token prompt over an 8-token budget: the run fails with that
    reason and the numbers (the reference fails too, with an internal invariant message)."""
    with pytest.raises(ReplayStalled) as caught:
        run([request(0, 0.0, 12, 1, [1, 2, 3])], enable_chunked_prefill=False,
            max_num_batched_tokens=8)
    assert ("r0 on agg worker 0 rank 0: its 12-token prompt exceeds max_num_batched_tokens 8 "
            "with chunked prefill off") in str(caught.value)


@pytest.mark.parametrize(("interval", "admitted_at"), [(1, 20.0), (2, 20.0), (3, 22.0)])
def test_prefill_schedule_interval_defers_admissions_on_decoding_dp_ranks(
        interval: int, admitted_at: float) -> None:
    """With attention DP, a rank that is decoding admits new prompts only on passes whose index
    is a multiple of prefill_schedule_interval (passes 0, 1, 2 start at 0, 10, 20)."""
    records = run([request(0, 0.0, 4, 20, [1]), request(1, 1.0, 5, 20, [2, 3]),
                   request(2, 13.0, 6, 3, [4, 5]), request(3, 15.0, 7, 3, [6, 7]),
                   request(4, 17.0, 9, 3, [8, 9, 10])], dp_size=2, num_gpu_blocks=100,
                  prefill_schedule_interval=interval)
    assert records[1].first_admit_ms == 10.0
    assert [r.first_admit_ms for r in records[2:]] == [admitted_at] * 3


def test_the_summary_counts_rejections_by_reason() -> None:
    """Two prompts too large for 2 blocks of 4 tokens and one at max_model_len: the summary says
    3 rejected, by reason and limit, in words."""
    from kvreplay.engine.report import rejection_text, report_from_run

    doc = native(rank(num_gpu_blocks=2, max_model_len=10))
    requests = [request(0, 0.0, 12, 2, [1, 2, 3]), request(1, 0.0, 9, 2, [4, 5, 6]),
                request(2, 0.0, 10, 2, [7, 8, 9]), request(3, 0.0, 4, 2, [10])]
    summary = report_from_run(run_native(doc, workload=ListWorkload(requests)))["summary"]
    assert (summary["completed_requests"], summary["rejected_requests"]) == (1, 3)
    assert summary["rejections"] == [
        {"reason": "kv_cache", "limit_tokens": 8, "count": 1,
         "message": "prompt larger than the KV cache (max 8 tokens)"},
        {"reason": "max_model_len", "limit_tokens": 10, "count": 2,
         "message": "prompt at or above max_model_len (10 tokens)"}]
    assert rejection_text(summary) == ("3 rejected: 1 prompt larger than the KV cache (max 8 "
                                       "tokens), 2 prompts at or above max_model_len (10 tokens)")
    assert rejection_text({**summary, "rejected_requests": 0, "rejections": []}) is None
