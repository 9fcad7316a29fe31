"""Token stamping keeps nothing per token: a request emitting at consecutive pass ends of its
worker holds one span of the worker's pass series (issue 29's overload regime, where
polynomial pass durations differ pass to pass and few passes are fast-forwarded)."""

from __future__ import annotations

from engine_support import ListWorkload, native, rank, request

from kvreplay.engine import run_native
from kvreplay.engine.records import PassSpan
from kvreplay.engine.report import report_from_run


def test_consecutive_tokens_share_one_span_of_the_pass_series() -> None:
    """Step by step under polynomial timing, 6 requests decoding 40 tokens together: every
    record holds its 39 distinct gaps as one PassSpan, and the report's ITL counts them all."""
    workload = ListWorkload([request(i, 0.0, 8, 40, [i, 100 + i]) for i in range(6)])
    result = run_native(native(rank(timing_model={"type": "polynomial"}, num_gpu_blocks=256)),
                        workload=workload, stepwise=True)
    for rec in result.records:
        assert len(rec.itl_gaps) == 1 and isinstance(rec.itl_gaps[0], PassSpan)
        assert rec.itl_count() == 39
        assert len(rec.itl_runs()) > 30  # the gaps differ pass to pass: no run-length merging
    summary = report_from_run(result)["summary"]
    assert summary["mean_itl_ms"] > 0.0 and summary["completed_requests"] == 6


def test_a_token_after_a_break_opens_a_new_span() -> None:
    """A request joining a busy worker later, or one whose tokens skip pass ends of its worker
    (preempted: 24 blocks hold fewer than the three), starts a new span or a run of its own
    gap: the gaps sum to its decode time."""
    workload = ListWorkload([request(0, 0.0, 8, 30, [1, 2]), request(1, 7.0, 8, 30, [3, 4]),
                             request(2, 31.0, 40, 30, [5, 6, 7, 8, 9, 10, 11, 12, 13, 14])])
    result = run_native(native(rank(timing_model={"type": "polynomial"}, num_gpu_blocks=24)),
                        workload=workload, stepwise=True)
    assert any(rec.readmission_count for rec in result.records)
    for rec in result.records:
        assert rec.itl_count() == 29
        total = sum(gap * count for gap, count in rec.itl_runs())
        assert abs(total - (rec.last_token_ms - rec.first_token_ms)) < 1e-6
