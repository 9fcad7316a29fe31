"""Trace -> workload -> bundled engine -> report, against the reference engine on the same input:
every summary value equal (means and standard deviations to 1e-12: the reference sums floats)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from engine_io_support import trace_traffic, write_trace

from kvreplay.engine.report import Sla, dumps_report, report_from_run
from kvreplay.engine.traces import workload_from_traffic

pytestmark = pytest.mark.reference

ROUNDED = ("mean_", "std_", "decode_worker_seconds", "gpu_hours")


def _document(section: dict[str, Any], *, workers: int, block_size: int, prefill_ms: float,
              decode_ms: float, sla: dict[str, Any] | None) -> dict[str, Any]:
    rank = {"backend": "vllm", "worker_type": "aggregated", "block_size": block_size,
            "num_gpu_blocks": 2000, "max_num_seqs": 256, "max_num_batched_tokens": 8192,
            "max_model_len": None, "enable_prefix_caching": True, "enable_chunked_prefill": True,
            "prefill_schedule_interval": 1, "preemption_mode": "lifo", "speedup_ratio": 1.0,
            "decode_speedup_ratio": 1.0, "kv_transfer_bytes_per_token": None,
            "kv_transfer_bandwidth": None, "kv_transfer_timing_mode": "full_prompt",
            "timing_model": {"type": "fixed", "prefill_ms": prefill_ms, "decode_ms": decode_ms}}
    role = {"dp_size": 1, "tensor_parallel_size": 1, "num_gpu_blocks_is_explicit": True,
            "pipeline_parallel_size": 1, "prefill_context_parallel_size": None,
            "decode_context_parallel_size": None, "startup_seconds": 0.0, "speculation": None,
            "rank": rank}
    return {"spec": {"version": 1, "model": "m", "hardware": None, "backend_version": None,
                     "topology": {"kind": "aggregated", "workers": {"initial_workers": workers}},
                     "engine": role,
                     "adapters": {"placement": {"provider": "round_robin", "config": None},
                                  "scaling": {"provider": "none", "config": None}},
                     "max_sim_time_ms": None, "record_per_request": True, "sla": sla},
            "traffic": section}


def _compare(path: Path, *, workers: int, block_size: int, trace_block_size: int,
             prefill_ms: float, decode_ms: float, sla: dict[str, Any] | None = None) -> None:
    replay = pytest.importorskip("dynamo.replay")
    api = pytest.importorskip("kvreplay.engine.api")
    section = trace_traffic(path, block_size=trace_block_size)
    document = _document(section, workers=workers, block_size=block_size,
                         prefill_ms=prefill_ms, decode_ms=decode_ms, sla=sla)
    result = api.run_native(document, workload=workload_from_traffic(section, base_dir="."))
    ours = report_from_run(result, sla=Sla(**sla) if sla else None)
    dumps_report(ours)
    rank = {k: v for k, v in document["spec"]["engine"]["rank"].items() if v is not None}
    sla_args = {f"sla_{k}": v for k, v in (sla or {}).items()}
    reference = replay.run_trace_replay([str(path)], extra_engine_args={"engine": rank},
                                        num_workers=workers, trace_format="mooncake",
                                        trace_block_size=trace_block_size, **sla_args)
    wall_clock = {"wall_time_ms", "processed_tokens_per_s", "processed_output_tokens_per_s"}
    for key, value in sorted(reference.summary.items()):
        if key in wall_clock:
            continue
        if key.startswith(ROUNDED):
            assert ours["summary"][key] == pytest.approx(value, rel=1e-12, abs=1e-12), key
        else:
            assert ours["summary"][key] == value, key


def test_hand_timeline_end_to_end(tmp_path: Path) -> None:
    """The hand-made four-request timeline with a TTFT + ITL SLA."""
    path = write_trace(tmp_path / "t.jsonl", [
        {"timestamp": 0, "input_length": 8, "output_length": 5, "hash_ids": [1, 2]},
        {"timestamp": 13, "input_length": 8, "output_length": 3, "hash_ids": [3, 4]},
        {"timestamp": 13, "input_length": 4, "output_length": 1, "hash_ids": [5]},
        {"timestamp": 100, "input_length": 4, "output_length": 0, "hash_ids": [6]}])
    _compare(path, workers=1, block_size=4, trace_block_size=4, prefill_ms=10.0, decode_ms=2.0,
             sla={"ttft_ms": 12.0, "itl_ms": 3.0, "e2e_ms": None})


def test_conversation_trace_prefix_end_to_end(conversation_trace: Path, tmp_path: Path) -> None:
    """The first 300 rows of the Mooncake conversation trace on two workers."""
    with open(conversation_trace, encoding="utf-8") as rows:
        head = [next(rows) for _ in range(300)]
    path = tmp_path / "head.jsonl"
    path.write_text("".join(head), encoding="utf-8")
    _compare(path, workers=2, block_size=64, trace_block_size=512, prefill_ms=20.0,
             decode_ms=5.0)
