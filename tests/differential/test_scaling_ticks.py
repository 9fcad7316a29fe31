"""A scaling tick due at an instant where a pass of no duration completed in place (it only
rejected) runs before that instant's next round, as the reference's loop ticks then (loop.py,
_settle_scaling): a request released by that pass is still to come, so the tick is not dropped
as one after the end of the workload."""

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
