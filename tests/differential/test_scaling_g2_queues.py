"""What a DP rank's forward-pass metrics count as queued while G2 copies are outstanding, as the
reference (ai-dynamo 1.6.1, probed): a request asleep on transfer progress (its restore in
flight, or its lookup deferred behind a pending store) counts in a pass its rank takes part in
(the rank has work of its own, or the pass tried the request), and a rank with nothing but such
sleepers publishes zeros (scaling seed 687, docs/engine.md, "Scaling")."""

from __future__ import annotations

from typing import Any

import harness
import pytest


def _aggregated(rows: list[dict[str, Any]], dp: int, workers: int, until: int) -> dict[str, Any]:
    """A cluster-shared G2 pool written and read at 0.25 GB/s (4 ms a block), fixed 1/1 ms
    timing, a tick every millisecond that changes nothing."""
    rank = {"backend": "vllm", "block_size": 4, "num_gpu_blocks": 16,
            "kv_cache_bytes_per_token": 250000, "max_num_seqs": 4, "max_num_batched_tokens": 16,
            "enable_chunked_prefill": True, "preemption_mode": "fifo",
            "timing_model": {"type": "fixed", "prefill_ms": 1.0, "decode_ms": 1.0},
            "native_host_offload": {"scope": "cluster_shared", "num_host_blocks": 8,
                                    "d2h_bandwidth_gbps": 0.25, "h2d_bandwidth_gbps": 0.25,
                                    "kv_layout_id": "diff"}}
    ticks = [{"prefill": None, "decode": None, "next_ms": float(t)} for t in range(2, until + 2)]
    return {"kind": "scaling", "seed": 0, "block_size": 4, "trace_format": "mooncake", "dp": dp,
            "rank": rank, "workers": workers,
            "scaling": {"startup": {"aggregated": None}, "first_ms": 1.0, "ticks": ticks},
            "rows": rows}


LONG = {"session_id": "a", "hash_ids": [1, 2], "input_length": 8, "output_length": 30,
        "timestamp": 0}
# Its prompt's two blocks are G2 entries pending until r0's store lands (9 ms), then restored
# (8 ms, admitted at 17 ms).
SHARER = {"session_id": "b", "hash_ids": [1, 2, 3], "input_length": 9, "output_length": 1,
          "timestamp": 1}
# One worker, DP 2: r0 decodes on rank 0 (a pass a millisecond), r1 waits on rank 1 alone.
IDLE_RANK = _aggregated([LONG, SHARER], dp=2, workers=1, until=18)
# Two DP-1 workers: r1 waits on worker 1, which runs two short requests from 4 and 5 ms.
BUSY_RANK = _aggregated([LONG, SHARER,
                         {"session_id": "c", "hash_ids": [7], "input_length": 4,
                          "output_length": 2, "timestamp": 4},
                         {"session_id": "d", "hash_ids": [8], "input_length": 4,
                          "output_length": 2, "timestamp": 5}], dp=1, workers=2, until=8)

def _queued(report: dict[str, Any], role: str, worker: int, rank: int) -> list[tuple[float, int]]:
    return [(s["now_ms"], f["num_queued_prefill"]) for s in report["snapshots"]
            for f in s[f"{role}_fpm_snapshots"] or []
            if f["worker_id"] == worker and f["dp_rank"] == rank]


def test_a_rank_with_only_sleepers_publishes_zeros() -> None:
    """r1 counts on its own rank only in the passes that tried it (its deferral at 1 ms, its
    restore's start at 9 ms), the reference's figures; not while r0's passes run beside it."""
    counted = {2.0, 10.0}
    expected = [(float(t), 1 if t in counted else 0) for t in range(1, 20)]
    assert _queued(harness.run_kvreplay(IDLE_RANK), "decode", 0, 1) == expected


def test_a_sleeper_counts_where_its_rank_runs_work() -> None:
    """Worker 1 runs r2 and r3 at 5-7 ms: the deferred r1 counts in both passes (reference)."""
    assert _queued(harness.run_kvreplay(BUSY_RANK), "decode", 1, 0) == [(6.0, 1), (7.0, 1)]


@pytest.mark.reference
@pytest.mark.parametrize("scenario", [IDLE_RANK, BUSY_RANK], ids=["idle-rank", "busy-rank"])
def test_the_reference_agrees(scenario: dict[str, Any]) -> None:
    """The reference's runs: every snapshot and request equal."""
    pytest.importorskip("dynamo.replay")
    assert harness.check(scenario) == ("match", [])
