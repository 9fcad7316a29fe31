"""Native JSON -> Spec: the reader shared by native specs and the Python engine-args API.

Missing rank fields take the native engine's own defaults (for example `kv_transfer_timing_mode`
is `full_prompt` natively), so a hand-written spec means what the native engine would do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvreplay.compiler import spec as s
from kvreplay.compiler.emit import TOPOLOGY_KEY
from kvreplay.compiler.lower import canonical_json
from kvreplay.compiler.origin import Origin, SpecPath
from kvreplay.compiler.source import Path, SourceMap

from kvreplay.diagnostics import Diagnostic
from kvreplay.native_defaults import (
    G3_OFFLOAD_DEFAULTS,
    HOST_OFFLOAD_DEFAULTS,
    RANK_DEFAULTS,
    ROUTER_DEFAULTS,
    block_size_default,
)

ROLE_LEVEL = (
    "dp_size",
    "tensor_parallel_size",
    "num_gpu_blocks_is_explicit",
    "pipeline_parallel_size",
    "prefill_context_parallel_size",
    "decode_context_parallel_size",
    "startup_seconds",
    "speculation",
)



def _f(value: Any) -> float | None:
    return None if value is None else float(value)


def _host_offload(g2: Mapping[str, Any] | None) -> s.HostOffload | None:
    if g2 is None:
        return None
    d = {**HOST_OFFLOAD_DEFAULTS, **g2}
    return s.HostOffload(
        scope=d["scope"],
        num_host_blocks=d.get("num_host_blocks"),
        d2h_bandwidth_gbps=float(d["d2h_bandwidth_gbps"]),
        h2d_bandwidth_gbps=float(d["h2d_bandwidth_gbps"]),
        shared_d2h_bandwidth_gbps=float(d["shared_d2h_bandwidth_gbps"]),
        shared_h2d_bandwidth_gbps=float(d["shared_h2d_bandwidth_gbps"]),
        latency_to_first_byte_ms=float(d["latency_to_first_byte_ms"]),
        kv_layout_id=d["kv_layout_id"],
    )


def _g3(g3: Mapping[str, Any] | None) -> s.G3Offload | None:
    if g3 is None:
        return None
    d = {**G3_OFFLOAD_DEFAULTS, **g3}
    return s.G3Offload(
        scope=d.get("scope"),
        num_g3_blocks=d.get("num_g3_blocks"),
        latency_to_first_byte_ms=float(d["latency_to_first_byte_ms"]),
        read_bandwidth_gbps=float(d["read_bandwidth_gbps"]),
        write_bandwidth_gbps=float(d["write_bandwidth_gbps"]),
        shared_read_bandwidth_gbps=float(d["shared_read_bandwidth_gbps"]),
        shared_write_bandwidth_gbps=float(d["shared_write_bandwidth_gbps"]),
    )


def _speculation(role: Mapping[str, Any], rank: Mapping[str, Any]) -> s.Speculation | None:
    spec = role.get("speculation")
    if spec is not None:
        return s.Speculation(spec.get("kind"), spec.get("num_speculative_tokens"),
                             tuple(float(x) for x in spec.get("acceptance_rates", ())),
                             spec.get("seed", 42))
    if rank.get("aic_nextn") is not None:
        text = rank.get("aic_nextn_accept_rates")
        rates = tuple(float(x) for x in text.split(",")) if text else ()
        return s.Speculation("mtp", rank["aic_nextn"], rates, rank.get("aic_mtp_seed", 42))
    return None


def _timing(t: Mapping[str, Any] | None) -> s.Timing:
    if t is None:
        return s.Timing()
    return s.Timing(t.get("type", "polynomial"), _f(t.get("prefill_ms")), _f(t.get("decode_ms")))


def _sglang(raw: Mapping[str, Any] | None, backend: str) -> s.SglangOptions | None:
    if raw is None:
        return s.SglangOptions() if backend == "sglang" else None
    d = s.SglangOptions()
    return s.SglangOptions(
        raw.get("schedule_policy", d.schedule_policy),
        raw.get("max_prefill_tokens", d.max_prefill_tokens),
        raw.get("chunked_prefill_size", d.chunked_prefill_size),
        raw.get("clip_max_new_tokens", d.clip_max_new_tokens),
        float(raw.get("schedule_conservativeness", d.schedule_conservativeness)),
    )


def _trtllm(raw: Mapping[str, Any] | None, backend: str) -> s.TrtllmOptions | None:
    if raw is None:
        return s.TrtllmOptions() if backend == "trtllm" else None
    return s.TrtllmOptions(raw.get("capacity_scheduler_policy", "guaranteed_no_evict"))


def role_from_native(name: str, role: Mapping[str, Any], workers: int) -> s.Role:
    rank: Mapping[str, Any] = role.get("rank") or {}

    def r(key: str) -> Any:
        return rank.get(key, RANK_DEFAULTS[key])

    backend = r("backend")
    return s.Role(
        name=name,
        workers=workers,
        dp_size=role.get("dp_size", 1),
        tensor_parallel_size=role.get("tensor_parallel_size", 1),
        pipeline_parallel_size=role.get("pipeline_parallel_size", 1),
        prefill_context_parallel_size=role.get("prefill_context_parallel_size"),
        decode_context_parallel_size=role.get("decode_context_parallel_size"),
        num_gpu_blocks_is_explicit=role.get("num_gpu_blocks_is_explicit", "num_gpu_blocks" in rank),
        startup_seconds=float(role.get("startup_seconds", 0.0)),
        speculation=_speculation(role, rank),
        backend=backend,
        block_size=rank.get("block_size", block_size_default(backend)),
        num_gpu_blocks=r("num_gpu_blocks"),
        max_num_seqs=r("max_num_seqs"),
        max_num_batched_tokens=r("max_num_batched_tokens"),
        max_model_len=r("max_model_len"),
        enable_prefix_caching=r("enable_prefix_caching"),
        enable_chunked_prefill=r("enable_chunked_prefill"),
        prefill_schedule_interval=r("prefill_schedule_interval"),
        prefill_decode_interval=r("prefill_decode_interval"),
        preemption_mode=r("preemption_mode"),
        speedup_ratio=float(r("speedup_ratio")),
        decode_speedup_ratio=float(r("decode_speedup_ratio")),
        kv_cache_bytes_per_token=r("kv_cache_bytes_per_token"),
        kv_transfer_bytes_per_token=r("kv_transfer_bytes_per_token"),
        kv_transfer_bandwidth=_f(r("kv_transfer_bandwidth")),
        kv_transfer_timing_mode=r("kv_transfer_timing_mode"),
        timing_model=_timing(rank.get("timing_model")),
        host_offload=_host_offload(rank.get("native_host_offload")),
        g3_offload=_g3(rank.get("g3_offload")),
        sglang=_sglang(rank.get("sglang"), backend),
        trtllm=_trtllm(rank.get("trtllm"), backend),
    )


def traffic_from_native(t: Mapping[str, Any] | None) -> s.Traffic:
    if t is None:
        return s.Traffic()
    source = t.get("source_type", "synthetic")
    profile = t.get("agentic_profile")
    return s.Traffic(
        source_type=source,
        trace_format=t.get("trace_format"),
        trace_paths=tuple(t.get("trace_paths") or ()),
        trace_block_size=t.get("trace_block_size"),
        weka_nested_timestamp_basis=t.get("weka_nested_timestamp_basis"),
        input_tokens=t.get("input_tokens"),
        output_tokens=t.get("output_tokens"),
        cached_prefix_tokens=t.get("cached_prefix_tokens"),
        turns_per_session=t.get("turns_per_session"),
        shared_prefix_ratio=_f(t.get("shared_prefix_ratio")),
        num_prefix_groups=t.get("num_prefix_groups"),
        inter_turn_delay_ms=_f(t.get("inter_turn_delay_ms")),
        load_type=t.get("load_type")
        or ("trace_timestamps" if source == "trace" else "concurrency"),
        concurrency=t.get("concurrency"),
        request_rate=_f(t.get("request_rate")),
        arrival_seed=t.get("arrival_seed"),
        speedup=_f(t.get("speedup")),
        agentic_lanes=t.get("agentic_lanes"),
        agentic_snapshot_seed=t.get("agentic_snapshot_seed"),
        agentic_warmup=bool(t.get("agentic_warmup", False)),
        agentic_profile=None if profile is None else s.AgenticProfile(
            **{k: float(v) for k, v in profile.items()}),
        stop_requests=t.get("stop_requests"),
        stop_sessions=t.get("stop_sessions"),
    )


def roles_of(engine: Mapping[str, Any]) -> tuple[bool, list[tuple[str, Mapping[str, Any]]]]:
    """(plain, [(role name, ROLE)]): `plain` when the engine is one unnamed aggregated ROLE."""
    if "rank" in engine:
        return True, [("aggregated", engine)]
    return False, [(n, engine[n]) for n in s.ROLE_ORDER if isinstance(engine.get(n), Mapping)]


def native_path(spec_path: SpecPath, plain: bool) -> Path:
    """The JSON path in a native document that a Spec field comes from."""
    head, rest = spec_path[0], spec_path[1:]
    if head == "roles" and rest:
        name = rest[0]
        base: Path = ("spec", "engine") if plain else ("spec", "engine", name)
        if len(rest) == 1:
            return base
        field, tail = rest[1], rest[2:]
        if field == "workers":
            return ("spec", "topology", TOPOLOGY_KEY.get(name, name), "initial_workers")
        if field in ROLE_LEVEL:
            return base + (field,) + tail
        if field == "host_offload":
            return base + ("rank", "native_host_offload") + tail
        return base + ("rank", field) + tail
    if head == "traffic":
        return ("traffic",) + rest
    if head == "router":
        if not rest or rest[0] == "policy":
            return ("spec", "adapters", "placement", "provider")
        return ("spec", "adapters", "placement", "config") + rest
    mapping: dict[str, Path] = {
        "mode": ("spec", "topology", "kind"),
        "handoff_latency_ms": ("spec", "topology", "handoff_latency_ms"),
        "scaling": ("spec", "adapters", "scaling"),
    }
    if head in mapping:
        return mapping[head] + rest
    return ("spec", head) + rest


def spec_from_native(data: Mapping[str, Any], source: SourceMap | None,
                     file: str | None = None) -> tuple[s.Spec, Origin, list[Diagnostic]]:
    """Build the Spec of a (schema-valid, pruned) native document, its origin and shape findings."""
    doc = data.get("spec") or {}
    engine = doc.get("engine") or {}
    topology = doc.get("topology") or {}
    plain, named = roles_of(engine)
    origin = Origin(source, lambda p: native_path(p, plain), file=file)
    diagnostics: list[Diagnostic] = []

    def shape(message: str, at: SpecPath, hint: str | None = None) -> None:
        diagnostics.append(Diagnostic("NATIVE-SHAPE", "error", message, origin.span(at),
                                      hint=hint))

    roles = []
    for name, role in named:
        pool = topology.get(TOPOLOGY_KEY[name])
        workers = pool.get("initial_workers", 1) if isinstance(pool, Mapping) else 1
        if not isinstance(pool, Mapping):
            shape(f"topology has no `{TOPOLOGY_KEY[name]}` pool for role `{name}`",
                  ("mode",), hint=f"add \"{TOPOLOGY_KEY[name]}\": {{\"initial_workers\": 1}}")
        worker_type = (role.get("rank") or {}).get("worker_type", "aggregated" if plain else None)
        if worker_type is not None and worker_type != name:
            shape(f"rank worker_type `{worker_type}` does not match its role `{name}`",
                  ("roles", name, "worker_type"), hint=f"set worker_type to `{name}`")
        roles.append(role_from_native(name, role, workers))
    for key in ("workers", "prefill", "decode"):
        role_name = {"workers": "aggregated"}.get(key, key)
        if key in topology and role_name not in [n for n, _ in named]:
            shape(f"topology pool `{key}` has no role `{role_name}` in `engine`", ("mode",))
    placement = (doc.get("adapters") or {}).get("placement") or {}
    knobs = {**ROUTER_DEFAULTS, **(placement.get("config") or {})}
    router = s.Router(
        policy=placement.get("provider", "round_robin"),
        kv_event_lag_ms=float(knobs["kv_event_lag_ms"]),
        host_cache_hit_weight=float(knobs["host_cache_hit_weight"]),
        overlap_score_credit=float(knobs["overlap_score_credit"]),
        prefill_load_scale=float(knobs["prefill_load_scale"]),
        temperature=float(knobs["temperature"]),
        seed=int(knobs["seed"]),
        overlap_score_credit_decay=float(knobs["overlap_score_credit_decay"]),
        decode_active_request_weight=float(knobs["decode_active_request_weight"]),
        disk_cache_hit_weight=float(knobs["disk_cache_hit_weight"]),
        queue_threshold=_f(knobs["queue_threshold"]),
        queue_policy=knobs["queue_policy"],
    )
    scaling_doc = (doc.get("adapters") or {}).get("scaling") or {}
    scaling = s.Scaling()
    if scaling_doc.get("provider", "none") != "none":
        config = scaling_doc.get("config") or {}
        scaling = s.Scaling(scaling_doc["provider"], config, canonical_json(config))
    sla_doc = doc.get("sla")
    spec = s.Spec(
        model=doc.get("model"),
        roles=tuple(roles),
        mode=topology.get("kind", "aggregated"),
        hardware=doc.get("hardware"),
        backend_version=doc.get("backend_version"),
        handoff_latency_ms=float(topology.get("handoff_latency_ms", 0.0)),
        router=router,
        scaling=scaling,
        max_sim_time_ms=_f(doc.get("max_sim_time_ms")),
        record_per_request=bool(doc.get("record_per_request", True)),
        sla=None if sla_doc is None else s.Sla(
            _f(sla_doc.get("ttft_ms")), _f(sla_doc.get("itl_ms")), _f(sla_doc.get("e2e_ms"))),
        traffic=traffic_from_native(data.get("traffic")),
    )
    return spec, origin, diagnostics

