"""The part of a canonical native document the simulation core reads, as typed values.

Hand-written native specs may omit rank fields; a missing field takes the native engine's own
default (docs/native-json.md), which is what the reference normalizer fills in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kvreplay.engine.errors import EngineConfigError

from kvreplay.native_defaults import BACKEND_BLOCK_SIZE, HOST_OFFLOAD_DEFAULTS, RANK_DEFAULTS
from kvreplay.native_defaults import ROUTER_DEFAULTS as ROUTER

ROLE_NAMES = ("aggregated", "prefill", "decode")


@dataclass(frozen=True, slots=True)
class TimingConfig:
    """`{type: fixed, prefill_ms, decode_ms}` or `{type: polynomial}`."""

    kind: str
    prefill_ms: float = 0.0
    decode_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class HostOffloadConfig:
    """`native_host_offload` (G2): one pool per DP rank, or one deployment pool (shared)."""

    scope: str
    num_host_blocks: int
    block_bytes: int
    d2h_bandwidth_gbps: float
    h2d_bandwidth_gbps: float
    shared_d2h_bandwidth_gbps: float
    shared_h2d_bandwidth_gbps: float
    latency_to_first_byte_ms: float
    kv_layout_id: str | None


@dataclass(frozen=True, slots=True)
class RankConfig:
    """One DP rank's scheduler and KV settings (every rank of a role shares them)."""

    backend: str
    worker_type: str
    block_size: int
    num_gpu_blocks: int
    max_num_seqs: int | None
    max_num_batched_tokens: int | None
    max_model_len: int | None
    enable_prefix_caching: bool
    enable_chunked_prefill: bool
    prefill_schedule_interval: int
    preemption_mode: str
    speedup_ratio: float
    decode_speedup_ratio: float
    kv_transfer_bytes_per_token: int | None
    kv_transfer_bandwidth: float | None
    kv_transfer_timing_mode: str
    timing: TimingConfig
    host: HostOffloadConfig | None = None


@dataclass(frozen=True, slots=True)
class RoleConfig:
    """A pool of identical workers: `workers` x `dp_size` schedulers."""

    name: str
    workers: int
    dp_size: int
    tensor_parallel_size: int
    pipeline_parallel_size: int
    rank: RankConfig


@dataclass(frozen=True, slots=True)
class RouterConfig:
    policy: str
    kv_event_lag_ms: float = ROUTER["kv_event_lag_ms"]
    host_cache_hit_weight: float = ROUTER["host_cache_hit_weight"]
    overlap_score_credit: float = ROUTER["overlap_score_credit"]
    prefill_load_scale: float = ROUTER["prefill_load_scale"]
    temperature: float = ROUTER["temperature"]
    seed: int = ROUTER["seed"]
    overlap_score_credit_decay: float = ROUTER["overlap_score_credit_decay"]
    decode_active_request_weight: float = ROUTER["decode_active_request_weight"]
    disk_cache_hit_weight: float = ROUTER["disk_cache_hit_weight"]
    queue_threshold: float | None = ROUTER["queue_threshold"]
    queue_policy: str = ROUTER["queue_policy"]


QUEUE_POLICIES = ("fcfs", "lcfs", "wspt")


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Topology, roles in pool order (aggregated, or prefill then decode), router, time cap."""

    mode: str
    roles: tuple[RoleConfig, ...]
    router: RouterConfig
    handoff_latency_ms: float
    max_sim_time_ms: float | None


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise EngineConfigError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _int(value: Any, where: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise EngineConfigError(f"{where}: expected an integer >= {minimum}, got {value!r}")
    return value


def _opt_int(value: Any, where: str, minimum: int = 1) -> int | None:
    return None if value is None else _int(value, where, minimum)


def _float(value: Any, where: str, minimum: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= minimum:
        raise EngineConfigError(f"{where}: expected a number >= {minimum}, got {value!r}")
    return float(value)


def _timing(raw: Any, where: str) -> TimingConfig:
    data = _mapping(raw, where)
    kind = data.get("type")
    if kind == "polynomial":
        return TimingConfig("polynomial")
    if kind == "fixed":
        return TimingConfig("fixed", _float(data.get("prefill_ms"), f"{where}.prefill_ms"),
                            _float(data.get("decode_ms"), f"{where}.decode_ms"))
    raise EngineConfigError(f"{where}.type: expected 'fixed' or 'polynomial', got {kind!r}")


def _host(raw: Any, block_size: int, bytes_per_token: Any, caching: bool, backend: str,
          where: str) -> HostOffloadConfig | None:
    if raw is None:
        return None
    data = {**HOST_OFFLOAD_DEFAULTS, **_mapping(raw, where)}
    if backend != "vllm":
        raise EngineConfigError(f"{where}: native_host_offload is supported only for backend=vllm")
    if not caching:
        raise EngineConfigError(f"{where}: native_host_offload requires enable_prefix_caching=true")
    if isinstance(bytes_per_token, bool) or not isinstance(bytes_per_token, int) \
            or bytes_per_token <= 0:
        raise EngineConfigError(f"{where}: native_host_offload requires kv_cache_bytes_per_token "
                                "to derive the physical host block size")
    scope = data["scope"]
    if scope not in ("dp_rank_local", "cluster_shared"):
        raise EngineConfigError(f"{where}.scope: unknown host_offload.scope {scope!r}; expected "
                                "'dp_rank_local' or 'cluster_shared'")
    layout = data["kv_layout_id"]
    if layout is not None and not isinstance(layout, str):
        raise EngineConfigError(f"{where}.kv_layout_id: expected a string, got {layout!r}")
    if scope == "cluster_shared" and not layout:
        raise EngineConfigError(f"{where}: cluster_shared native_host_offload requires a "
                                "nonempty kv_layout_id")
    return HostOffloadConfig(
        scope=scope,
        num_host_blocks=_int(data.get("num_host_blocks"), f"{where}.num_host_blocks"),
        block_bytes=block_size * bytes_per_token,
        d2h_bandwidth_gbps=_finite(data["d2h_bandwidth_gbps"], f"{where}.d2h_bandwidth_gbps"),
        h2d_bandwidth_gbps=_finite(data["h2d_bandwidth_gbps"], f"{where}.h2d_bandwidth_gbps"),
        shared_d2h_bandwidth_gbps=_finite(data["shared_d2h_bandwidth_gbps"],
                                          f"{where}.shared_d2h_bandwidth_gbps"),
        shared_h2d_bandwidth_gbps=_finite(data["shared_h2d_bandwidth_gbps"],
                                          f"{where}.shared_h2d_bandwidth_gbps"),
        latency_to_first_byte_ms=_finite(data["latency_to_first_byte_ms"],
                                         f"{where}.latency_to_first_byte_ms"),
        kv_layout_id=layout,
    )


def _weight(value: Any, where: str) -> float:
    out = _float(value, where)
    if out > 1.0:
        raise EngineConfigError(f"{where}: expected a weight between 0 and 1, got {value!r}")
    return out


def _finite(value: Any, where: str) -> float:
    out = _float(value, where)
    if not math.isfinite(out):
        raise EngineConfigError(f"{where}: expected a finite number >= 0, got {value!r}")
    return out


def parse_rank(raw: Any, role_name: str, where: str) -> RankConfig:
    data = {**RANK_DEFAULTS, **_mapping(raw, where)}
    backend = data.get("backend", "vllm")
    if backend not in BACKEND_BLOCK_SIZE:
        raise EngineConfigError(f"{where}.backend: unknown backend {backend!r}")
    worker_type = data.get("worker_type", role_name)
    if worker_type != role_name:
        raise EngineConfigError(
            f"{where}.worker_type: {worker_type!r} does not match its role {role_name!r}")
    mode = data["kv_transfer_timing_mode"]
    if mode not in ("full_prompt", "destination_missing"):
        raise EngineConfigError(f"{where}.kv_transfer_timing_mode: unknown mode {mode!r}")
    preemption = data["preemption_mode"]
    if preemption not in ("lifo", "fifo"):
        raise EngineConfigError(f"{where}.preemption_mode: unknown mode {preemption!r}")
    bandwidth = data["kv_transfer_bandwidth"]
    block_size = _int(data.get("block_size", BACKEND_BLOCK_SIZE[backend]), f"{where}.block_size")
    return RankConfig(
        backend=backend,
        worker_type=worker_type,
        block_size=block_size,
        num_gpu_blocks=_int(data["num_gpu_blocks"], f"{where}.num_gpu_blocks"),
        max_num_seqs=_opt_int(data["max_num_seqs"], f"{where}.max_num_seqs"),
        max_num_batched_tokens=_opt_int(data["max_num_batched_tokens"],
                                        f"{where}.max_num_batched_tokens"),
        max_model_len=_opt_int(data["max_model_len"], f"{where}.max_model_len"),
        enable_prefix_caching=bool(data["enable_prefix_caching"]),
        enable_chunked_prefill=bool(data["enable_chunked_prefill"]),
        prefill_schedule_interval=_int(data["prefill_schedule_interval"],
                                       f"{where}.prefill_schedule_interval"),
        preemption_mode=preemption,
        speedup_ratio=_float(data["speedup_ratio"], f"{where}.speedup_ratio"),
        decode_speedup_ratio=_float(data["decode_speedup_ratio"],
                                    f"{where}.decode_speedup_ratio"),
        kv_transfer_bytes_per_token=_opt_int(data["kv_transfer_bytes_per_token"],
                                             f"{where}.kv_transfer_bytes_per_token", 0),
        kv_transfer_bandwidth=None if bandwidth is None else _float(
            bandwidth, f"{where}.kv_transfer_bandwidth"),
        kv_transfer_timing_mode=mode,
        timing=_timing(data["timing_model"], f"{where}.timing_model"),
        host=_host(data.get("native_host_offload"), block_size,
                   data.get("kv_cache_bytes_per_token"), bool(data["enable_prefix_caching"]),
                   backend, f"{where}.native_host_offload"),
    )


def _role(name: str, raw_role: Any, raw_topology: Any, where: str) -> RoleConfig:
    role = _mapping(raw_role, where)
    pool = _mapping(raw_topology, f"spec.topology.{'workers' if name == 'aggregated' else name}")
    return RoleConfig(
        name=name,
        workers=_int(pool.get("initial_workers"), "initial_workers"),
        dp_size=_int(role.get("dp_size", 1), f"{where}.dp_size"),
        tensor_parallel_size=_int(role.get("tensor_parallel_size", 1),
                                  f"{where}.tensor_parallel_size"),
        pipeline_parallel_size=_int(role.get("pipeline_parallel_size", 1),
                                    f"{where}.pipeline_parallel_size"),
        rank=parse_rank(role.get("rank", {}), name, f"{where}.rank"),
    )


def parse_engine_config(document: Mapping[str, Any]) -> EngineConfig:
    """Read topology, roles, placement and the time cap; raise EngineConfigError on bad shapes."""
    spec = _mapping(_mapping(document, "document").get("spec"), "spec")
    topology = _mapping(spec.get("topology"), "spec.topology")
    engine = _mapping(spec.get("engine"), "spec.engine")
    mode = topology.get("kind")
    if mode == "aggregated":
        roles = [_role("aggregated", engine, topology.get("workers"), "spec.engine")]
        handoff = 0.0
    elif mode == "disaggregated":
        roles = [_role(name, engine.get(name), topology.get(name), f"spec.engine.{name}")
                 for name in ("prefill", "decode")]
        handoff = _float(topology.get("handoff_latency_ms", 0.0),
                         "spec.topology.handoff_latency_ms")
    else:
        raise EngineConfigError(f"spec.topology.kind: unknown topology {mode!r}")
    adapters = _mapping(spec.get("adapters", {}), "spec.adapters")
    placement = _mapping(adapters.get("placement", {"provider": "round_robin"}),
                         "spec.adapters.placement")
    policy = placement.get("provider", "round_robin")
    if policy not in ("round_robin", "kv_router"):
        raise EngineConfigError(f"spec.adapters.placement.provider: unknown policy {policy!r}")
    knobs = {**ROUTER, **_mapping(placement.get("config") or {},
                                   "spec.adapters.placement.config")}
    seed = knobs["seed"]
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise EngineConfigError(f"spec.adapters.placement.config.seed: expected an integer, "
                                f"got {seed!r}")
    threshold = knobs["queue_threshold"]
    queue_policy = knobs["queue_policy"]
    if queue_policy not in QUEUE_POLICIES:
        raise EngineConfigError(f"spec.adapters.placement.config.queue_policy: unknown policy "
                                f"{queue_policy!r}; expected one of {', '.join(QUEUE_POLICIES)}")
    router = RouterConfig(
        policy=policy,
        kv_event_lag_ms=_float(knobs["kv_event_lag_ms"], "kv_event_lag_ms"),
        host_cache_hit_weight=_weight(knobs["host_cache_hit_weight"],
                                      "host_cache_hit_weight"),
        overlap_score_credit=_float(knobs["overlap_score_credit"],
                                    "overlap_score_credit"),
        prefill_load_scale=_float(knobs["prefill_load_scale"], "prefill_load_scale"),
        temperature=_float(knobs["temperature"], "temperature"),
        seed=seed,
        overlap_score_credit_decay=_finite(knobs["overlap_score_credit_decay"],
                                           "overlap_score_credit_decay"),
        decode_active_request_weight=_finite(knobs["decode_active_request_weight"],
                                             "decode_active_request_weight"),
        disk_cache_hit_weight=_weight(knobs["disk_cache_hit_weight"],
                                      "disk_cache_hit_weight"),
        queue_threshold=None if threshold is None else _finite(threshold, "queue_threshold"),
        queue_policy=queue_policy,
    )
    cap = spec.get("max_sim_time_ms")
    return EngineConfig(mode, tuple(roles), router, handoff,
                        None if cap is None else _float(cap, "spec.max_sim_time_ms"))
