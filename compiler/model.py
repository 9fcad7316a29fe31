"""The user configuration as frozen attrs classes (config.md), one class per YAML mapping.

Fields that config.md marks required are Optional here only so that a document with errors can
still be modelled and checked by the rules; `compile` refuses such documents before emitting.

The model is the single source of schema/config.schema.json: each field's description and bounds
are its metadata (the kvreplay.schema.schema_facts helpers), each class's description, required
keys and conditional overlays its `described` decorator; compiler/schema_gen.py walks them.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from kvreplay.schema.hybrid import KvCacheGroup as KvCacheGroup
from kvreplay.schema.hybrid import StateCache as StateCache
from kvreplay.schema.hybrid import kv_cache_groups_field
from kvreplay.schema.native_defaults import TRAFFIC_DEFAULTS as TRAFFIC
from kvreplay.schema.native_model import (
    BLOCK_SIZE_MAX,
    BYTES_PER_TOKEN_MAX,
    CONTEXT_MAX,
    ROLE_MAX,
    SEED_MAX,
    SGLANG_OPTIONS,
    TOKENS_MAX,
    TRACE_PATHS,
    AgenticProfile,
    Backend,
    G3Offload,
    HostOffloadOptions,
    RoleName,
    Router,
    SglangOptions,
    Speculation,
    TrtllmOptions,
)
from kvreplay.schema.scaling import KVREPLAY_POLICIES, POLICY_KEYS, ScalingOptions
from kvreplay.schema.scaling import LoadThresholds as LoadThresholds  # Scaling's annotations
from kvreplay.schema.scaling import ScheduleStep as ScheduleStep  # (resolved in this module)
from kvreplay.schema.schema_facts import APPLIED_DEFAULT as APPLIED_DEFAULT
from kvreplay.schema.schema_facts import (
    bounded,
    choice,
    described,
    either,
    flag,
    items,
    mapping,
    nonneg,
    only_keys,
    positive,
    requires,
    text,
)
from kvreplay.schema.sla import Sla as Sla  # the one Sla class (re-exported)
from kvreplay.schema.telemetry import Telemetry as Telemetry

Auto = Literal["auto"]

# APPLIED_DEFAULT field metadata: the documented default of a key whose model default stays None,
# because a rule must tell "not given" from the default (TRAFFIC-WEKA-BASIS reports the key on
# non-weka traces). Lowering applies it where the key applies; the schema's `default` is this value.


def applied_default(cls: type, name: str) -> Any:
    """The documented default of `cls.name`: its APPLIED_DEFAULT metadata, else its default."""
    field = getattr(attrs.fields(cls), name)
    return field.metadata.get(APPLIED_DEFAULT, field.default)


@described("Parallelism of one worker of this role.")
@attrs.frozen
class Parallelism:
    replicas: int = positive(1, "Worker count of this role.", ROLE_MAX)
    tensor: int = positive(1, "Tensor parallelism (TP).", ROLE_MAX)
    pipeline: int = positive(1, "Pipeline parallelism (PP).", ROLE_MAX)
    attention_data: int = positive(1, "Attention data parallelism: ranks per worker.", ROLE_MAX)
    moe_tensor: int = positive(1, "MoE tensor parallelism (informational).", ROLE_MAX)
    moe_expert: int = positive(1, "MoE expert parallelism (informational).", ROLE_MAX)
    prefill_context: int | None = positive(
        None, "Prefill context parallelism (PCP); an explicit value (even 1) differs from unset "
        "for KV layout identity.", ROLE_MAX)
    decode_context: int | None = positive(
        None, "Decode context parallelism (DCP); an explicit value (even 1) differs from unset "
        "for KV layout identity.", ROLE_MAX)


@described(SGLANG_OPTIONS)
@attrs.frozen
class SglangScheduler(SglangOptions):
    """The native `sglang` block, and the rank's `prefill_decode_interval` written with it."""

    prefill_decode_interval: int = nonneg(
        0, "Decode passes between prefill passes (0 = no cadence).", 2**32 - 1)


@described("Scheduler limits per attention-DP rank.")
@attrs.frozen
class Scheduler:
    max_batched_tokens: int = positive(8192, "Per-pass token budget.")
    max_sequences: int | None = positive(  # role default: prefill 1, otherwise 256
        None, "Running-sequence cap (default: aggregated 256, prefill 1, decode 256).")
    prefill_schedule_interval: int = positive(1, "vLLM: prefill cadence with attention DP > 1.")
    chunked_prefill: bool = flag(
        True, "Split long prompts across passes; off, a prompt longer than max_batched_tokens "
        "cannot run.")
    preemption_mode: Literal["lifo", "fifo"] = choice(
        "lifo", "Which running request is preempted when the KV pool runs out: `lifo` the "
        "newest, `fifo` the oldest.")
    sglang: SglangScheduler | None = None
    trtllm: TrtllmOptions | None = None


@described(
    "GPU KV capacity per attention-DP rank.",
    overlays=[
        only_keys("type", "default", []),
        {
            "if": {"properties": {"type": {"const": "fixed"}}, "required": ["type"]},
            "then": {"oneOf": [{"required": ["blocks"]}, {"required": ["bytes"]}]},
        },
    ],
)
@attrs.frozen
class Capacity:
    type: Literal["default", "fixed"] = choice(
        "default", "`default`: the native default block count (16384); `fixed`: exactly one of "
        "`blocks` or `bytes`.")
    blocks: int | None = positive(None, "Fixed capacity in KV blocks per attention-DP rank.")
    bytes: int | None = positive(
        None, "Fixed capacity in bytes per attention-DP rank (blocks = floor(bytes / (block_size "
        "* bytes_per_token)); needs an explicit bytes_per_token).")


@described("GPU prefix cache (G1) and lower tiers of this role.")
@attrs.frozen
class KvCache:
    block_size: int | None = positive(  # backend default
        None, "Tokens per KV block (default: vLLM 64, SGLang 1, TRT-LLM 32; vLLM/TRT-LLM need "
        ">= 2).", BLOCK_SIZE_MAX)
    prefix_caching: bool = flag(True, "Reuse cached prompt prefixes (G1).")
    bytes_per_token: int | Auto = either(
        "auto", "KV bytes per token of ONE tensor-parallel shard, or `auto` (estimated from the "
        "model where kvreplay knows it).", "Bytes per token.", BYTES_PER_TOKEN_MAX)
    capacity: Capacity = Capacity()
    host_offload: HostOffloadOptions | None = None
    g3_offload: G3Offload | None = None
    state_cache: StateCache | None = None
    prefix_match_unit: int | None = positive(
        None, "Tokens per prefix-match unit of a hybrid model (a divisor of block_size; needs "
        "state_cache).", BLOCK_SIZE_MAX)
    groups: tuple[KvCacheGroup, ...] | None = kv_cache_groups_field()


@described(
    "Per-pass timing model.",
    overlays=[only_keys("type", "polynomial", ["speedup_ratio", "decode_speedup_ratio"]),
              requires("type", "fixed", ["prefill_ms", "decode_ms"])],
)
@attrs.frozen
class Timing:
    type: Literal["polynomial", "fixed"] = choice(
        "polynomial", "`polynomial`: built-in vLLM-shaped curves; `fixed`: constant prefill/decode "
        "cost.")
    prefill_ms: float | None = nonneg(
        None, "Fixed cost of a pass that computes prompt tokens (ms).")
    decode_ms: float | None = nonneg(
        None, "Fixed cost of a pass with at least one ongoing decoder (ms).")
    speedup_ratio: float = nonneg(1.0, "Every pass duration is divided by it (0 = unscaled).")
    decode_speedup_ratio: float = nonneg(
        1.0, "Decode pass durations are further divided by it (0 = unscaled).")


@described("One worker role.")
@attrs.frozen
class Worker:
    parallelism: Parallelism = Parallelism()
    scheduler: Scheduler = Scheduler()
    kv_cache: KvCache = KvCache()
    timing: Timing = Timing()
    speculation: Speculation | None = None
    startup_seconds: float = nonneg(0.0, "Start-up delay of workers of this role (s).")


@described("Worker roles.", minProperties=1)
@attrs.frozen
class Workers:
    aggregated: Worker | None = None
    prefill: Worker | None = None
    decode: Worker | None = None

    def present(self) -> list[tuple[RoleName, Worker]]:
        """The roles given, in canonical order (aggregated, prefill, decode)."""
        given: list[tuple[RoleName, Worker | None]] = [
            ("aggregated", self.aggregated), ("prefill", self.prefill), ("decode", self.decode)]
        return [(n, w) for n, w in given if w is not None]


@described("Prefill->decode KV handoff (disaggregated mode only).")
@attrs.frozen
class KvTransfer:
    bytes_per_token: int | Auto = either(
        "auto", "Bytes moved per prompt token, or `auto` (the prefill role's KV bytes per token).",
        "Bytes per token.", BYTES_PER_TOKEN_MAX)
    bandwidth_gb_per_second: float | None = either(
        None, "Link bandwidth in decimal GB/s; null = no transfer delay.", "GB/s.")
    timing_mode: Literal["destination_missing", "full_prompt"] = choice(
        "destination_missing", "`destination_missing`: charge only blocks missing at the decode "
        "worker; `full_prompt`: charge the whole prompt.")
    handoff_latency_ms: float = nonneg(0.0, "Fixed latency added to every handoff (ms).")


@described("The deployment: model, backend, topology and per-role workers.",
           required=["model", "workers"])
@attrs.frozen
class Engine:
    mode: Literal["aggregated", "disaggregated"] = choice(
        "aggregated", "`aggregated` needs exactly workers.aggregated; `disaggregated` needs "
        "exactly workers.prefill and workers.decode.")
    model: str | None = text(
        None, "Model id or path (identity and reports only).", 4096, min_length=1)
    hardware: str | None = text(None, "Hardware name (informational).", 4096)
    backend: Backend = choice("vllm", "Serving backend, shared by every role.")
    backend_version: str | None = text(
        None, 'Backend version as a string; quote it ("0.24.0").', 256)
    context_length: int | Literal["max"] = either(
        "max", "`max` or a positive token count; becomes the rank's max_model_len.", "Tokens.",
        CONTEXT_MAX)
    kv_transfer: KvTransfer | None = None
    workers: Workers = Workers()


@described("Multi-turn sessions (synthetic-session).")
@attrs.frozen
class Session:
    turns: int = bounded(4, "Turns per session.", 2, 100_000)
    shared_prefix_ratio: float = bounded(
        0.0, "Share of each turn's prompt taken from the session's shared prefix family.", 0, 1)
    prefix_groups: int = nonneg(
        0, "Shared prefix families (> 0 when shared_prefix_ratio > 0).", 1_000_000)
    inter_turn_delay_ms: float = nonneg(
        0.0, "Delay between a turn's completion and the next turn (ms).")


SOURCE_TRACE = ["format", "paths", "block_size", "nested_timestamp_basis", "shared_prefix_ratio",
                "prefix_groups"]
SOURCE_SYNTH = ["input_tokens", "output_tokens", "cached_prefix_tokens", "shared_prefix_ratio",
                "prefix_groups"]
SOURCE_SESSION = ["new_input_tokens_per_turn", "output_tokens_per_turn", "session"]


@described(
    "Where requests come from.",
    overlays=[
        only_keys("type", "trace", SOURCE_TRACE),
        requires("type", "trace", ["paths"]),
        only_keys("type", "synthetic", SOURCE_SYNTH),
        only_keys("type", "synthetic-session", SOURCE_SESSION),
    ],
)
@attrs.frozen
class Source:
    type: Literal["trace", "synthetic", "synthetic-session"] = choice("synthetic", "Source kind.")
    format: Literal["mooncake", "mooncake-delta", "weka", "agentic_mooncake", "dynamo",
                    "applied_compute_agentic"] = choice(
        "mooncake", "Trace format (trace source; docs/traces-and-reports.md).")
    paths: tuple[str, ...] = items(
        (), TRACE_PATHS + " Several only for `dynamo` request traces.", 1, 4096, minLength=1,
        maxLength=4096)
    block_size: int | None = positive(
        None, "Tokens per trace hash id (default 512; weka, agentic_mooncake and dynamo carry "
        "their own and an explicit value must match).", BLOCK_SIZE_MAX)
    nested_timestamp_basis: Literal["auto", "absolute", "relative"] | None = choice(  # weka only
        None, "Weka only: how subagent request times relate to their marker.",
        metadata={APPLIED_DEFAULT: "auto"})
    input_tokens: int = positive(
        TRAFFIC["input_tokens"], "Prompt tokens per request (synthetic).", TOKENS_MAX)
    output_tokens: int = positive(
        TRAFFIC["output_tokens"], "Output tokens per request (synthetic).", TOKENS_MAX)
    cached_prefix_tokens: int = nonneg(
        TRAFFIC["cached_prefix_tokens"],
        "Tokens of one prefix shared by every synthetic prompt (<= input_tokens).", TOKENS_MAX)
    shared_prefix_ratio: float = bounded(
        0.0, "Share of each synthetic prompt (applied_compute_agentic trace: of each session's "
        "first prompt) taken from a shared prefix family (not with cached_prefix_tokens).", 0, 1)
    prefix_groups: int = nonneg(
        0, "Shared prefix families (> 0 when shared_prefix_ratio > 0).", 1_000_000)
    new_input_tokens_per_turn: int = positive(
        1024, "Prompt tokens of each turn (synthetic-session): every turn is a fresh prompt, "
        "its prefix family's blocks then new tokens, like the reference's input_tokens.",
        TOKENS_MAX)
    output_tokens_per_turn: int = positive(
        128, "Output tokens per turn (synthetic-session).", TOKENS_MAX)
    session: Session = Session()


@described("Seeded snapshot boundary per play (needs agentic_lanes).", required=["seed"])
@attrs.frozen
class AgenticSnapshot:
    seed: int | None = nonneg(None, "Snapshot seed.", SEED_MAX)


AGENTIC = ["agentic_lanes", "agentic_snapshot", "agentic_warmup", "agentic_profile"]


@described(
    "How requests arrive.",
    overlays=[
        only_keys("type", "trace_timestamps", ["speedup", *AGENTIC]),
        only_keys("type", "concurrency", ["concurrency"]),
        only_keys("type", "poisson", ["requests_per_second", "sessions_per_second", "seed"]),
        only_keys("type", "constant_rate", ["requests_per_second", "sessions_per_second"]),
    ],
)
@attrs.frozen
class Load:
    type: Literal["trace_timestamps", "concurrency", "poisson", "constant_rate"] | None = choice(
        None, "Arrival process (default: trace_timestamps for traces, concurrency otherwise).")
    concurrency: int = positive(  # closed loop only (load type concurrency)
        TRAFFIC["concurrency"], "Closed loop: requests (or sessions) in flight.", TOKENS_MAX)
    requests_per_second: float | None = positive(None, "Open loop arrival rate (synthetic).")
    sessions_per_second: float | None = positive(
        None, "Open loop session rate (synthetic-session).")
    seed: int = nonneg(42, "Poisson arrival seed.", SEED_MAX)
    speedup: float = positive(1.0, "Divide recorded gaps by this (trace_timestamps).")
    agentic_lanes: int | None = positive(None, "Agentic traces: concurrent plays.", 1_000_000)
    agentic_snapshot: AgenticSnapshot | None = None
    agentic_warmup: bool = flag(
        False, "Prime and warm up each lane before measuring (needs agentic_snapshot).")
    agentic_profile: AgenticProfile | None = None


@described("When to stop submitting work.")
@attrs.frozen
class Stop:
    requests: int | None = positive(None, "Total requests (synthetic).", 100_000_000)
    sessions: int | None = positive(None, "Total sessions (synthetic-session).", 100_000_000)
    max_virtual_time_seconds: float | None = positive(
        None, "Simulated-time cutoff (trace sources).")


@described("What to replay (default: synthetic 1024 in / 128 out, concurrency 10, 100 requests).")
@attrs.frozen
class Traffic:
    source: Source = Source()
    load: Load = Load()
    stop: Stop = Stop()


# Without `traffic`: synthetic 1024 in / 128 out (Source defaults), concurrency 10, 100 requests.
DEFAULT_TRAFFIC = Traffic(load=Load(type=TRAFFIC["load_type"]),
                          stop=Stop(requests=TRAFFIC["stop_requests"]))


@described(
    "Autoscaling: a policy sets each role's replicas during the run (config.md, Scaling).",
    required=["policy"],
    overlays=[
        only_keys("policy", "planner", ["config"]),
        *(only_keys("policy", name, POLICY_KEYS[name]) for name in KVREPLAY_POLICIES),
        requires("policy", "schedule", ["schedule"]),
    ],
)
@attrs.frozen
class Scaling(ScalingOptions):
    policy: Literal["schedule", "load", "planner_load", "planner"] | None = choice(
        None, "`schedule`: targets at given times; `load`: thresholds on per-replica load; "
        "`planner_load`: the upstream planner's load target; `planner`: the reference's "
        "planner hook (settings passed through, not run by the bundled engine).")
    config: dict[str, Any] | None = mapping(
        None, "planner: free-form settings, passed through.", hash=False)


@described("Goodput evaluation.")
@attrs.frozen
class Evaluation:
    sla: Sla | None = None


@described("What a run's report holds (`kvreplay run`; docs/traces-and-reports.md).")
@attrs.frozen
class Report:
    per_request: Literal["full", "summary-only"] = choice(
        "full", "`full`: one row per request in the report (`-o`); `summary-only`: summary and "
        "meta only, for small reports (`kvreplay run --per-request` overrides it; "
        "`--export` still writes the rows).")
    telemetry: Telemetry | None = None


@described("A serving deployment to replay and the traffic to replay on it (kvreplay config.md).",
           required=["engine"])
@attrs.frozen
class Config:
    """A whole user configuration (one YAML document)."""

    engine: Engine
    traffic: Traffic | None = None
    router: Router = Router()
    scaling: Scaling | None = None
    evaluation: Evaluation | None = None
    report: Report | None = None
