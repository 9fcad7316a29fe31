"""Parity with the reference engine on the Mooncake conversation trace (first 2,000 rows).

4 aggregated workers, vLLM, 512-token blocks, 1000 GPU blocks, fixed timing 20 / 5 ms.
Round robin is deterministic in the reference; its KV router breaks cost ties at random, so
kvreplay (deterministic) must land inside the spread of five reference runs, widened a little.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from engine_support import mooncake_workload, native, record_dict, summary

from kvreplay.engine import run_native

pytestmark = pytest.mark.reference

ROWS = 2000
RANK = {"backend": "vllm", "block_size": 512, "num_gpu_blocks": 1000,
        "timing_model": {"type": "fixed", "prefill_ms": 20.0, "decode_ms": 5.0}}
# Five reference runs of the KV-router configuration (ai-dynamo 1.6.1).
KV_REUSE_SPREAD = (0.0795, 0.0895)
KV_TTFT_SPREAD = (64.5, 65.1)


@pytest.fixture(scope="module")
def rows(conversation_2000: tuple[list[dict[str, Any]], Path]) -> list[dict[str, Any]]:
    return conversation_2000[0]


@pytest.fixture(scope="module")
def trace_file(conversation_2000: tuple[list[dict[str, Any]], Path]) -> Path:
    return conversation_2000[1]


def reference(trace_file: Path, router: str) -> dict[str, Any]:
    replay = pytest.importorskip("dynamo.replay")
    report = replay.run_trace_replay([str(trace_file)], extra_engine_args={"engine": RANK},
                                     num_workers=4, router_mode=router, trace_format="mooncake",
                                     trace_block_size=512)
    return dict(report.summary if hasattr(report, "summary") else report["summary"])


def kvreplay(rows: list[dict[str, Any]], router: str) -> tuple[dict[str, float], list[Any]]:
    result = run_native(native(dict(RANK), workers=4, router=router),
                        workload=mooncake_workload(rows, 512))
    return summary(result.records), result.records


def test_round_robin_matches_the_reference(rows: list[dict[str, Any]], trace_file: Path) -> None:
    """Round robin: reuse within 0.005, mean TTFT, mean TPOT and duration within 2%."""
    ref = reference(trace_file, "round_robin")
    mine, _ = kvreplay(rows, "round_robin")
    assert mine["prefix_cache_reused_ratio"] == pytest.approx(ref["prefix_cache_reused_ratio"],
                                                              abs=0.005)
    for key in ("mean_ttft_ms", "mean_tpot_ms", "duration_ms"):
        assert mine[key] == pytest.approx(ref[key], rel=0.02), key


def test_kv_router_is_deterministic_and_inside_the_reference_spread(
        rows: list[dict[str, Any]], trace_file: Path) -> None:
    """KV router: identical records on a rerun; reuse within the reference spread widened by
    0.01, mean TTFT within it widened by 3%. The installed reference's own (unseeded, random)
    run is only checked loosely (0.03 around the spread), so it never fails a landing at random."""
    ref = reference(trace_file, "kv_router")["prefix_cache_reused_ratio"]
    assert KV_REUSE_SPREAD[0] - 0.03 <= ref <= KV_REUSE_SPREAD[1] + 0.03
    first, records = kvreplay(rows, "kv_router")
    second, again = kvreplay(rows, "kv_router")
    assert [record_dict(r) for r in records] == [record_dict(r) for r in again]
    assert first == second
    low, high = KV_REUSE_SPREAD
    assert low - 0.01 <= first["prefix_cache_reused_ratio"] <= high + 0.01
    low, high = KV_TTFT_SPREAD
    assert low * 0.97 <= first["mean_ttft_ms"] <= high * 1.03


LONG_RANK = {"backend": "vllm", "block_size": 4, "max_num_seqs": 8, "max_num_batched_tokens": 64,
             "timing_model": {"type": "fixed", "prefill_ms": 3.0, "decode_ms": 1.0}}
LONG_ROWS = [{"timestamp": 0, "input_length": 8, "output_length": 5000, "hash_ids": [1, 2]},
             {"timestamp": 10, "input_length": 12, "output_length": 3000, "hash_ids": [1, 2, 3]},
             {"timestamp": 2000, "input_length": 8, "output_length": 4000, "hash_ids": [7, 8]},
             {"timestamp": 2500, "input_length": 4, "output_length": 1, "hash_ids": [9]}]


@pytest.mark.parametrize(("workers", "blocks"), [(1, 3000), (2, 3000), (1, 1500)])
def test_long_decodes_match_the_reference_per_request(tmp_path: Path, workers: int,
                                                      blocks: int) -> None:
    """Decodes of 3,000-5,000 tokens in 4-token blocks under fixed timing (stretches across
    hundreds of blocks; at 1,500 blocks one request is preempted): every request's arrival,
    TTFT, end-to-end latency, output length and readmissions equal the reference's."""
    import json

    from kvreplay.engine.report import report_from_run

    replay = pytest.importorskip("dynamo.replay")
    trace = tmp_path / "long.jsonl"
    trace.write_text("".join(json.dumps(row) + "\n" for row in LONG_ROWS))
    rank = {**LONG_RANK, "num_gpu_blocks": blocks}
    theirs = replay.run_trace_replay([str(trace)], extra_engine_args={"engine": rank},
                                     num_workers=workers, router_mode="round_robin",
                                     trace_format="mooncake", trace_block_size=4,
                                     capture_per_request=True).per_request
    result = run_native(native(dict(rank), workers=workers),
                        workload=mooncake_workload(LONG_ROWS, 4))
    ours = report_from_run(result)["per_request"]
    keys = ("arrival_time_ms", "ttft_ms", "e2e_latency_ms", "output_length",
            "readmission_count")

    def rows(report_rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return sorted(tuple(row[k] for k in keys) for row in report_rows)

    assert rows(ours) == [tuple(pytest.approx(v, abs=1e-6) for v in row)
                          for row in rows(theirs)]


@pytest.mark.parametrize("backend", ["sglang", "trtllm"])
def test_backends_match_the_reference_on_round_robin(rows: list[dict[str, Any]],
                                                     trace_file: Path, backend: str) -> None:
    """SGLang and TensorRT-LLM under their own schedulers (issue 26), round robin, the first
    2,000 conversation rows: every request's arrival, TTFT, E2E, output length and reuse, and
    the summary's reuse, mean TTFT, mean TPOT and duration equal the reference's (to 1e-6)."""
    from kvreplay.engine.report import report_from_run

    replay = pytest.importorskip("dynamo.replay")
    rank = {**RANK, "backend": backend}
    report = replay.run_trace_replay([str(trace_file)], extra_engine_args={"engine": rank},
                                     num_workers=4, router_mode="round_robin",
                                     trace_format="mooncake", trace_block_size=512,
                                     capture_per_request=True)
    ref = dict(report.summary if hasattr(report, "summary") else report["summary"])
    result = run_native(native(dict(rank), workers=4), workload=mooncake_workload(rows, 512))
    mine = summary(result.records)
    for key in ("prefix_cache_reused_ratio", "mean_ttft_ms", "mean_tpot_ms", "duration_ms"):
        assert mine[key] == pytest.approx(ref[key], rel=1e-6), key
    keys = ("arrival_time_ms", "ttft_ms", "e2e_latency_ms", "output_length",
            "reused_input_tokens", "readmission_count", "terminal_status")

    def per_request(report_rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return sorted(tuple(row[k] for k in keys) for row in report_rows)

    ours = per_request(report_from_run(result)["per_request"])
    theirs = per_request(report.per_request)
    assert len(ours) == len(theirs) == len(rows)
    assert ours == [tuple(pytest.approx(v, abs=1e-6) for v in row) for row in theirs]
