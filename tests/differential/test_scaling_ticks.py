"""Passes of no duration (they only reject) under a scaling policy, as the reference: a tick due
at an instant where such a pass completed in place runs before that instant's next round
(loop.py, _settle_scaling): a request released by that pass is still to come, so the tick is not
dropped as one after the end of the workload; and in such a pass a DP rank with no work
publishes no forward-pass metrics (scaling_metrics.capture_pass)."""

from __future__ import annotations

from typing import Any

import harness
import pytest

# One worker, max_model_len 8: every turn of the session is rejected; the policy's first tick
# is due at 1.0 ms, when the second turn arrives and is rejected, releasing the third (delay 0).
SCENARIO: dict[str, Any] = {
    "kind": "scaling", "seed": 123, "block_size": 4, "trace_format": "mooncake", "dp": 1,
    "workers": 1,
    "rank": {"backend": "vllm", "block_size": 4, "num_gpu_blocks": 5,
             "kv_cache_bytes_per_token": 250000, "max_num_seqs": 2, "max_num_batched_tokens": 32,
             "enable_chunked_prefill": True, "preemption_mode": "lifo",
             "timing_model": {"type": "fixed", "prefill_ms": 2.0, "decode_ms": 1.0},
             "max_model_len": 8},
    "scaling": {"startup": {"aggregated": None}, "first_ms": 1.0,
                "ticks": [{"prefill": None, "decode": 1, "next_ms": None}]},
    "rows": [
        {"session_id": "s0", "hash_ids": [192, 196, 346], "input_length": length,
         "output_length": 1, **timing}
        for length, timing in ((10, {"timestamp": 1}), (10, {"delay": 1}), (12, {"delay": 0}))],
}


def test_the_tick_runs_before_the_next_round_of_its_instant() -> None:
    """kvreplay ticks once (at 1.0 ms, as the reference), not zero times."""
    report = harness.run_kvreplay(SCENARIO)
    assert [s["now_ms"] for s in report["snapshots"]] == [1.0]


@pytest.mark.reference
def test_the_reference_ticks_there_too() -> None:
    """The reference's run of the same scenario: one tick, the same snapshot."""
    pytest.importorskip("dynamo.replay")
    assert harness.check(SCENARIO) == ("match", [])


# A DP-2 worker, max_model_len 12: the first request (13 tokens) is rejected at 0 on rank 0 by a
# pass of no duration; the next arrives after the first tick (0.5 ms).
DP_SCENARIO: dict[str, Any] = {
    "kind": "scaling", "seed": 14, "block_size": 4, "trace_format": "mooncake", "dp": 2,
    "workers": 1,
    "rank": {"backend": "vllm", "block_size": 4, "num_gpu_blocks": 16,
             "kv_cache_bytes_per_token": 250000, "max_num_seqs": 3, "max_num_batched_tokens": 12,
             "enable_chunked_prefill": True, "preemption_mode": "fifo",
             "timing_model": {"type": "fixed", "prefill_ms": 3.0, "decode_ms": 2.0},
             "max_model_len": 12},
    "scaling": {"startup": {"aggregated": None}, "first_ms": 0.5,
                "ticks": [{"prefill": None, "decode": d, "next_ms": n}
                          for d, n in ((1, 5.5), (2, 7.5), (1, 12.5), (2, 13.5), (4, 16.5))]},
    "rows": [{"session_id": "s1", "hash_ids": [62, 422, 429, 430], "input_length": 13,
              "output_length": 1, "timestamp": 30},
             {"session_id": "s5", "hash_ids": [62, 422], "input_length": 8, "output_length": 1,
              "timestamp": 71}],
}


def test_a_rank_with_no_work_publishes_nothing_in_a_pass_that_only_rejects() -> None:
    """The first tick sees the rejecting rank's publication only (the reference's), not an
    idle one of the other rank."""
    report = harness.run_kvreplay(DP_SCENARIO)
    first = report["snapshots"][0]["decode_fpm_snapshots"]
    assert [(f["worker_id"], f["dp_rank"], f["wall_time"]) for f in first] == [(0, 0, 0.0)]


@pytest.mark.reference
def test_the_reference_publishes_so_too() -> None:
    """The reference's run of the DP-2 scenario: the same snapshots."""
    pytest.importorskip("dynamo.replay")
    assert harness.check(DP_SCENARIO) == ("match", [])
