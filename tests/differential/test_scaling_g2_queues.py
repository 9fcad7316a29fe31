"""What a DP rank's forward-pass metrics count as queued while G2 copies are outstanding, as the
reference (ai-dynamo 1.6.1, probed): a request asleep on transfer progress (its restore in
flight, or its lookup deferred behind a pending store) counts in a pass its rank takes part in
(the rank has work of its own, or the pass tried the request), and a rank with nothing but such
sleepers publishes zeros; and a sleeper wakes only for progress after it fell asleep, not for a
completion its rank had not yet seen when it did (scaling seeds 687 and 752, docs/engine.md,
"Scaling")."""

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

def _pd_role(seqs: int, decode_ms: float, link_gbps: float, preemption: str) -> dict[str, Any]:
    """A P/D role of seed 752: 6 G1 blocks, fixed timing, a cluster-shared G2 pool of 2 blocks
    (0.25 GB/s out, 1 GB/s in)."""
    return {"backend": "vllm", "block_size": 4, "num_gpu_blocks": 6,
            "kv_cache_bytes_per_token": 250000, "max_num_seqs": seqs,
            "max_num_batched_tokens": 8, "enable_chunked_prefill": True,
            "preemption_mode": preemption,
            "timing_model": {"type": "fixed", "prefill_ms": 3.0, "decode_ms": decode_ms},
            "kv_transfer_bytes_per_token": 250000, "kv_transfer_bandwidth": link_gbps,
            "native_host_offload": {"scope": "cluster_shared", "num_host_blocks": 2,
                                    "d2h_bandwidth_gbps": 0.25, "h2d_bandwidth_gbps": 1.0,
                                    "kv_layout_id": "diff"}}


# Scaling seed 752, shrunk: P/D, prefill DP 2; the second prefill worker (started by the first
# tick) receives the 11-token turn at 14 ms after a store had completed at 11 ms that it had not
# yet seen; the turn's lookup defers (its blocks' store lands at 21 ms).
STALE = {
    "kind": "scaling", "seed": 752, "block_size": 4, "trace_format": "mooncake", "dp": 2,
    "prefill": _pd_role(3, 1.0, 0.5, preemption="lifo"),
    "decode": _pd_role(1, 2.0, 1.0, preemption="fifo"),
    "prefill_workers": 1, "decode_workers": 1,
    "scaling": {"startup": {"prefill": 0.001, "decode": None}, "first_ms": 1.0,
                "ticks": [{"prefill": p, "decode": d, "next_ms": n}
                          for p, d, n in ((1, 3, 1.5), (2, 1, 16.5), (2, 1, 21.5),
                                          (1, 4, 22.5))]},
    "rows": [{"session_id": "s0", "hash_ids": [208, 40], "input_length": 8, "output_length": 4,
              "timestamp": 5},
             {"session_id": "s0", "hash_ids": [208, 40, 114, 290], "input_length": 16,
              "output_length": 1, "delay": 0},
             {"session_id": "s1", "hash_ids": [131, 157, 308], "input_length": 10,
              "output_length": 1, "timestamp": 5},
             {"session_id": "s1", "hash_ids": [131, 157, 308], "input_length": 11,
              "output_length": 1, "delay": 1}],
}


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


def test_a_sleeper_ignores_progress_from_before_it_slept() -> None:
    """The 11-token turn is not woken at 18 ms by the 11 ms completion: worker 1's pass of
    18-21 ms does not try it, and its rank 0 publishes zeros (reference: 0 queued)."""
    assert _queued(harness.run_kvreplay(STALE), "prefill", 1, 0) == [(21.5, 0)]


@pytest.mark.reference
@pytest.mark.parametrize("scenario", [IDLE_RANK, BUSY_RANK, STALE],
                         ids=["idle-rank", "busy-rank", "stale-progress"])
def test_the_reference_agrees(scenario: dict[str, Any]) -> None:
    """The reference's runs: every snapshot and request equal."""
    pytest.importorskip("dynamo.replay")
    assert harness.check(scenario) == ("match", [])
