"""Test helpers for the engine: a list-backed Workload, a tiny Mooncake loader, native documents.

The real trace readers live in kvreplay.engine.traces; these stand-ins keep the engine's tests
independent of them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kvreplay.engine.records import RequestRecord
from kvreplay.engine.traces.request import TraceRequest, WorkloadDefaults, runs_from_hash_ids


class ListWorkload(WorkloadDefaults):
    """Open-loop workload over a fixed list of requests (released at release_ms, ordinal order)."""

    def __init__(self, requests: Sequence[TraceRequest]) -> None:
        self._pending = sorted(requests, key=lambda r: (r.release_ms, r.ordinal))
        self._next = 0
        self.total_requests = len(self._pending)
        self.terminals: list[tuple[int, float]] = []

    def next_release_ms(self) -> float | None:
        if self._next < len(self._pending):
            return self._pending[self._next].release_ms
        return None

    def release(self, now_ms: float) -> list[TraceRequest]:
        out = []
        while self._next < len(self._pending) and self._pending[self._next].release_ms <= now_ms:
            out.append(self._pending[self._next])
            self._next += 1
        return out

    def on_terminal(self, request: TraceRequest, now_ms: float, *, status: str = "completed",
                    output_tokens: int | None = None) -> None:
        self.terminals.append((request.ordinal, now_ms))

    def exhausted(self) -> bool:
        return self._next >= len(self._pending)


def request(ordinal: int, at_ms: float, input_length: int, output_length: int,
            hash_ids: Sequence[int], block_size: int = 4) -> TraceRequest:
    """A Mooncake-style request: each hash id covers block_size tokens, cut at input_length."""
    return TraceRequest(ordinal, f"r{ordinal}", at_ms, input_length, output_length,
                        runs_from_hash_ids(hash_ids, block_size, input_length))


def mooncake_rows(path: Path, limit: int | None = None) -> list[dict[str, Any]]:
    rows = []
    with path.open() as f:
        for line in f:
            if limit is not None and len(rows) >= limit:
                break
            rows.append(json.loads(line))
    return rows


def mooncake_workload(rows: Sequence[dict[str, Any]], block_size: int = 512) -> ListWorkload:
    """Minimal Mooncake reading: timestamps normalized to start at 0, rows in file order."""
    t0 = min(row.get("timestamp", 0) for row in rows)
    reqs = []
    for i, row in enumerate(rows):
        hash_ids = row["hash_ids"]
        length = row.get("input_length", len(hash_ids) * block_size)
        reqs.append(TraceRequest(i, f"row{i}", float(row.get("timestamp", 0) - t0), length,
                                 row["output_length"],
                                 runs_from_hash_ids(hash_ids, block_size, length)))
    return ListWorkload(reqs)


def rank(**overrides: Any) -> dict[str, Any]:
    """A native vLLM rank: block 4, fixed timing prefill 10 / decode 2 unless overridden."""
    out: dict[str, Any] = {
        "backend": "vllm",
        "block_size": 4,
        "num_gpu_blocks": 64,
        "kv_cache_bytes_per_token": 250000,
        "timing_model": {"type": "fixed", "prefill_ms": 10.0, "decode_ms": 2.0},
    }
    out.update(overrides)
    return out


def native(rank_args: dict[str, Any] | None = None, *, workers: int = 1, dp_size: int = 1,
           router: str = "round_robin", router_config: dict[str, Any] | None = None,
           max_sim_time_ms: float | None = None) -> dict[str, Any]:
    """An aggregated native document."""
    return {
        "spec": {
            "version": 1,
            "model": "test",
            "topology": {"kind": "aggregated", "workers": {"initial_workers": workers}},
            "engine": {"dp_size": dp_size, "tensor_parallel_size": 1, "speculation": None,
                       "rank": {"worker_type": "aggregated", **(rank_args or rank())}},
            "adapters": {"placement": {"provider": router, "config": router_config},
                         "scaling": {"provider": "none", "config": None}},
            "max_sim_time_ms": max_sim_time_ms,
            "record_per_request": True,
            "sla": None,
        },
        "traffic": {"source_type": "trace", "trace_format": "mooncake"},
    }


def native_pd(prefill: dict[str, Any], decode: dict[str, Any], *, prefill_workers: int = 1,
              decode_workers: int = 1, handoff_latency_ms: float = 0.0,
              router: str = "round_robin", dp_size: int = 1) -> dict[str, Any]:
    """A disaggregated native document."""
    doc = native(router=router)
    doc["spec"]["topology"] = {
        "kind": "disaggregated",
        "prefill": {"initial_workers": prefill_workers},
        "decode": {"initial_workers": decode_workers},
        "handoff_latency_ms": handoff_latency_ms,
    }
    doc["spec"]["engine"] = {
        "prefill": {"dp_size": dp_size, "speculation": None,
                    "rank": {**prefill, "worker_type": "prefill"}},
        "decode": {"dp_size": dp_size, "speculation": None,
                   "rank": {**decode, "worker_type": "decode"}},
    }
    return doc


def record_dict(rec: RequestRecord) -> dict[str, Any]:
    out = {name: getattr(rec, name) for name in RequestRecord.__slots__}
    out["admission_history"] = [a.to_dict() for a in rec.admission_history]
    out["routing_history"] = [r.to_dict() for r in rec.routing_history]
    out["itl_gaps"] = rec.itl_runs()  # fast-forward shares a stretch's gaps between records
    return out


def summary(records: Sequence[RequestRecord]) -> dict[str, float]:
    """The few reference summary numbers the parity tests compare."""
    done = [r for r in records if r.terminal_status == "completed"]
    ttft = [r.first_token_ms - r.arrival_time_ms for r in done if r.first_token_ms is not None]
    tpot = [(r.last_token_ms - r.first_token_ms) / (r.output_length - 1)
            for r in done if r.output_length >= 2 and r.first_token_ms is not None
            and r.last_token_ms is not None]
    inputs = sum(r.input_length for r in records)
    return {
        "prefix_cache_reused_ratio": sum(r.reused_input_tokens for r in records) / inputs,
        "mean_ttft_ms": sum(ttft) / len(ttft),
        "mean_tpot_ms": sum(tpot) / len(tpot),
        "duration_ms": max(r.terminal_time_ms or 0.0 for r in records),
    }
