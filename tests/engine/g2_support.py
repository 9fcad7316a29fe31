"""G2 scenarios as Mooncake-style rows, run on kvreplay and (for parity) on the reference engine.

Common ground (engine.md section 9): vLLM, block 4, 250000 bytes per token, so a block is 1 MB and
moves in 1 ms at 1 GB/s; fixed timing prefill 2 / decode 1 ms; G1 of 3 blocks, max_num_seqs 1,
budget 16 (example 5's engine).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine_support import ListWorkload, native, native_pd, request

from kvreplay.engine import run_native
from kvreplay.engine.records import RequestRecord
from kvreplay.engine.result import RunResult

Row = dict[str, Any]

# engine.md section 9, example 5: A evicted by B, A again restores 8 tokens from host.
EXAMPLE5 = [
    {"timestamp": 0, "hash_ids": [1, 2, 3], "input_length": 9, "output_length": 1},
    {"timestamp": 100, "hash_ids": [11, 12, 13], "input_length": 9, "output_length": 1},
    {"timestamp": 200, "hash_ids": [1, 2, 3], "input_length": 9, "output_length": 1},
]
G2 = {"num_host_blocks": 8, "d2h_bandwidth_gbps": 1.0, "h2d_bandwidth_gbps": 1.0}


def g2(**overrides: Any) -> dict[str, Any]:
    out: dict[str, Any] = {**G2, **overrides}
    if out.get("scope") == "cluster_shared":
        out.setdefault("kv_layout_id", "test-layout")
    return out


def rank(host: dict[str, Any] | None = None, **overrides: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "backend": "vllm", "block_size": 4, "kv_cache_bytes_per_token": 250000,
        "num_gpu_blocks": 3, "max_num_seqs": 1, "max_num_batched_tokens": 16,
        "timing_model": {"type": "fixed", "prefill_ms": 2.0, "decode_ms": 1.0},
    }
    if host is not None:
        out["native_host_offload"] = host
    out.update(overrides)
    return out


def pd_role(host: dict[str, Any] | None = None, **overrides: Any) -> dict[str, Any]:
    """A P/D role: handoff of 250000 bytes per token at 1 GB/s (full prompt)."""
    return rank(host, kv_transfer_bytes_per_token=250000, kv_transfer_bandwidth=1.0, **overrides)


def workload(rows: Sequence[Row]) -> ListWorkload:
    return ListWorkload([request(i, float(r["timestamp"]), r["input_length"], r["output_length"],
                                 r["hash_ids"]) for i, r in enumerate(rows)])


def run_agg(rows: Sequence[Row], rank_args: dict[str, Any], *, workers: int = 1,
            router: str = "round_robin", router_config: dict[str, Any] | None = None,
            stepwise: bool = False) -> RunResult:
    doc = native(dict(rank_args), workers=workers, router=router, router_config=router_config)
    return run_native(doc, workload=workload(rows), stepwise=stepwise)


def run_pd(rows: Sequence[Row], prefill: dict[str, Any], decode: dict[str, Any], *,
           prefill_workers: int = 1, decode_workers: int = 1) -> RunResult:
    doc = native_pd(dict(prefill), dict(decode), prefill_workers=prefill_workers,
                    decode_workers=decode_workers)
    return run_native(doc, workload=workload(rows))


def by_arrival(records: Sequence[RequestRecord]) -> list[RequestRecord]:
    return sorted(records, key=lambda r: (r.arrival_time_ms, r.ordinal))


# -- the reference engine ------------------------------------------------------------------------

COMPARED = ("first_admit_ms", "first_token_ms", "terminal_time_ms", "reused_input_tokens",
            "first_admission_g1_reused_input_tokens", "first_admission_host_reused_input_tokens",
            "terminal_status", "output_length", "prefill_admit_ms", "source_held_ms",
            "destination_reserved_ms", "destination_activated_ms", "decode_admit_ms")


def write_rows(rows: Sequence[Row], path: Path) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def reference_agg(rows: Sequence[Row], rank_args: dict[str, Any], path: Path, *,
                  workers: int = 1, router: str = "round_robin", **kw: Any) -> Any:
    from dynamo.replay import run_trace_replay

    return run_trace_replay([str(write_rows(rows, path))],
                            extra_engine_args={"engine": dict(rank_args)}, num_workers=workers,
                            router_mode=router, trace_format="mooncake", trace_block_size=4,
                            capture_per_request=True, **kw)


def reference_pd(rows: Sequence[Row], prefill: dict[str, Any], decode: dict[str, Any],
                 path: Path, *, prefill_workers: int = 1, decode_workers: int = 1) -> Any:
    from dynamo.replay import run_trace_replay

    return run_trace_replay([str(write_rows(rows, path))],
                            prefill_engine_args={"engine": {**prefill, "worker_type": "prefill"}},
                            decode_engine_args={"engine": {**decode, "worker_type": "decode"}},
                            num_prefill_workers=prefill_workers,
                            num_decode_workers=decode_workers, router_mode="round_robin",
                            trace_format="mooncake", trace_block_size=4, capture_per_request=True)


def per_request_differences(reference: Any, result: RunResult) -> list[str]:
    """Field-by-field differences, requests matched by (arrival, input, output length)."""
    theirs = sorted(reference.per_request, key=lambda p: (
        p["arrival_time_ms"], p["input_length"], p["requested_output_length"]))
    ours = sorted(result.records, key=lambda r: (
        r.arrival_time_ms, r.input_length, r.requested_output_length))
    out = []
    if len(theirs) != len(ours):
        out.append(f"{len(theirs)} reference rows vs {len(ours)} records")
    for p, r in zip(theirs, ours, strict=False):
        for key in COMPARED:
            a, b = p.get(key), getattr(r, key)
            same = abs(a - b) <= 1e-6 if isinstance(a, float) and isinstance(b, float) else a == b
            if not same:
                out.append(f"request at {p['arrival_time_ms']} ms: {key} reference {a!r}, "
                           f"kvreplay {b!r}")
    return out


# Wall-clock figures, and kvreplay's own figures (G2, rejections) the reference does not report.
NOT_COMPARED = {"wall_time_ms", "processed_tokens_per_s", "processed_output_tokens_per_s",
                "g2_transfers", "g2_timeline", "first_admission_host_reused_ratio",
                "g3_timeline", "first_admission_g3_reused_ratio",
                "rejected_requests", "rejections"}


def summary_differences(reference: Any, result: RunResult) -> list[str]:
    """Summary keys whose values differ (floats to 1e-9 relative), either side missing one."""
    from kvreplay.engine.report import report_from_run

    ours = report_from_run(result)["summary"]
    theirs = dict(reference.summary)
    out = []
    for key in sorted((set(ours) | set(theirs)) - NOT_COMPARED):
        a, b = theirs.get(key), ours.get(key)
        if isinstance(a, float) and isinstance(b, float):
            same = abs(a - b) <= 1e-9 * max(1.0, abs(a))
        else:
            same = a == b
        if not same:
            out.append(f"{key}: reference {a!r}, kvreplay {b!r}")
    return out
