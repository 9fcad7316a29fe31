"""Spec -> canonical native JSON (docs/native-json.md): explicit values, sorted keys, same bytes."""

from __future__ import annotations

import json
from typing import Any

from kvreplay.compiler import spec as s

HOST_OFFLOAD_DEFAULTS = {
    "scope": "dp_rank_local",
    "shared_d2h_bandwidth_gbps": 80.0,
    "shared_h2d_bandwidth_gbps": 80.0,
    "latency_to_first_byte_ms": 0.0,
}

# Topology key of each role (the aggregated pool is called `workers`).
TOPOLOGY_KEY = {"aggregated": "workers", "prefill": "prefill", "decode": "decode"}


def _float(value: float | int) -> float:
    return float(value)


def _opt_float(value: float | int | None) -> float | None:
    return None if value is None else float(value)


def host_offload(g2: s.HostOffload) -> dict[str, Any]:
    """The native engine's canonical form: a few defaults are omitted, as its normalizer does."""
    out: dict[str, Any] = {
        "num_host_blocks": g2.num_host_blocks,
        "d2h_bandwidth_gbps": _float(g2.d2h_bandwidth_gbps),
        "h2d_bandwidth_gbps": _float(g2.h2d_bandwidth_gbps),
    }
    optional = {
        "scope": g2.scope,
        "shared_d2h_bandwidth_gbps": _float(g2.shared_d2h_bandwidth_gbps),
        "shared_h2d_bandwidth_gbps": _float(g2.shared_h2d_bandwidth_gbps),
        "latency_to_first_byte_ms": _float(g2.latency_to_first_byte_ms),
    }
    out.update({k: v for k, v in optional.items() if v != HOST_OFFLOAD_DEFAULTS[k]})
    if g2.kv_layout_id is not None:
        out["kv_layout_id"] = g2.kv_layout_id
    return out


def g3_offload(g3: s.G3Offload) -> dict[str, Any]:
    return {
        "scope": g3.scope,
        "num_g3_blocks": g3.num_g3_blocks,
        "latency_to_first_byte_ms": _float(g3.latency_to_first_byte_ms),
        "read_bandwidth_gbps": _float(g3.read_bandwidth_gbps),
        "write_bandwidth_gbps": _float(g3.write_bandwidth_gbps),
        "shared_read_bandwidth_gbps": _float(g3.shared_read_bandwidth_gbps),
        "shared_write_bandwidth_gbps": _float(g3.shared_write_bandwidth_gbps),
    }


def timing(t: s.Timing) -> dict[str, Any]:
    if t.type == "fixed":
        return {"type": "fixed", "prefill_ms": _opt_float(t.prefill_ms),
                "decode_ms": _opt_float(t.decode_ms)}
    return {"type": t.type}


def rank(role: s.Role) -> dict[str, Any]:
    """The native rank descriptor of a role, every field the engine reads written explicitly."""
    out: dict[str, Any] = {
        "backend": role.backend,
        "worker_type": role.name,
        "block_size": role.block_size,
        "num_gpu_blocks": role.num_gpu_blocks,
        "max_num_seqs": role.max_num_seqs,
        "max_num_batched_tokens": role.max_num_batched_tokens,
        "max_model_len": role.max_model_len,
        "enable_prefix_caching": role.enable_prefix_caching,
        "enable_chunked_prefill": role.enable_chunked_prefill,
        "prefill_schedule_interval": role.prefill_schedule_interval,
        "preemption_mode": role.preemption_mode,
        "speedup_ratio": _float(role.speedup_ratio),
        "decode_speedup_ratio": _float(role.decode_speedup_ratio),
        "kv_transfer_bytes_per_token": role.kv_transfer_bytes_per_token,
        "kv_transfer_bandwidth": _opt_float(role.kv_transfer_bandwidth),
        "kv_transfer_timing_mode": role.kv_transfer_timing_mode,
        "timing_model": timing(role.timing_model),
    }
    # The native normalizer drops an unknown (null) KV size, so it is written only when known.
    if role.kv_cache_bytes_per_token is not None:
        out["kv_cache_bytes_per_token"] = role.kv_cache_bytes_per_token
    if role.host_offload is not None:
        out["native_host_offload"] = host_offload(role.host_offload)
    if role.g3_offload is not None:
        out["g3_offload"] = g3_offload(role.g3_offload)
    if role.backend == "sglang" or role.prefill_decode_interval:
        out["prefill_decode_interval"] = role.prefill_decode_interval
    if role.sglang is not None:
        o = role.sglang
        out["sglang"] = {
            "schedule_policy": o.schedule_policy,
            "max_prefill_tokens": o.max_prefill_tokens,
            "chunked_prefill_size": o.chunked_prefill_size,
            "clip_max_new_tokens": o.clip_max_new_tokens,
            "schedule_conservativeness": _float(o.schedule_conservativeness),
        }
    if role.trtllm is not None:
        out["trtllm"] = {"capacity_scheduler_policy": role.trtllm.capacity_scheduler_policy}
    spec = role.speculation
    if spec is not None and spec.kind == "mtp":
        out["aic_nextn"] = spec.num_speculative_tokens
        out["aic_nextn_accept_rates"] = ",".join(repr(float(r)) for r in spec.acceptance_rates)
        out["aic_mtp_seed"] = spec.seed
    return out


def role(r: s.Role) -> dict[str, Any]:
    spec = r.speculation
    ngram = None
    if spec is not None and spec.kind != "mtp":
        ngram = {
            "kind": spec.kind,
            "num_speculative_tokens": spec.num_speculative_tokens,
            "acceptance_rates": [float(x) for x in spec.acceptance_rates],
            "seed": spec.seed,
        }
    return {
        "dp_size": r.dp_size,
        "tensor_parallel_size": r.tensor_parallel_size,
        "num_gpu_blocks_is_explicit": r.num_gpu_blocks_is_explicit,
        "pipeline_parallel_size": r.pipeline_parallel_size,
        "prefill_context_parallel_size": r.prefill_context_parallel_size,
        "decode_context_parallel_size": r.decode_context_parallel_size,
        "startup_seconds": _float(r.startup_seconds),
        "speculation": ngram,
        "rank": rank(r),
    }


def is_plain_aggregated(spec: s.Spec) -> bool:
    """The aggregated shape writes the role unnamed: `"engine": ROLE`."""
    return spec.mode == "aggregated" and [r.name for r in spec.roles] == ["aggregated"]


def topology(spec: s.Spec) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": spec.mode}
    for r in spec.roles:
        out[TOPOLOGY_KEY.get(r.name, r.name)] = {"initial_workers": r.workers}
    if spec.mode == "disaggregated":
        out["handoff_latency_ms"] = _float(spec.handoff_latency_ms)
    return out


def placement(router: s.Router) -> dict[str, Any]:
    knobs = {
        "kv_event_lag_ms": _float(router.kv_event_lag_ms),
        "host_cache_hit_weight": _float(router.host_cache_hit_weight),
        "overlap_score_credit": _float(router.overlap_score_credit),
        "prefill_load_scale": _float(router.prefill_load_scale),
        "temperature": _float(router.temperature),
        "seed": router.seed,
        "overlap_score_credit_decay": _float(router.overlap_score_credit_decay),
        "decode_active_request_weight": _float(router.decode_active_request_weight),
        "disk_cache_hit_weight": _float(router.disk_cache_hit_weight),
        "queue_threshold": _opt_float(router.queue_threshold),
        "queue_policy": router.queue_policy,
    }
    if router.policy == "kv_router":
        return {"provider": router.policy, "config": knobs}
    # Round robin ignores the knobs; ones set away from their defaults are kept so that every
    # entry point can warn about them (ROUTER-KV-ONLY).
    set_knobs = {k: v for k, v in knobs.items() if v != s.ROUTER_KNOB_DEFAULTS[k]}
    return {"provider": router.policy, "config": set_knobs or None}


def traffic(t: s.Traffic) -> dict[str, Any]:
    profile = None
    if t.agentic_profile is not None:
        p = t.agentic_profile
        profile = {
            "duration_seconds": _float(p.duration_seconds),
            "response_grace_seconds": _float(p.response_grace_seconds),
            "cancel_drain_seconds": _float(p.cancel_drain_seconds),
            "tree_idle_cap_seconds": _float(p.tree_idle_cap_seconds),
            "global_idle_cap_seconds": _float(p.global_idle_cap_seconds),
        }
    return {
        "source_type": t.source_type,
        "trace_format": t.trace_format,
        "trace_paths": list(t.trace_paths),
        "trace_block_size": t.trace_block_size,
        "weka_nested_timestamp_basis": t.weka_nested_timestamp_basis,
        "input_tokens": t.input_tokens,
        "output_tokens": t.output_tokens,
        "cached_prefix_tokens": t.cached_prefix_tokens,
        "turns_per_session": t.turns_per_session,
        "shared_prefix_ratio": _opt_float(t.shared_prefix_ratio),
        "num_prefix_groups": t.num_prefix_groups,
        "inter_turn_delay_ms": _opt_float(t.inter_turn_delay_ms),
        "load_type": t.load_type,
        "concurrency": t.concurrency,
        "request_rate": _opt_float(t.request_rate),
        "arrival_seed": t.arrival_seed,
        "speedup": _opt_float(t.speedup),
        "agentic_lanes": t.agentic_lanes,
        "agentic_snapshot_seed": t.agentic_snapshot_seed,
        "agentic_warmup": t.agentic_warmup,
        "agentic_profile": profile,
        "stop_requests": t.stop_requests,
        "stop_sessions": t.stop_sessions,
    }


def to_native(spec: s.Spec) -> dict[str, Any]:
    """The native JSON document of a Spec, as plain data."""
    if is_plain_aggregated(spec):
        engine: dict[str, Any] = role(spec.roles[0])
    else:
        engine = {r.name: role(r) for r in spec.roles}
    sla = None
    if spec.sla is not None:
        sla = {"ttft_ms": _opt_float(spec.sla.ttft_ms), "itl_ms": _opt_float(spec.sla.itl_ms),
               "e2e_ms": _opt_float(spec.sla.e2e_ms)}
    return {
        "spec": {
            "version": spec.version,
            "model": spec.model,
            "hardware": spec.hardware,
            "backend_version": spec.backend_version,
            "topology": topology(spec),
            "engine": engine,
            "adapters": {
                "placement": placement(spec.router),
                "scaling": {
                    "provider": spec.scaling.policy,
                    "config": None if spec.scaling.policy == "none" else spec.scaling.config,
                },
            },
            "max_sim_time_ms": _opt_float(spec.max_sim_time_ms),
            "record_per_request": spec.record_per_request,
            "sla": sla,
        },
        "traffic": traffic(spec.traffic),
    }


def dumps(document: Any) -> str:
    """Canonical text: sorted keys, 2-space indent, `\\n`, one trailing newline, no NaN."""
    text = json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
    return text + "\n"


def emit(spec: s.Spec) -> str:
    return dumps(to_native(spec))
