"""The canonical native document (docs/native-json.md) as frozen attrs classes: its one model.

Every native key is one field here, with its native default (schema/native_defaults.py) and its
schema facts (schema/schema_facts.py): compiler/schema_gen.py generates
schema/native.schema.json from these classes, the compiler and the engine read native JSON into
them through the strict converter (schema/convert.py), and the normalized Spec (schema/spec.py)
is built from them. The config model reuses the blocks whose YAML form is the same (G3, the
sglang/trtllm options, the agentic profile, the router).

A field is None where the document may leave it out and no fixed default applies (the block size
depends on the backend); a required key stays Optional so that a document with errors can still
be read by the compiler, which reports them.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from kvreplay.schema.hybrid import GROUP_BYTES_MAX, KvCacheGroup, StateCache, kv_cache_groups_field
from kvreplay.schema.native_defaults import G3_OFFLOAD_DEFAULTS as G3
from kvreplay.schema.native_defaults import HOST_OFFLOAD_DEFAULTS as G2
from kvreplay.schema.native_defaults import RANK_DEFAULTS as RANK
from kvreplay.schema.native_defaults import ROUTER_DEFAULTS as ROUTER
from kvreplay.schema.native_defaults import SGLANG_DEFAULTS as SGLANG
from kvreplay.schema.native_defaults import TRTLLM_DEFAULTS as TRTLLM
from kvreplay.schema.schema_facts import (
    APPLIED_DEFAULT,
    MAX_NUM,
    bounded,
    choice,
    constant,
    described,
    flag,
    items,
    mapping,
    nested,
    nonneg,
    only_keys,
    pattern,
    positive,
    requires,
    switch,
    text,
)
from kvreplay.schema.sla import Sla
from kvreplay.schema.telemetry import Telemetry

Backend = Literal["vllm", "sglang", "trtllm"]
RoleName = Literal["aggregated", "prefill", "decode"]
RouterPolicy = Literal["round_robin", "kv_router"]

BANDWIDTH = "decimal GB/s (1 GB/s = 1e6 bytes per ms); 0 = unlimited"
ROLE_MAX = 65536
TOKENS_MAX = 10_000_000
SEED_MAX = 2**64 - 1
BLOCK_SIZE_MAX = 1_048_576
BYTES_PER_TOKEN_MAX = 2**40
CONTEXT_MAX = 2**31 - 1
TRACE_PATHS = "Trace files, relative to the config file's folder."
SGLANG_OPTIONS = ("SGLang scheduler options (backend sglang; the bundled engine runs SGLang's "
                  "own scheduler with them).")


# --- the rank's blocks -------------------------------------------------------------------------

@described("G2: the host-pinned KV tier of this role.", required=["num_host_blocks"])
@attrs.frozen
class HostOffloadOptions:
    """G2 as the YAML config writes it (the layout identity is derived, never given)."""

    scope: Literal["dp_rank_local", "cluster_shared", "worker_local"] = choice(
        G2["scope"], "`dp_rank_local`: one pool per attention-DP rank; `cluster_shared`: one pool "
        "for the whole deployment (all cluster_shared roles join it). (`worker_local` is a G3 "
        "scope, rejected by rule G2-SCOPE.)")
    num_host_blocks: int | None = positive(
        None, "Host blocks: per DP rank (dp_rank_local) or the pool total (cluster_shared; NOT "
        "per participant).")
    d2h_bandwidth_gbps: float = nonneg(
        G2["d2h_bandwidth_gbps"], f"Per-rank GPU->host link, {BANDWIDTH}.")
    h2d_bandwidth_gbps: float = nonneg(
        G2["h2d_bandwidth_gbps"], f"Per-rank host->GPU link, {BANDWIDTH}.")
    shared_d2h_bandwidth_gbps: float = nonneg(
        G2["shared_d2h_bandwidth_gbps"], f"Whole-pool D2H cap, {BANDWIDTH}; cluster_shared only.")
    shared_h2d_bandwidth_gbps: float = nonneg(
        G2["shared_h2d_bandwidth_gbps"], f"Whole-pool H2D cap, {BANDWIDTH}; cluster_shared only.")
    latency_to_first_byte_ms: float = nonneg(
        G2["latency_to_first_byte_ms"], "Delays each transfer without consuming bandwidth (ms).")


@described("G2 in the native engine's canonical form (defaults of scope, shared_* and latency "
           "omitted).", required=["num_host_blocks"])
@attrs.frozen
class HostOffload(HostOffloadOptions):
    kv_layout_id: str | None = text(
        G2["kv_layout_id"], "KV layout identity; required non-blank for cluster_shared.", 4096,
        nullable=True)


@described("G3: the disk/remote KV tier of this role (requires host_offload).",
           required=["scope", "num_g3_blocks"])
@attrs.frozen
class G3Offload:
    scope: Literal["worker_local", "cluster_shared"] | None = choice(None, "G3 pool scope.")
    num_g3_blocks: int | None = positive(
        None, "G3 blocks: per worker (worker_local) or the pool total.")
    latency_to_first_byte_ms: float = nonneg(
        G3["latency_to_first_byte_ms"], "Per-transfer latency (ms).")
    read_bandwidth_gbps: float = nonneg(
        G3["read_bandwidth_gbps"], f"Per-worker read bandwidth, {BANDWIDTH}.")
    write_bandwidth_gbps: float = nonneg(
        G3["write_bandwidth_gbps"], f"Per-worker write bandwidth, {BANDWIDTH}.")
    shared_read_bandwidth_gbps: float = nonneg(
        G3["shared_read_bandwidth_gbps"], f"Whole-pool read cap, {BANDWIDTH}; cluster_shared only.")
    shared_write_bandwidth_gbps: float = nonneg(
        G3["shared_write_bandwidth_gbps"],
        f"Whole-pool write cap, {BANDWIDTH}; cluster_shared only.")


@described(
    "Per-pass timing model.", required=["type"],
    overlays=[only_keys("type", "polynomial", []),
              requires("type", "fixed", ["prefill_ms", "decode_ms"])],
)
@attrs.frozen
class Timing:
    type: Literal["polynomial", "fixed"] = choice("polynomial", "Timing model.")
    prefill_ms: float | None = nonneg(None, "Fixed prefill cost (ms).")
    decode_ms: float | None = nonneg(None, "Fixed decode cost (ms).")


@described("Speculative decoding on this role.",
           required=["kind", "num_speculative_tokens", "acceptance_rates"])
@attrs.frozen
class Speculation:
    """A role's speculation (YAML, the Spec; native JSON writes MTP on the rank as `aic_*`)."""

    kind: Literal["ngram", "mtp"] | None = choice(None, "Draft method.")
    num_speculative_tokens: int | None = bounded(None, "Draft tokens per step (1..5).", 1, 5)
    acceptance_rates: tuple[float, ...] = items(
        (), "Conditional acceptance probability per draft position.", 1, 5, minimum=0, maximum=1)
    seed: int = nonneg(42, "Sampling seed.", SEED_MAX)


@described(SGLANG_OPTIONS)
@attrs.frozen
class SglangOptions:
    """The rank's `sglang` block (read by sglang ranks only)."""

    schedule_policy: Literal["fifo", "lpm"] = choice(
        SGLANG["schedule_policy"], "Waiting-queue order: `fifo` or `lpm` (longest prefix match).")
    max_prefill_tokens: int = positive(SGLANG["max_prefill_tokens"], "Prefill tokens per pass.")
    chunked_prefill_size: int = positive(
        SGLANG["chunked_prefill_size"], "Chunk size of a long prompt.")
    clip_max_new_tokens: int = positive(
        SGLANG["clip_max_new_tokens"], "Output tokens assumed when reserving KV.")
    schedule_conservativeness: float = nonneg(
        SGLANG["schedule_conservativeness"], "Scale of the KV reservation for running requests.")


@described("TensorRT-LLM scheduler options (backend trtllm).")
@attrs.frozen
class TrtllmOptions:
    """The rank's `trtllm` block (read by trtllm ranks only)."""

    capacity_scheduler_policy: Literal["guaranteed_no_evict"] = choice(
        TRTLLM["capacity_scheduler_policy"], "Capacity scheduler.")


# --- rank and role -----------------------------------------------------------------------------
# RankCore and RoleCore are the field groups a native rank and role are made of; the Spec's role
# (schema/spec.py) is both at once, so they are plain (not slotted) classes it can inherit.

@attrs.frozen(slots=False)
class RankCore:
    backend: Backend = choice(RANK["backend"], "Backend.")
    worker_type: RoleName | None = choice(  # the role's own name when left out
        None, "Role of the rank.", metadata={APPLIED_DEFAULT: "aggregated"})
    block_size: int | None = positive(  # backend default (native_defaults.block_size_default)
        None, "Tokens per KV block.", BLOCK_SIZE_MAX)
    num_gpu_blocks: int = positive(RANK["num_gpu_blocks"], "GPU KV blocks per rank.")
    max_num_seqs: int = positive(RANK["max_num_seqs"], "Running-sequence cap.")
    max_num_batched_tokens: int = positive(
        RANK["max_num_batched_tokens"], "Per-pass token budget.")
    max_model_len: int | None = positive(
        RANK["max_model_len"], "Longest prompt + output.", CONTEXT_MAX, nullable=True)
    enable_prefix_caching: bool = flag(RANK["enable_prefix_caching"], "G1 prefix caching.")
    enable_chunked_prefill: bool = flag(RANK["enable_chunked_prefill"], "Chunked prefill.")
    prefill_schedule_interval: int = positive(
        RANK["prefill_schedule_interval"], "vLLM prefill cadence with DP > 1.")
    prefill_decode_interval: int = nonneg(
        RANK["prefill_decode_interval"],
        "SGLang: decode passes between prefill passes (sglang only).", 2**32 - 1)
    sglang: SglangOptions | None = None
    trtllm: TrtllmOptions | None = None
    preemption_mode: Literal["lifo", "fifo"] = choice(
        RANK["preemption_mode"], "Preemption victim order.")
    speedup_ratio: float = nonneg(
        RANK["speedup_ratio"], "Durations are divided by it (0 = unscaled).")
    decode_speedup_ratio: float = nonneg(
        RANK["decode_speedup_ratio"], "Decode durations are divided by it.")
    kv_cache_bytes_per_token: int | None = positive(
        RANK["kv_cache_bytes_per_token"], "KV bytes per token of one TP shard.",
        BYTES_PER_TOKEN_MAX, nullable=True)
    kv_transfer_bytes_per_token: int | None = positive(
        RANK["kv_transfer_bytes_per_token"], "Handoff bytes per token.", BYTES_PER_TOKEN_MAX,
        nullable=True)
    kv_transfer_bandwidth: float | None = nonneg(
        RANK["kv_transfer_bandwidth"], "Handoff bandwidth (GB/s).", nullable=True)
    kv_transfer_timing_mode: Literal["destination_missing", "full_prompt"] = choice(
        RANK["kv_transfer_timing_mode"], "Charged handoff tokens.")
    timing_model: Timing = Timing()
    host_offload: HostOffload | None = nested(key="native_host_offload")
    g3_offload: G3Offload | None = None
    state_cache: StateCache | None = None
    prefix_match_unit: int | None = positive(
        None, "Tokens per prefix-match unit (a divisor of block_size; needs state_cache).",
        BLOCK_SIZE_MAX, nullable=True)
    kv_cache_groups: tuple[KvCacheGroup, ...] | None = kv_cache_groups_field()
    kv_cache_capacity_bytes: int | None = positive(
        None, "Bytes of KV capacity the kv_cache_groups share on one rank.", GROUP_BYTES_MAX,
        nullable=True)


@described("Native per-rank engine arguments (missing fields take the native engine's defaults).")
@attrs.frozen(slots=False)
class Rank(RankCore):
    aic_nextn: int | None = bounded(None, "MTP draft tokens.", 1, 5)
    aic_nextn_accept_rates: str | None = pattern(
        None, "Comma-separated MTP acceptance rates.", r"^\s*[0-9.eE+-]+(\s*,\s*[0-9.eE+-]+)*\s*$")
    aic_mtp_seed: int = nonneg(42, "MTP seed.", SEED_MAX)


@attrs.frozen(slots=False)
class RoleCore:
    dp_size: int = positive(1, "Attention-DP ranks per worker.", ROLE_MAX)
    tensor_parallel_size: int = positive(1, "TP.", ROLE_MAX)
    num_gpu_blocks_is_explicit: bool | None = flag(  # left out: whether the rank has the key
        None, "num_gpu_blocks was set explicitly.")
    pipeline_parallel_size: int = positive(1, "PP.", ROLE_MAX)
    prefill_context_parallel_size: int | None = positive(None, "PCP.", ROLE_MAX, nullable=True)
    decode_context_parallel_size: int | None = positive(None, "DCP.", ROLE_MAX, nullable=True)
    startup_seconds: float = nonneg(0.0, "Start-up delay (s).")
    speculation: Speculation | None = nested(
        nullable=True, desc="Speculation that has no native rank field (n-gram).")


@described("One role: its parallelism and its native rank.", required=["rank"], define="role")
@attrs.frozen(slots=False)
class Role(RoleCore):
    rank: Rank = Rank()


@described("Roles by name.", minProperties=1)
@attrs.frozen
class Roles:
    aggregated: Role | None = None
    prefill: Role | None = None
    decode: Role | None = None


# --- topology and adapters ---------------------------------------------------------------------

@described("A worker pool.", required=["initial_workers"])
@attrs.frozen
class Pool:
    initial_workers: int = positive(1, "Workers at start.", ROLE_MAX)


@described("Worker pools.", required=["kind"])
@attrs.frozen
class Topology:
    kind: Literal["aggregated", "disaggregated"] = choice("aggregated", "Topology.")
    workers: Pool | None = None
    prefill: Pool | None = None
    decode: Pool | None = None
    handoff_latency_ms: float = nonneg(0.0, "Prefill->decode handoff latency (ms).")


@described("Router knobs.")
@attrs.frozen(slots=False)
class RouterKnobs:
    kv_event_lag_ms: float = nonneg(
        ROUTER["kv_event_lag_ms"], "KV events reach the router this much later (kv_router only).")
    host_cache_hit_weight: float = bounded(
        ROUTER["host_cache_hit_weight"],
        "Credit of a host-pinned (G2) block beyond the GPU prefix (kv_router only).", 0, 1)
    overlap_score_credit: float = nonneg(
        ROUTER["overlap_score_credit"], "Credit of a GPU-resident overlap block (kv_router only).")
    prefill_load_scale: float = nonneg(
        ROUTER["prefill_load_scale"], "Weight of prefill load in the cost (kv_router only).")
    temperature: float = nonneg(
        ROUTER["temperature"], "0 = argmin; > 0 = seeded softmax sampling (kv_router only).")
    seed: int = nonneg(
        ROUTER["seed"], "Seed of softmax sampling (kv_router, temperature > 0).", SEED_MAX)
    overlap_score_credit_decay: float = nonneg(
        ROUTER["overlap_score_credit_decay"],
        "Fades the GPU overlap credit of a scheduler with more booked prefill than the least "
        "loaded one: credit / (1 + decay x excess blocks / request blocks) (kv_router only).")
    decode_active_request_weight: float = nonneg(
        ROUTER["decode_active_request_weight"],
        "Cost per request routed to a scheduler and not yet finished (kv_router only).")
    disk_cache_hit_weight: float = bounded(
        ROUTER["disk_cache_hit_weight"],
        "Credit of a G3 (disk) block; G3 overlap is not used by offline routing (kv_router only).",
        0, 1)
    queue_threshold: float | None = nonneg(
        ROUTER["queue_threshold"],
        "Queue new requests in the router while every scheduler's booked prefill exceeds this x "
        "its token budget (kv_router only; unset = no queue).")
    queue_policy: Literal["fcfs", "lcfs", "wspt"] = choice(
        ROUTER["queue_policy"], "Order of the router queue: arrival (`fcfs`), latest arrival "
        "(`lcfs`), shortest uncached prompt (`wspt`).")


@attrs.frozen(slots=False)
class _Policy:
    policy: RouterPolicy = choice("round_robin", "Placement policy.")


# The router of the YAML config and of the Spec: the policy, then the knobs (attrs lays out the
# fields of the later base first, so `policy` leads).
@described("Placement policy between workers.")
@attrs.frozen(slots=False)
class Router(RouterKnobs, _Policy):
    @property
    def knobs(self) -> RouterKnobs:
        return RouterKnobs(**{f.name: getattr(self, f.name) for f in attrs.fields(RouterKnobs)})


ROUTER_KNOB_DEFAULTS: dict[str, Any] = attrs.asdict(RouterKnobs())


@described("Router.", required=["provider"])
@attrs.frozen
class Placement:
    provider: RouterPolicy = choice("round_robin", "Policy.")
    config: RouterKnobs | None = nested(nullable=True, unset_null=True)

    @property
    def router(self) -> Router:
        """The policy with its knobs (the defaults where the config leaves them out)."""
        knobs = attrs.asdict(self.config or RouterKnobs(), recurse=False)
        return Router(policy=self.provider, **knobs)


@described("Scaling policy.", required=["provider"])
@attrs.frozen
class ScalingAdapter:
    provider: Literal["none", "schedule", "load", "planner_load", "planner"] = choice(
        "none", "Policy: a kvreplay policy (its options in `config`), or the reference's "
        "planner hook (`planner`, settings passed through).")
    config: dict[str, Any] | None = mapping(
        None, "The policy's options (kvreplay policies: schema/scaling.py's keys).",
        nullable=True, hash=False)


@described("Placement and scaling adapters.")
@attrs.frozen
class Adapters:
    placement: Placement = Placement()
    scaling: ScalingAdapter = ScalingAdapter()


# --- traffic -----------------------------------------------------------------------------------

@described("Continuous agentic profile (needs agentic_snapshot and agentic_lanes).")
@attrs.frozen
class AgenticProfile:
    duration_seconds: float = positive(3600.0, "Admission window (s).")
    response_grace_seconds: float = nonneg(30.0, "Grace after the window before cancelling (s).")
    cancel_drain_seconds: float = nonneg(10.0, "Upper bound of the cancel drain (s).")
    tree_idle_cap_seconds: float = positive(300.0, "Per-play idle cap (s).")
    global_idle_cap_seconds: float = positive(10.0, "Whole-workload idle cap (s).")


AGENTIC_FORMATS = ("weka", "agentic_mooncake")


@described("What to replay (every key present in canonical output; null where it does not "
           "apply).")
@attrs.frozen
class Traffic:
    source_type: Literal["trace", "synthetic", "synthetic-session"] = choice(
        "synthetic", "Source kind.")
    trace_format: Literal["mooncake", "mooncake-delta", "weka", "agentic_mooncake", "dynamo",
                          "applied_compute_agentic"] | None = choice(
        None, "Trace format.", nullable=True)
    trace_paths: tuple[str, ...] = items(
        (), TRACE_PATHS + " Several only for `dynamo` request traces.", 0, 4096, minLength=1,
        maxLength=4096)
    trace_block_size: int | None = positive(
        None, "Tokens per trace hash id.", BLOCK_SIZE_MAX, nullable=True)
    weka_nested_timestamp_basis: Literal["auto", "absolute", "relative"] | None = choice(
        None, "Weka nested timestamps.", nullable=True)
    input_tokens: int | None = positive(
        None, "Synthetic prompt tokens (per turn).", TOKENS_MAX, nullable=True)
    output_tokens: int | None = positive(
        None, "Synthetic output tokens (per turn).", TOKENS_MAX, nullable=True)
    cached_prefix_tokens: int | None = nonneg(
        None, "Shared synthetic prefix.", TOKENS_MAX, nullable=True)
    turns_per_session: int | None = bounded(None, "Turns.", 2, 100_000, nullable=True)
    shared_prefix_ratio: float | None = bounded(None, "Shared share.", 0, 1, nullable=True)
    num_prefix_groups: int | None = nonneg(None, "Prefix families.", 1_000_000, nullable=True)
    inter_turn_delay_ms: float | None = nonneg(None, "Inter-turn delay (ms).", nullable=True)
    load_type: Literal["trace_timestamps", "concurrency", "poisson", "constant_rate"] | None = \
        choice(None, "Arrival process.")  # left out: trace_timestamps for traces, else concurrency
    concurrency: int | None = positive(None, "In flight.", TOKENS_MAX, nullable=True)
    request_rate: float | None = positive(
        None, "Requests (or sessions) per second.", nullable=True)
    arrival_seed: int | None = nonneg(None, "Poisson seed.", SEED_MAX, nullable=True)
    speedup: float | None = positive(None, "Divides recorded gaps.", nullable=True)
    agentic_lanes: int | None = positive(None, "Concurrent plays.", 1_000_000, nullable=True)
    agentic_snapshot_seed: int | None = nonneg(None, "Snapshot seed.", SEED_MAX, nullable=True)
    agentic_warmup: bool = flag(False, "Warm up lanes.")
    agentic_profile: AgenticProfile | None = nested(nullable=True)
    stop_requests: int | None = positive(None, "Requests to submit.", 100_000_000, nullable=True)
    stop_sessions: int | None = positive(None, "Sessions to submit.", 100_000_000, nullable=True)

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


# --- the document ------------------------------------------------------------------------------

@described("The deployment.", required=["version", "topology", "engine"])
@attrs.frozen
class DeploymentSpec:
    version: Literal[1] = constant(1, "Spec format version.")
    model: str | None = text(None, "Model id or path.", 4096, min_length=1, nullable=True)
    hardware: str | None = text(None, "Hardware (informational).", 4096, nullable=True)
    backend_version: str | None = text(None, "Backend version.", 256, nullable=True)
    topology: Topology = Topology()
    engine: Role | Roles = switch(Roles(), "ROLE (aggregated) or {role name: ROLE}.", "rank")
    adapters: Adapters = Adapters()
    max_sim_time_ms: float | None = positive(  # the config's largest cap in seconds, in ms
        None, "Simulated-time cutoff (ms).", MAX_NUM * 1000, nullable=True)
    record_per_request: bool = flag(True, "Keep per-request records.")
    sla: Sla | None = nested(nullable=True, unset_null=True)
    telemetry: Telemetry | None = nested(nullable=True)  # written only when set


@described("The replay spec the bundled engine executes (kvreplay docs/native-json.md).",
           required=["spec"])
@attrs.frozen
class Document:
    spec: DeploymentSpec = DeploymentSpec()
    traffic: Traffic | None = None
