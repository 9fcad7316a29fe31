"""The user configuration as frozen attrs classes (config.md), one class per YAML mapping.

Fields that config.md marks required are Optional here only so that a document with errors can
still be modelled and checked by the rules; `compile` refuses such documents before emitting.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from kvreplay.native_defaults import G3_OFFLOAD_DEFAULTS as G3
from kvreplay.native_defaults import HOST_OFFLOAD_DEFAULTS as G2
from kvreplay.native_defaults import ROUTER_DEFAULTS as ROUTER
from kvreplay.sla import Sla as Sla  # the one Sla class (re-exported)

Auto = Literal["auto"]
Backend = Literal["vllm", "sglang", "trtllm"]

# Field metadata: the documented default of a key whose model default stays None, because a rule
# must tell "not given" from the default (TRAFFIC-WEKA-BASIS reports the key on non-weka traces).
# Lowering applies it where the key applies; the schema's `default` is this value.
APPLIED_DEFAULT = "kvreplay.applied_default"


def applied_default(cls: type, name: str) -> Any:
    """The documented default of `cls.name`: its APPLIED_DEFAULT metadata, else its default."""
    field = getattr(attrs.fields(cls), name)
    return field.metadata.get(APPLIED_DEFAULT, field.default)


@attrs.frozen
class Parallelism:
    replicas: int = 1
    tensor: int = 1
    pipeline: int = 1
    attention_data: int = 1
    moe_tensor: int = 1
    moe_expert: int = 1
    prefill_context: int | None = None
    decode_context: int | None = None


@attrs.frozen
class SglangScheduler:
    schedule_policy: Literal["fifo", "lpm"] = "fifo"
    max_prefill_tokens: int = 16384
    chunked_prefill_size: int = 8192
    clip_max_new_tokens: int = 4096
    schedule_conservativeness: float = 1.0
    prefill_decode_interval: int = 0


@attrs.frozen
class TrtllmScheduler:
    capacity_scheduler_policy: Literal["guaranteed_no_evict"] = "guaranteed_no_evict"


@attrs.frozen
class Scheduler:
    max_batched_tokens: int = 8192
    max_sequences: int | None = None  # role default: prefill 1, otherwise 256
    prefill_schedule_interval: int = 1
    chunked_prefill: bool = True
    preemption_mode: Literal["lifo", "fifo"] = "lifo"
    sglang: SglangScheduler | None = None
    trtllm: TrtllmScheduler | None = None


@attrs.frozen
class Capacity:
    type: Literal["default", "fixed"] = "default"
    blocks: int | None = None
    bytes: int | None = None


@attrs.frozen
class HostOffload:
    num_host_blocks: int | None = None
    scope: Literal["dp_rank_local", "cluster_shared", "worker_local"] = G2["scope"]
    d2h_bandwidth_gbps: float = G2["d2h_bandwidth_gbps"]
    h2d_bandwidth_gbps: float = G2["h2d_bandwidth_gbps"]
    shared_d2h_bandwidth_gbps: float = G2["shared_d2h_bandwidth_gbps"]
    shared_h2d_bandwidth_gbps: float = G2["shared_h2d_bandwidth_gbps"]
    latency_to_first_byte_ms: float = G2["latency_to_first_byte_ms"]


@attrs.frozen
class G3Offload:
    scope: Literal["worker_local", "cluster_shared"] | None = None
    num_g3_blocks: int | None = None
    latency_to_first_byte_ms: float = G3["latency_to_first_byte_ms"]
    read_bandwidth_gbps: float = G3["read_bandwidth_gbps"]
    write_bandwidth_gbps: float = G3["write_bandwidth_gbps"]
    shared_read_bandwidth_gbps: float = G3["shared_read_bandwidth_gbps"]
    shared_write_bandwidth_gbps: float = G3["shared_write_bandwidth_gbps"]


@attrs.frozen
class KvCache:
    block_size: int | None = None  # backend default
    prefix_caching: bool = True
    bytes_per_token: int | Auto = "auto"
    capacity: Capacity = Capacity()
    host_offload: HostOffload | None = None
    g3_offload: G3Offload | None = None


@attrs.frozen
class Timing:
    type: Literal["polynomial", "fixed"] = "polynomial"
    prefill_ms: float | None = None
    decode_ms: float | None = None
    speedup_ratio: float = 1.0
    decode_speedup_ratio: float = 1.0


@attrs.frozen
class Speculation:
    kind: Literal["ngram", "mtp"] | None = None
    num_speculative_tokens: int | None = None
    acceptance_rates: tuple[float, ...] = ()
    seed: int = 42


@attrs.frozen
class Worker:
    parallelism: Parallelism = Parallelism()
    scheduler: Scheduler = Scheduler()
    kv_cache: KvCache = KvCache()
    timing: Timing = Timing()
    speculation: Speculation | None = None
    startup_seconds: float = 0.0


@attrs.frozen
class Workers:
    aggregated: Worker | None = None
    prefill: Worker | None = None
    decode: Worker | None = None

    def present(self) -> list[tuple[str, Worker]]:
        """The roles given, in canonical order (aggregated, prefill, decode)."""
        return [(n, w) for n, w in (("aggregated", self.aggregated), ("prefill", self.prefill),
                                    ("decode", self.decode)) if w is not None]


@attrs.frozen
class KvTransfer:
    bytes_per_token: int | Auto = "auto"
    bandwidth_gb_per_second: float | None = None
    timing_mode: Literal["destination_missing", "full_prompt"] = "destination_missing"
    handoff_latency_ms: float = 0.0


@attrs.frozen
class Engine:
    model: str | None = None
    workers: Workers = Workers()
    mode: Literal["aggregated", "disaggregated"] = "aggregated"
    hardware: str | None = None
    backend: Backend = "vllm"
    backend_version: str | None = None
    context_length: int | Literal["max"] = "max"
    kv_transfer: KvTransfer | None = None


@attrs.frozen
class Session:
    turns: int = 4
    shared_prefix_ratio: float = 0.0
    prefix_groups: int = 0
    inter_turn_delay_ms: float = 0.0


@attrs.frozen
class Source:
    type: Literal["trace", "synthetic", "synthetic-session"] = "synthetic"
    format: Literal["mooncake", "mooncake-delta", "weka", "agentic_mooncake"] = "mooncake"
    paths: tuple[str, ...] = ()
    block_size: int | None = None
    nested_timestamp_basis: Literal["auto", "absolute", "relative"] | None = attrs.field(
        default=None, metadata={APPLIED_DEFAULT: "auto"})  # weka only
    input_tokens: int = 1024
    output_tokens: int = 128
    cached_prefix_tokens: int = 0
    shared_prefix_ratio: float = 0.0
    prefix_groups: int = 0
    new_input_tokens_per_turn: int = 1024
    output_tokens_per_turn: int = 128
    session: Session = Session()


@attrs.frozen
class AgenticSnapshot:
    seed: int | None = None


@attrs.frozen
class AgenticProfile:
    duration_seconds: float = 3600.0
    response_grace_seconds: float = 30.0
    cancel_drain_seconds: float = 10.0
    tree_idle_cap_seconds: float = 300.0
    global_idle_cap_seconds: float = 10.0


@attrs.frozen
class Load:
    type: Literal["trace_timestamps", "concurrency", "poisson", "constant_rate"] | None = None
    concurrency: int = 10  # closed loop only (load type concurrency)
    requests_per_second: float | None = None
    sessions_per_second: float | None = None
    seed: int = 42
    speedup: float = 1.0
    agentic_lanes: int | None = None
    agentic_snapshot: AgenticSnapshot | None = None
    agentic_warmup: bool = False
    agentic_profile: AgenticProfile | None = None


@attrs.frozen
class Stop:
    requests: int | None = None
    sessions: int | None = None
    max_virtual_time_seconds: float | None = None


@attrs.frozen
class Traffic:
    source: Source = Source()
    load: Load = Load()
    stop: Stop = Stop()


# Without `traffic`: synthetic 1024 in / 128 out (Source defaults), concurrency 10, 100 requests.
DEFAULT_TRAFFIC = Traffic(load=Load(type="concurrency"), stop=Stop(requests=100))


@attrs.frozen
class Router:
    policy: Literal["round_robin", "kv_router"] = "round_robin"
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
    queue_policy: Literal["fcfs", "lcfs", "wspt"] = ROUTER["queue_policy"]


@attrs.frozen
class Scaling:
    policy: Literal["planner"] = "planner"
    config: dict[str, Any] | None = attrs.field(default=None, hash=False)


@attrs.frozen
class Evaluation:
    sla: Sla | None = None


@attrs.frozen
class Config:
    """A whole user configuration (one YAML document)."""

    engine: Engine
    traffic: Traffic | None = None
    router: Router = Router()
    scaling: Scaling | None = None
    evaluation: Evaluation | None = None
