"""The normalized Spec: one model that YAML, the Python API and native JSON all lower into.

Its shape follows the canonical native JSON (docs/native-json.md) with friendlier names where the
native ones are awkward (`host_offload` for `native_host_offload`, rank fields flattened into the
role). Rules read it; the emitter writes it; the engine never sees it (it reads native JSON).
A field is None where the source left it unknown (auto estimates, or a document with errors).
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from kvreplay.native_defaults import G3_OFFLOAD_DEFAULTS as G3
from kvreplay.native_defaults import HOST_OFFLOAD_DEFAULTS as G2
from kvreplay.native_defaults import RANK_DEFAULTS as RANK
from kvreplay.native_defaults import ROUTER_DEFAULTS as ROUTER
from kvreplay.native_defaults import block_size_default
from kvreplay.sla import Sla as Sla  # the one Sla class (re-exported)

ROLE_ORDER = ("aggregated", "prefill", "decode")
AGENTIC_FORMATS = ("weka", "agentic_mooncake")


@attrs.frozen
class HostOffload:
    scope: str = G2["scope"]
    num_host_blocks: int | None = None
    d2h_bandwidth_gbps: float = G2["d2h_bandwidth_gbps"]
    h2d_bandwidth_gbps: float = G2["h2d_bandwidth_gbps"]
    shared_d2h_bandwidth_gbps: float = G2["shared_d2h_bandwidth_gbps"]
    shared_h2d_bandwidth_gbps: float = G2["shared_h2d_bandwidth_gbps"]
    latency_to_first_byte_ms: float = G2["latency_to_first_byte_ms"]
    kv_layout_id: str | None = G2["kv_layout_id"]


@attrs.frozen
class G3Offload:
    scope: str | None = None
    num_g3_blocks: int | None = None
    latency_to_first_byte_ms: float = G3["latency_to_first_byte_ms"]
    read_bandwidth_gbps: float = G3["read_bandwidth_gbps"]
    write_bandwidth_gbps: float = G3["write_bandwidth_gbps"]
    shared_read_bandwidth_gbps: float = G3["shared_read_bandwidth_gbps"]
    shared_write_bandwidth_gbps: float = G3["shared_write_bandwidth_gbps"]


@attrs.frozen
class Timing:
    type: str = "polynomial"
    prefill_ms: float | None = None
    decode_ms: float | None = None


@attrs.frozen
class Speculation:
    kind: str | None = None
    num_speculative_tokens: int | None = None
    acceptance_rates: tuple[float, ...] = ()
    seed: int = 42


@attrs.frozen
class SglangOptions:
    """The native rank's `sglang` block (read by sglang ranks only)."""

    schedule_policy: str = "fifo"
    max_prefill_tokens: int = 16384
    chunked_prefill_size: int = 8192
    clip_max_new_tokens: int = 4096
    schedule_conservativeness: float = 1.0


@attrs.frozen
class TrtllmOptions:
    """The native rank's `trtllm` block (read by trtllm ranks only)."""

    capacity_scheduler_policy: str = "guaranteed_no_evict"


@attrs.frozen
class Role:
    """One worker role: how many workers, their parallelism and the native rank settings."""

    name: str
    workers: int = 1
    dp_size: int = 1
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    prefill_context_parallel_size: int | None = None
    decode_context_parallel_size: int | None = None
    num_gpu_blocks_is_explicit: bool = False
    startup_seconds: float = 0.0
    speculation: Speculation | None = None
    # Rank fields (native names), defaulting as the native engine does (native_defaults).
    backend: str = RANK["backend"]
    block_size: int = block_size_default(RANK["backend"])
    num_gpu_blocks: int = RANK["num_gpu_blocks"]
    max_num_seqs: int = RANK["max_num_seqs"]
    max_num_batched_tokens: int = RANK["max_num_batched_tokens"]
    max_model_len: int | None = RANK["max_model_len"]
    enable_prefix_caching: bool = RANK["enable_prefix_caching"]
    enable_chunked_prefill: bool = RANK["enable_chunked_prefill"]
    prefill_schedule_interval: int = RANK["prefill_schedule_interval"]
    prefill_decode_interval: int = RANK["prefill_decode_interval"]
    preemption_mode: str = RANK["preemption_mode"]
    speedup_ratio: float = RANK["speedup_ratio"]
    decode_speedup_ratio: float = RANK["decode_speedup_ratio"]
    kv_cache_bytes_per_token: int | None = RANK["kv_cache_bytes_per_token"]
    kv_transfer_bytes_per_token: int | None = RANK["kv_transfer_bytes_per_token"]
    kv_transfer_bandwidth: float | None = RANK["kv_transfer_bandwidth"]
    kv_transfer_timing_mode: str = RANK["kv_transfer_timing_mode"]
    timing_model: Timing = Timing()
    host_offload: HostOffload | None = None
    g3_offload: G3Offload | None = None
    sglang: SglangOptions | None = None
    trtllm: TrtllmOptions | None = None


@attrs.frozen
class Router:
    policy: str = "round_robin"
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


ROUTER_KNOB_DEFAULTS: dict[str, float | int | str | None] = {
    f.name: f.default for f in attrs.fields(Router) if f.name != "policy"
}


@attrs.frozen
class Scaling:
    policy: str = "none"
    config: Any = attrs.field(default=None, eq=False, hash=False)
    config_json: str | None = None  # canonical text of config, for equality and hashing


@attrs.frozen
class AgenticProfile:
    duration_seconds: float = 3600.0
    response_grace_seconds: float = 30.0
    cancel_drain_seconds: float = 10.0
    tree_idle_cap_seconds: float = 300.0
    global_idle_cap_seconds: float = 10.0


@attrs.frozen
class Traffic:
    source_type: str = "synthetic"
    trace_format: str | None = None
    trace_paths: tuple[str, ...] = ()
    trace_block_size: int | None = None
    weka_nested_timestamp_basis: str | None = None
    input_tokens: int | None = 1024
    output_tokens: int | None = 128
    cached_prefix_tokens: int | None = 0
    turns_per_session: int | None = None
    shared_prefix_ratio: float | None = None
    num_prefix_groups: int | None = None
    inter_turn_delay_ms: float | None = None
    load_type: str = "concurrency"
    concurrency: int | None = 10
    request_rate: float | None = None
    arrival_seed: int | None = None
    speedup: float | None = None
    agentic_lanes: int | None = None
    agentic_snapshot_seed: int | None = None
    agentic_warmup: bool = False
    agentic_profile: AgenticProfile | None = None
    stop_requests: int | None = 100
    stop_sessions: int | None = None

    @property
    def agentic(self) -> bool:
        """An agentic trace, or any agentic load key set (support-matrix.md)."""
        return (
            self.trace_format in AGENTIC_FORMATS
            or self.agentic_lanes is not None
            or self.agentic_snapshot_seed is not None
            or self.agentic_warmup
            or self.agentic_profile is not None
        )


@attrs.frozen
class Spec:
    """A whole deployment and its traffic, normalized."""

    model: str | None
    roles: tuple[Role, ...]
    mode: Literal["aggregated", "disaggregated"] | str = "aggregated"
    hardware: str | None = None
    backend_version: str | None = None
    handoff_latency_ms: float = 0.0
    router: Router = Router()
    scaling: Scaling = Scaling()
    max_sim_time_ms: float | None = None
    record_per_request: bool = True
    sla: Sla | None = None
    traffic: Traffic = Traffic()
    version: int = 1

    def role(self, name: str) -> Role | None:
        return next((r for r in self.roles if r.name == name), None)
