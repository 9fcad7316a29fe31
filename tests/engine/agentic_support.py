"""Agentic cases (tests/cases/agentic/cases.json) on kvreplay and on the reference engine.

A case is the keyword arguments of the reference's `run_trace_replay` for one trace; kvreplay
runs the same deployment from an equivalent native document through its own traffic reader.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from engine_support import native, native_pd

from kvreplay.engine import run_native
from kvreplay.engine.report import report_from_run
from kvreplay.engine.traces import workload_from_traffic

CASES_DIR = Path(__file__).resolve().parents[1] / "cases" / "agentic"

# Compared per request (requests matched by request id) and in the summary.
ROW_KEYS = ("request_id", "play_id", "session_id", "agentic", "uuid", "arrival_time_ms",
            "dispatched_at_ms", "first_admit_ms", "first_token_ms", "last_token_ms",
            "terminal_time_ms", "input_length", "output_length", "reused_input_tokens",
            "first_admission_g1_reused_input_tokens", "first_admission_host_reused_input_tokens",
            "terminal_status")
NOT_COMPARED = {"wall_time_ms", "processed_tokens_per_s", "processed_output_tokens_per_s",
                "g2_transfers", "g2_timeline", "first_admission_host_reused_ratio",
                "rejected_requests", "rejections"}


@cache
def cases() -> dict[str, dict[str, Any]]:
    data = json.loads((CASES_DIR / "cases.json").read_text())
    return {c["name"]: c for c in data}


def document(params: dict[str, Any]) -> dict[str, Any]:
    """The native document of a reference call."""
    router = params.get("router_mode", "round_robin")
    if "prefill_engine_args" in params:
        prefill = {k: v for k, v in params["prefill_engine_args"]["engine"].items()
                   if k != "worker_type"}
        decode = {k: v for k, v in params["decode_engine_args"]["engine"].items()
                  if k != "worker_type"}
        doc = native_pd(prefill, decode, prefill_workers=params.get("num_prefill_workers", 1),
                        decode_workers=params.get("num_decode_workers", 1), router=router)
    else:
        lag = params.get("kv_event_lag_ms")
        doc = native(dict(params["extra_engine_args"]["engine"]),
                     workers=params.get("num_workers", 1), router=router,
                     router_config={"kv_event_lag_ms": lag} if lag else None,
                     max_sim_time_ms=params.get("max_sim_time_ms"))
    fmt = params.get("trace_format", "weka")
    doc["spec"]["model"] = params.get("execution_model", "model")
    doc["traffic"] = {
        "source_type": "trace", "trace_format": fmt, "load_type": "trace_timestamps",
        "agentic_lanes": params.get("agentic_lanes"),
        "speedup": params.get("arrival_speedup_ratio", 1.0),
        "trace_block_size": params.get("trace_block_size"),
        "weka_nested_timestamp_basis": (params.get("weka_nested_timestamp_basis")
                                        if fmt == "weka" else None)}
    # kvreplay-only load controls (the reference's 1.6.1 Python API has none of them).
    for key in ("agentic_snapshot_seed", "agentic_warmup", "agentic_profile"):
        if key in params:
            doc["traffic"][key] = params[key]
    return doc


BASE_RANK = {"backend": "vllm", "block_size": 4, "num_gpu_blocks": 64, "max_num_seqs": 4,
             "max_num_batched_tokens": 32, "kv_cache_bytes_per_token": 250000,
             "timing_model": {"type": "fixed", "prefill_ms": 2.0, "decode_ms": 1.0}}
BASE_PARAMS = {"num_workers": 1, "router_mode": "round_robin", "trace_format": "weka",
               "trace_block_size": 4, "execution_model": "synthetic-model", "agentic_lanes": 1}


def run_case(name: str, **overrides: Any) -> dict[str, Any]:
    """kvreplay's report of a case (overrides replace reference keyword arguments)."""
    case = cases()[name]
    return run_trace(CASES_DIR / case["trace"], defaults=False,
                     **{**case["params"], **overrides})


def run_trace(trace: Path, lifecycle: list[str] | None = None, defaults: bool = True,
              adjust: Callable[[Any], None] | None = None, **params: Any) -> dict[str, Any]:
    """kvreplay's report of a reference call (BASE_PARAMS and BASE_RANK unless given, when
    `defaults`); `lifecycle` collects the transcript lines; `adjust` sees the workload before
    the run."""
    if defaults:
        params = {**BASE_PARAMS, **params}
        params.setdefault("extra_engine_args", {"engine": dict(BASE_RANK)})
    doc = document(params)
    ranks = [r["rank"] for r in ([doc["spec"]["engine"]] if "rank" in doc["spec"]["engine"]
                                 else doc["spec"]["engine"].values())]
    workload = workload_from_traffic(doc["traffic"], base_dir=str(CASES_DIR),
                                     trace_paths=[str(trace)], model=doc["spec"]["model"],
                                     block_size=min(r["block_size"] for r in ranks))
    if lifecycle is not None:
        workload.lifecycle.sink = lifecycle.append  # type: ignore[union-attr]
    if adjust is not None:
        adjust(workload)
    return report_from_run(run_native(doc, workload=workload))


def reference_case(name: str, **overrides: Any) -> dict[str, Any]:
    """The reference's report of a case: {"summary": ..., "per_request": [...]}."""
    from dynamo.replay import run_trace_replay

    case = cases()[name]
    params = {**case["params"], **overrides}
    report = run_trace_replay([str(CASES_DIR / case["trace"])], capture_per_request=True,
                              **params)
    return {"summary": dict(report.summary), "per_request": list(report.per_request)}


def differences(theirs: dict[str, Any], ours: dict[str, Any]) -> list[str]:
    """Per-request and summary differences (floats to 1e-6)."""
    out = []
    mine = {r["request_id"]: r for r in ours["per_request"]}
    ref = {r["request_id"]: r for r in theirs["per_request"]}
    if set(mine) != set(ref):
        out.append(f"requests only in the reference: {sorted(set(ref) - set(mine))[:3]}, only "
                   f"in kvreplay: {sorted(set(mine) - set(ref))[:3]}")
    for rid in sorted(set(mine) & set(ref)):
        for key in ROW_KEYS:
            if not _same(ref[rid].get(key), mine[rid].get(key)):
                out.append(f"{rid} {key}: reference {ref[rid].get(key)!r}, kvreplay "
                           f"{mine[rid].get(key)!r}")
    summary, ref_summary = ours["summary"], theirs["summary"]
    for key in sorted((set(summary) | set(ref_summary)) - NOT_COMPARED):
        if not _same(ref_summary.get(key), summary.get(key)):
            out.append(f"summary {key}: reference {ref_summary.get(key)!r}, kvreplay "
                       f"{summary.get(key)!r}")
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-6 * max(1.0, abs(a))
    return bool(a == b)
