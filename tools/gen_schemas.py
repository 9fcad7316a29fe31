"""Generate schema/config.schema.json and schema/native.schema.json (run: python tools/gen_schemas.py).

The committed JSON files are the contract; a test checks they equal what this script produces.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

MAX_INT = 2**53 - 1
MAX_NUM = 1e15

S = dict[str, Any]


def pos_int(desc: str, default: int | None = None, maximum: int = MAX_INT) -> S:
    s: S = {"type": "integer", "minimum": 1, "maximum": maximum, "description": desc}
    if default is not None:
        s["default"] = default
    return s


def nonneg_int(desc: str, default: int | None = None, maximum: int = MAX_INT) -> S:
    s: S = {"type": "integer", "minimum": 0, "maximum": maximum, "description": desc}
    if default is not None:
        s["default"] = default
    return s


def nonneg_num(desc: str, default: float | None = None) -> S:
    s: S = {"type": "number", "minimum": 0, "maximum": MAX_NUM, "description": desc}
    if default is not None:
        s["default"] = default
    return s


def pos_num(desc: str, default: float | None = None) -> S:
    s: S = {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_NUM, "description": desc}
    if default is not None:
        s["default"] = default
    return s


def weight(desc: str, default: float) -> S:
    return {"type": "number", "minimum": 0, "maximum": 1, "default": default, "description": desc}


def enum(desc: str, values: list[str], default: str | None = None) -> S:
    s: S = {"enum": values, "description": desc}
    if default is not None:
        s["default"] = default
    return s


def obj(desc: str, props: S, required: list[str] | None = None, **extra: Any) -> S:
    s: S = {"type": "object", "description": desc, "properties": props, "additionalProperties": False}
    if required:
        s["required"] = required
    s.update(extra)
    return s


def only_keys(field: str, value: str, keys: list[str]) -> S:
    """With `field == value`, only these keys apply (an if/then the validator maps to SCHEMA-NOT-APPLICABLE)."""
    return {
        "if": {"properties": {field: {"const": value}}, "required": [field]},
        "then": {"propertyNames": {"enum": sorted(set(keys) | {field})}},
    }


def requires(field: str, value: str, keys: list[str]) -> S:
    return {
        "if": {"properties": {field: {"const": value}}, "required": [field]},
        "then": {"required": keys},
    }


BANDWIDTH = "decimal GB/s (1 GB/s = 1e6 bytes per ms); 0 = unlimited"

host_offload = obj(
    "G2: the host-pinned KV tier of this role.",
    {
        "scope": enum(
            "`dp_rank_local`: one pool per attention-DP rank; `cluster_shared`: one pool for the "
            "whole deployment (all cluster_shared roles join it). (`worker_local` is a G3 scope, "
            "rejected by rule G2-SCOPE.)",
            ["dp_rank_local", "cluster_shared", "worker_local"],
            "dp_rank_local",
        ),
        "num_host_blocks": pos_int(
            "Host blocks: per DP rank (dp_rank_local) or the pool total (cluster_shared; NOT per "
            "participant)."
        ),
        "d2h_bandwidth_gbps": nonneg_num(f"Per-rank GPU->host link, {BANDWIDTH}.", 32.0),
        "h2d_bandwidth_gbps": nonneg_num(f"Per-rank host->GPU link, {BANDWIDTH}.", 32.0),
        "shared_d2h_bandwidth_gbps": nonneg_num(
            f"Whole-pool D2H cap, {BANDWIDTH}; cluster_shared only.", 80.0
        ),
        "shared_h2d_bandwidth_gbps": nonneg_num(
            f"Whole-pool H2D cap, {BANDWIDTH}; cluster_shared only.", 80.0
        ),
        "latency_to_first_byte_ms": nonneg_num(
            "Delays each transfer without consuming bandwidth (ms).", 0.0
        ),
    },
    ["num_host_blocks"],
)

g3_offload = obj(
    "G3: the disk/remote KV tier of this role (requires host_offload).",
    {
        "scope": enum("G3 pool scope.", ["worker_local", "cluster_shared"]),
        "num_g3_blocks": pos_int("G3 blocks: per worker (worker_local) or the pool total."),
        "latency_to_first_byte_ms": nonneg_num("Per-transfer latency (ms).", 0.1),
        "read_bandwidth_gbps": nonneg_num(f"Per-worker read bandwidth, {BANDWIDTH}.", 10.0),
        "write_bandwidth_gbps": nonneg_num(f"Per-worker write bandwidth, {BANDWIDTH}.", 10.0),
        "shared_read_bandwidth_gbps": nonneg_num(
            f"Whole-pool read cap, {BANDWIDTH}; cluster_shared only.", 80.0
        ),
        "shared_write_bandwidth_gbps": nonneg_num(
            f"Whole-pool write cap, {BANDWIDTH}; cluster_shared only.", 80.0
        ),
    },
    ["scope", "num_g3_blocks"],
)

capacity = obj(
    "GPU KV capacity per attention-DP rank.",
    {
        "type": enum(
            "`default`: the native default block count (16384); `fixed`: exactly one of `blocks` "
            "or `bytes`.",
            ["default", "fixed"],
            "default",
        ),
        "blocks": pos_int("Fixed capacity in KV blocks per attention-DP rank."),
        "bytes": pos_int(
            "Fixed capacity in bytes per attention-DP rank (blocks = floor(bytes / (block_size * "
            "bytes_per_token)); needs an explicit bytes_per_token)."
        ),
    },
    allOf=[
        only_keys("type", "default", []),
        {
            "if": {"properties": {"type": {"const": "fixed"}}, "required": ["type"]},
            "then": {"oneOf": [{"required": ["blocks"]}, {"required": ["bytes"]}]},
        },
    ],
)

kv_cache = obj(
    "GPU prefix cache (G1) and lower tiers of this role.",
    {
        "block_size": pos_int(
            "Tokens per KV block (default: vLLM 64, SGLang 1, TRT-LLM 32; vLLM/TRT-LLM need >= 2).",
            maximum=1_048_576,
        ),
        "prefix_caching": {"type": "boolean", "default": True, "description": "Reuse cached prompt prefixes (G1)."},
        "bytes_per_token": {
            "description": "KV bytes per token of ONE tensor-parallel shard, or `auto` (estimated "
            "from the model where kvreplay knows it).",
            "default": "auto",
            "anyOf": [{"const": "auto"}, pos_int("Bytes per token.", maximum=2**40)],
        },
        "capacity": capacity,
        "host_offload": host_offload,
        "g3_offload": g3_offload,
    },
)

parallelism = obj(
    "Parallelism of one worker of this role.",
    {
        "replicas": pos_int("Worker count of this role.", 1, maximum=65536),
        "tensor": pos_int("Tensor parallelism (TP).", 1, maximum=65536),
        "pipeline": pos_int("Pipeline parallelism (PP).", 1, maximum=65536),
        "attention_data": pos_int("Attention data parallelism: ranks per worker.", 1, maximum=65536),
        "moe_tensor": pos_int("MoE tensor parallelism (informational).", 1, maximum=65536),
        "moe_expert": pos_int("MoE expert parallelism (informational).", 1, maximum=65536),
        "prefill_context": pos_int(
            "Prefill context parallelism (PCP); an explicit value (even 1) differs from unset "
            "for KV layout identity.",
            maximum=65536,
        ),
        "decode_context": pos_int(
            "Decode context parallelism (DCP); an explicit value (even 1) differs from unset "
            "for KV layout identity.",
            maximum=65536,
        ),
    },
)

scheduler = obj(
    "Scheduler limits per attention-DP rank.",
    {
        "max_batched_tokens": pos_int("Per-pass token budget.", 8192),
        "max_sequences": pos_int("Running-sequence cap (default: aggregated 256, prefill 1, decode 256)."),
        "prefill_schedule_interval": pos_int("vLLM: prefill cadence with attention DP > 1.", 1),
        "chunked_prefill": {
            "type": "boolean",
            "default": True,
            "description": "Split long prompts across passes; off, a prompt longer than max_batched_tokens cannot run.",
        },
        "preemption_mode": enum(
            "Which running request is preempted when the KV pool runs out: `lifo` the newest, `fifo` the oldest.",
            ["lifo", "fifo"],
            "lifo",
        ),
        "sglang": obj(
            "SGLang scheduler options (backend sglang; the bundled engine runs sglang through the vLLM-shaped "
            "scheduler and lists these as an approximation).",
            {
                "schedule_policy": enum("Waiting-queue order: `fifo` or `lpm` (longest prefix match).", ["fifo", "lpm"], "fifo"),
                "max_prefill_tokens": pos_int("Prefill tokens per pass.", 16384),
                "chunked_prefill_size": pos_int("Chunk size of a long prompt.", 8192),
                "clip_max_new_tokens": pos_int("Output tokens assumed when reserving KV.", 4096),
                "schedule_conservativeness": nonneg_num("Scale of the KV reservation for running requests.", 1.0),
                "prefill_decode_interval": nonneg_int("Decode passes between prefill passes (0 = no cadence).", 0, maximum=2**32 - 1),
            },
        ),
        "trtllm": obj(
            "TensorRT-LLM scheduler options (backend trtllm).",
            {
                "capacity_scheduler_policy": enum("Capacity scheduler.", ["guaranteed_no_evict"], "guaranteed_no_evict"),
            },
        ),
    },
)

SPEEDUP = ["speedup_ratio", "decode_speedup_ratio"]

timing = obj(
    "Per-pass timing model.",
    {
        "type": enum(
            "`polynomial`: built-in vLLM-shaped curves; `fixed`: constant prefill/decode cost.",
            ["polynomial", "fixed"],
            "polynomial",
        ),
        "prefill_ms": nonneg_num("Fixed cost of a pass that computes prompt tokens (ms)."),
        "decode_ms": nonneg_num("Fixed cost of a pass with at least one ongoing decoder (ms)."),
        "speedup_ratio": nonneg_num("Every pass duration is divided by it (0 = unscaled).", 1.0),
        "decode_speedup_ratio": nonneg_num("Decode pass durations are further divided by it (0 = unscaled).", 1.0),
    },
    allOf=[only_keys("type", "polynomial", SPEEDUP), requires("type", "fixed", ["prefill_ms", "decode_ms"])],
)

speculation = obj(
    "Speculative decoding on this role.",
    {
        "kind": enum("Draft method.", ["ngram", "mtp"]),
        "num_speculative_tokens": {
            "type": "integer",
            "minimum": 1,
            "maximum": 5,
            "description": "Draft tokens per step (1..5).",
        },
        "acceptance_rates": {
            "type": "array",
            "minItems": 1,
            "maxItems": 5,
            "items": {"type": "number", "minimum": 0, "maximum": 1},
            "description": "Conditional acceptance probability per draft position.",
        },
        "seed": nonneg_int("Sampling seed.", 42, maximum=2**64 - 1),
    },
    ["kind", "num_speculative_tokens", "acceptance_rates"],
)

worker = obj(
    "One worker role.",
    {
        "parallelism": parallelism,
        "scheduler": scheduler,
        "kv_cache": kv_cache,
        "timing": timing,
        "speculation": speculation,
        "startup_seconds": nonneg_num("Start-up delay of workers of this role (s).", 0.0),
    },
)

kv_transfer = obj(
    "Prefill->decode KV handoff (disaggregated mode only).",
    {
        "bytes_per_token": {
            "description": "Bytes moved per prompt token, or `auto` (the prefill role's KV bytes per token).",
            "default": "auto",
            "anyOf": [{"const": "auto"}, pos_int("Bytes per token.", maximum=2**40)],
        },
        "bandwidth_gb_per_second": {
            "description": "Link bandwidth in decimal GB/s; null = no transfer delay.",
            "default": None,
            "anyOf": [{"type": "null"}, pos_num("GB/s.")],
        },
        "timing_mode": enum(
            "`destination_missing`: charge only blocks missing at the decode worker; `full_prompt`: "
            "charge the whole prompt.",
            ["destination_missing", "full_prompt"],
            "destination_missing",
        ),
        "handoff_latency_ms": nonneg_num("Fixed latency added to every handoff (ms).", 0.0),
    },
)

engine = obj(
    "The deployment: model, backend, topology and per-role workers.",
    {
        "mode": enum(
            "`aggregated` needs exactly workers.aggregated; `disaggregated` needs exactly "
            "workers.prefill and workers.decode.",
            ["aggregated", "disaggregated"],
            "aggregated",
        ),
        "model": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "Model id or path (identity and reports only)."},
        "hardware": {"type": "string", "maxLength": 4096, "description": "Hardware name (informational)."},
        "backend": enum("Serving backend, shared by every role.", ["vllm", "sglang", "trtllm"], "vllm"),
        "backend_version": {
            "type": "string",
            "maxLength": 256,
            "description": 'Backend version as a string; quote it ("0.24.0").',
        },
        "context_length": {
            "description": "`max` or a positive token count; becomes the rank's max_model_len.",
            "default": "max",
            "anyOf": [{"const": "max"}, pos_int("Tokens.", maximum=2**31 - 1)],
        },
        "kv_transfer": kv_transfer,
        "workers": obj(
            "Worker roles.",
            {"aggregated": worker, "prefill": worker, "decode": worker},
            minProperties=1,
        ),
    },
    ["model", "workers"],
)

SOURCE_TRACE = ["format", "paths", "block_size", "nested_timestamp_basis"]
SOURCE_SYNTH = ["input_tokens", "output_tokens", "cached_prefix_tokens", "shared_prefix_ratio", "prefix_groups"]
SOURCE_SESSION = ["new_input_tokens_per_turn", "output_tokens_per_turn", "session"]

source = obj(
    "Where requests come from.",
    {
        "type": enum("Source kind.", ["trace", "synthetic", "synthetic-session"], "synthetic"),
        "format": enum(
            "Trace format (trace source).",
            ["mooncake", "mooncake-delta", "weka", "agentic_mooncake"],
            "mooncake",
        ),
        "paths": {
            "type": "array",
            "minItems": 1,
            "maxItems": 4096,
            "items": {"type": "string", "minLength": 1, "maxLength": 4096},
            "description": "Trace files, relative to the config file's folder.",
        },
        "block_size": pos_int(
            "Tokens per trace hash id (default 512; weka/agentic_mooncake carry their own and an "
            "explicit value must match).",
            maximum=1_048_576,
        ),
        "nested_timestamp_basis": enum(
            "Weka only: how subagent request times relate to their marker.",
            ["auto", "absolute", "relative"],
            "auto",
        ),
        "input_tokens": pos_int("Prompt tokens per request (synthetic).", 1024, maximum=10_000_000),
        "output_tokens": pos_int("Output tokens per request (synthetic).", 128, maximum=10_000_000),
        "cached_prefix_tokens": nonneg_int(
            "Tokens of one prefix shared by every synthetic prompt (<= input_tokens).",
            0,
            maximum=10_000_000,
        ),
        "shared_prefix_ratio": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "default": 0.0,
            "description": "Share of each synthetic prompt taken from a shared prefix family (not with cached_prefix_tokens).",
        },
        "prefix_groups": nonneg_int("Shared prefix families (> 0 when shared_prefix_ratio > 0).", 0, maximum=1_000_000),
        "new_input_tokens_per_turn": pos_int("New prompt tokens per turn (synthetic-session).", 1024, maximum=10_000_000),
        "output_tokens_per_turn": pos_int("Output tokens per turn (synthetic-session).", 128, maximum=10_000_000),
        "session": obj(
            "Multi-turn sessions (synthetic-session).",
            {
                "turns": {"type": "integer", "minimum": 2, "maximum": 100_000, "default": 4, "description": "Turns per session."},
                "shared_prefix_ratio": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 1,
                    "default": 0.0,
                    "description": "Share of each first prompt taken from a shared prefix family.",
                },
                "prefix_groups": nonneg_int("Shared prefix families (> 0 when shared_prefix_ratio > 0).", 0, maximum=1_000_000),
                "inter_turn_delay_ms": nonneg_num("Delay between a turn's completion and the next turn (ms).", 0.0),
            },
        ),
    },
    allOf=[
        only_keys("type", "trace", SOURCE_TRACE),
        requires("type", "trace", ["paths"]),
        only_keys("type", "synthetic", SOURCE_SYNTH),
        only_keys("type", "synthetic-session", SOURCE_SESSION),
    ],
)

profile = obj(
    "Continuous agentic profile (needs agentic_snapshot and agentic_lanes).",
    {
        "duration_seconds": pos_num("Admission window (s).", 3600.0),
        "response_grace_seconds": nonneg_num("Grace after the window before cancelling (s).", 30.0),
        "cancel_drain_seconds": nonneg_num("Upper bound of the cancel drain (s).", 10.0),
        "tree_idle_cap_seconds": pos_num("Per-play idle cap (s).", 300.0),
        "global_idle_cap_seconds": pos_num("Whole-workload idle cap (s).", 10.0),
    },
)

AGENTIC = ["agentic_lanes", "agentic_snapshot", "agentic_warmup", "agentic_profile"]

load = obj(
    "How requests arrive.",
    {
        "type": enum(
            "Arrival process (default: trace_timestamps for traces, concurrency otherwise).",
            ["trace_timestamps", "concurrency", "poisson", "constant_rate"],
        ),
        "concurrency": pos_int("Closed loop: requests (or sessions) in flight.", 10, maximum=10_000_000),
        "requests_per_second": pos_num("Open loop arrival rate (synthetic)."),
        "sessions_per_second": pos_num("Open loop session rate (synthetic-session)."),
        "seed": nonneg_int("Poisson arrival seed.", 42, maximum=2**64 - 1),
        "speedup": pos_num("Divide recorded gaps by this (trace_timestamps).", 1.0),
        "agentic_lanes": pos_int("Agentic traces: concurrent plays.", maximum=1_000_000),
        "agentic_snapshot": obj(
            "Seeded snapshot boundary per play (needs agentic_lanes).",
            {"seed": nonneg_int("Snapshot seed.", maximum=2**64 - 1)},
            ["seed"],
        ),
        "agentic_warmup": {"type": "boolean", "default": False, "description": "Prime and warm up each lane before measuring (needs agentic_snapshot)."},
        "agentic_profile": profile,
    },
    allOf=[
        only_keys("type", "trace_timestamps", ["speedup", *AGENTIC]),
        only_keys("type", "concurrency", ["concurrency"]),
        only_keys("type", "poisson", ["requests_per_second", "sessions_per_second", "seed"]),
        only_keys("type", "constant_rate", ["requests_per_second", "sessions_per_second"]),
    ],
)

stop = obj(
    "When to stop submitting work.",
    {
        "requests": pos_int("Total requests (synthetic).", maximum=100_000_000),
        "sessions": pos_int("Total sessions (synthetic-session).", maximum=100_000_000),
        "max_virtual_time_seconds": pos_num("Simulated-time cutoff (trace sources)."),
    },
)

traffic = obj(
    "What to replay (default: synthetic 1024 in / 128 out, concurrency 10, 100 requests).",
    {"source": source, "load": load, "stop": stop},
)

router = obj(
    "Placement policy between workers.",
    {
        "policy": enum("Placement policy.", ["round_robin", "kv_router"], "round_robin"),
        "kv_event_lag_ms": nonneg_num("KV events reach the router this much later (kv_router only).", 0.0),
        "host_cache_hit_weight": weight("Credit of a host-pinned (G2) block beyond the GPU prefix (kv_router only).", 0.75),
        "overlap_score_credit": nonneg_num("Credit of a GPU-resident overlap block (kv_router only).", 1.0),
        "prefill_load_scale": nonneg_num("Weight of prefill load in the cost (kv_router only).", 1.0),
        "temperature": nonneg_num("0 = argmin; > 0 = seeded softmax sampling (kv_router only).", 0.0),
        "seed": nonneg_int("Seed of softmax sampling (kv_router, temperature > 0).", 0, maximum=2**64 - 1),
        "overlap_score_credit_decay": nonneg_num(
            "Fades the GPU overlap credit of a scheduler with more booked prefill than the least loaded one: "
            "credit / (1 + decay x excess blocks / request blocks) (kv_router only).",
            0.0,
        ),
        "decode_active_request_weight": nonneg_num(
            "Cost per request routed to a scheduler and not yet finished (kv_router only).", 0.0
        ),
        "disk_cache_hit_weight": weight(
            "Credit of a G3 (disk) block; G3 overlap is not used by offline routing (kv_router only).", 0.25
        ),
        "queue_threshold": nonneg_num(
            "Queue new requests in the router while every scheduler's booked prefill exceeds this x its "
            "token budget (kv_router only; unset = no queue)."
        ),
        "queue_policy": enum(
            "Order of the router queue: arrival (`fcfs`), latest arrival (`lcfs`), shortest uncached prompt (`wspt`).",
            ["fcfs", "lcfs", "wspt"],
            "fcfs",
        ),
    },
)

scaling = obj(
    "A scaling policy (planner hook). Present = worker pools are NOT static.",
    {
        "policy": {"const": "planner", "description": "The scaling policy."},
        "config": {"type": "object", "description": "Free-form policy configuration, passed through."},
    },
    ["policy"],
)

evaluation = obj(
    "Goodput evaluation.",
    {
        "sla": obj(
            "Service-level bounds; a request is good when it meets every bound given.",
            {
                "ttft_ms": pos_num("Time to first token bound (ms)."),
                "itl_ms": pos_num("Average inter-token latency bound (ms)."),
                "e2e_ms": pos_num("End-to-end latency bound (ms)."),
            },
        )
    },
)

schema: S = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://kvreplay.dev/schema/config.schema.json",
    "title": "kvreplay deployment configuration",
    "description": "A serving deployment to replay and the traffic to replay on it (kvreplay config.md).",
    "type": "object",
    "properties": {
        "engine": engine,
        "traffic": traffic,
        "router": router,
        "scaling": scaling,
        "evaluation": evaluation,
    },
    "required": ["engine"],
    "additionalProperties": False,
}


def nullable(inner: S, desc: str | None = None) -> S:
    out: S = {"anyOf": [{"type": "null"}, inner]}
    out["description"] = desc or inner.get("description", "")
    return out


# --- native JSON (docs/native-json.md) ----------------------------------------------------

native_host_offload = obj(
    "G2 in the native engine's canonical form (defaults of scope, shared_* and latency omitted).",
    {
        "scope": enum("Pool scope (worker_local is a G3 scope: rule G2-SCOPE).",
                      ["dp_rank_local", "cluster_shared", "worker_local"], "dp_rank_local"),
        "num_host_blocks": pos_int("Host blocks: per DP rank, or the pool total when shared."),
        "d2h_bandwidth_gbps": nonneg_num(f"Per-rank D2H link, {BANDWIDTH}.", 32.0),
        "h2d_bandwidth_gbps": nonneg_num(f"Per-rank H2D link, {BANDWIDTH}.", 32.0),
        "shared_d2h_bandwidth_gbps": nonneg_num(f"Pool D2H cap, {BANDWIDTH}.", 80.0),
        "shared_h2d_bandwidth_gbps": nonneg_num(f"Pool H2D cap, {BANDWIDTH}.", 80.0),
        "latency_to_first_byte_ms": nonneg_num("Per-transfer latency (ms).", 0.0),
        "kv_layout_id": nullable({"type": "string", "maxLength": 4096},
                                 "KV layout identity; required non-blank for cluster_shared."),
    },
    ["num_host_blocks"],
)

native_timing = obj(
    "Per-pass timing model.",
    {
        "type": enum("Timing model.", ["polynomial", "fixed"], "polynomial"),
        "prefill_ms": nonneg_num("Fixed prefill cost (ms)."),
        "decode_ms": nonneg_num("Fixed decode cost (ms)."),
    },
    ["type"],
    allOf=[only_keys("type", "polynomial", []), requires("type", "fixed", ["prefill_ms", "decode_ms"])],
)

rank_schema = obj(
    "Native per-rank engine arguments (missing fields take the native engine's defaults).",
    {
        "backend": enum("Backend.", ["vllm", "sglang", "trtllm"], "vllm"),
        "worker_type": enum("Role of the rank.", ["aggregated", "prefill", "decode"], "aggregated"),
        "block_size": pos_int("Tokens per KV block.", maximum=1_048_576),
        "num_gpu_blocks": pos_int("GPU KV blocks per rank.", 16384),
        "max_num_seqs": pos_int("Running-sequence cap.", 256),
        "max_num_batched_tokens": pos_int("Per-pass token budget.", 8192),
        "max_model_len": nullable(pos_int("Longest prompt + output.", maximum=2**31 - 1)),
        "enable_prefix_caching": {"type": "boolean", "default": True, "description": "G1 prefix caching."},
        "enable_chunked_prefill": {"type": "boolean", "default": True, "description": "Chunked prefill."},
        "prefill_schedule_interval": pos_int("vLLM prefill cadence with DP > 1.", 1),
        "prefill_decode_interval": nonneg_int("SGLang: decode passes between prefill passes (sglang only).", 0, maximum=2**32 - 1),
        "sglang": scheduler["properties"]["sglang"] | {
            "properties": {k: v for k, v in scheduler["properties"]["sglang"]["properties"].items()
                           if k != "prefill_decode_interval"},
        },
        "trtllm": scheduler["properties"]["trtllm"],
        "preemption_mode": enum("Preemption victim order.", ["lifo", "fifo"], "lifo"),
        "speedup_ratio": nonneg_num("Durations are divided by it (0 = unscaled).", 1.0),
        "decode_speedup_ratio": nonneg_num("Decode durations are divided by it.", 1.0),
        "kv_cache_bytes_per_token": nullable(pos_int("KV bytes per token of one TP shard.", maximum=2**40)),
        "kv_transfer_bytes_per_token": nullable(pos_int("Handoff bytes per token.", maximum=2**40)),
        "kv_transfer_bandwidth": nullable(nonneg_num("Handoff bandwidth (GB/s).")),
        "kv_transfer_timing_mode": enum("Charged handoff tokens.", ["destination_missing", "full_prompt"], "full_prompt"),
        "timing_model": native_timing,
        "native_host_offload": native_host_offload,
        "g3_offload": g3_offload,
        "aic_nextn": {"type": "integer", "minimum": 1, "maximum": 5, "description": "MTP draft tokens."},
        "aic_nextn_accept_rates": {
            "type": "string",
            "pattern": r"^\s*[0-9.eE+-]+(\s*,\s*[0-9.eE+-]+)*\s*$",
            "description": "Comma-separated MTP acceptance rates.",
        },
        "aic_mtp_seed": nonneg_int("MTP seed.", 42, maximum=2**64 - 1),
    },
)

native_speculation = obj(
    "Speculation that has no native rank field (n-gram).",
    {
        "kind": enum("Draft method.", ["ngram", "mtp"]),
        "num_speculative_tokens": {"type": "integer", "minimum": 1, "maximum": 5, "description": "Draft tokens."},
        "acceptance_rates": speculation["properties"]["acceptance_rates"],
        "seed": nonneg_int("Seed.", 42, maximum=2**64 - 1),
    },
    ["kind", "num_speculative_tokens", "acceptance_rates"],
)

native_role = obj(
    "One role: its parallelism and its native rank.",
    {
        "dp_size": pos_int("Attention-DP ranks per worker.", 1, maximum=65536),
        "tensor_parallel_size": pos_int("TP.", 1, maximum=65536),
        "num_gpu_blocks_is_explicit": {"type": "boolean", "description": "num_gpu_blocks was set explicitly."},
        "pipeline_parallel_size": pos_int("PP.", 1, maximum=65536),
        "prefill_context_parallel_size": nullable(pos_int("PCP.", maximum=65536)),
        "decode_context_parallel_size": nullable(pos_int("DCP.", maximum=65536)),
        "startup_seconds": nonneg_num("Start-up delay (s).", 0.0),
        "speculation": nullable(native_speculation),
        "rank": rank_schema,
    },
    ["rank"],
)

workers_count = obj("A worker pool.", {"initial_workers": pos_int("Workers at start.", 1, maximum=65536)},
                    ["initial_workers"])

native_placement_config = obj(
    "Router knobs.",
    {k: nullable(v) if k == "queue_threshold" else v for k, v in router["properties"].items() if k != "policy"},
)

native_traffic = obj(
    "What to replay (every key present in canonical output; null where it does not apply).",
    {
        "source_type": enum("Source kind.", ["trace", "synthetic", "synthetic-session"], "synthetic"),
        "trace_format": nullable(enum("Trace format.", ["mooncake", "mooncake-delta", "weka", "agentic_mooncake"])),
        "trace_paths": source["properties"]["paths"] | {"minItems": 0},
        "trace_block_size": nullable(pos_int("Tokens per trace hash id.", maximum=1_048_576)),
        "weka_nested_timestamp_basis": nullable(enum("Weka nested timestamps.", ["auto", "absolute", "relative"])),
        "input_tokens": nullable(pos_int("Synthetic prompt tokens (per turn).", maximum=10_000_000)),
        "output_tokens": nullable(pos_int("Synthetic output tokens (per turn).", maximum=10_000_000)),
        "cached_prefix_tokens": nullable(nonneg_int("Shared synthetic prefix.", maximum=10_000_000)),
        "turns_per_session": nullable({"type": "integer", "minimum": 2, "maximum": 100_000, "description": "Turns."}),
        "shared_prefix_ratio": nullable({"type": "number", "minimum": 0, "maximum": 1, "description": "Shared share."}),
        "num_prefix_groups": nullable(nonneg_int("Prefix families.", maximum=1_000_000)),
        "inter_turn_delay_ms": nullable(nonneg_num("Inter-turn delay (ms).")),
        "load_type": enum("Arrival process.", ["trace_timestamps", "concurrency", "poisson", "constant_rate"]),
        "concurrency": nullable(pos_int("In flight.", maximum=10_000_000)),
        "request_rate": nullable(pos_num("Requests (or sessions) per second.")),
        "arrival_seed": nullable(nonneg_int("Poisson seed.", maximum=2**64 - 1)),
        "speedup": nullable(pos_num("Divides recorded gaps.")),
        "agentic_lanes": nullable(pos_int("Concurrent plays.", maximum=1_000_000)),
        "agentic_snapshot_seed": nullable(nonneg_int("Snapshot seed.", maximum=2**64 - 1)),
        "agentic_warmup": {"type": "boolean", "default": False, "description": "Warm up lanes."},
        "agentic_profile": nullable(profile),
        "stop_requests": nullable(pos_int("Requests to submit.", maximum=100_000_000)),
        "stop_sessions": nullable(pos_int("Sessions to submit.", maximum=100_000_000)),
    },
)

native_schema: S = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://kvreplay.dev/schema/native.schema.json",
    "title": "kvreplay canonical native replay spec",
    "description": "The replay spec the bundled engine executes (kvreplay docs/native-json.md).",
    "type": "object",
    "$defs": {"role": native_role},
    "properties": {
        "spec": obj(
            "The deployment.",
            {
                "version": {"const": 1, "description": "Spec format version."},
                "model": nullable({"type": "string", "minLength": 1, "maxLength": 4096}, "Model id or path."),
                "hardware": nullable({"type": "string", "maxLength": 4096}, "Hardware (informational)."),
                "backend_version": nullable({"type": "string", "maxLength": 256}, "Backend version."),
                "topology": obj(
                    "Worker pools.",
                    {
                        "kind": enum("Topology.", ["aggregated", "disaggregated"]),
                        "workers": workers_count,
                        "prefill": workers_count,
                        "decode": workers_count,
                        "handoff_latency_ms": nonneg_num("Prefill->decode handoff latency (ms).", 0.0),
                    },
                    ["kind"],
                ),
                "engine": {
                    "description": "ROLE (aggregated) or {role name: ROLE}.",
                    "type": "object",
                    "if": {"required": ["rank"]},
                    "then": {"$ref": "#/$defs/role"},
                    "else": obj(
                        "Roles by name.",
                        {"aggregated": {"$ref": "#/$defs/role"}, "prefill": {"$ref": "#/$defs/role"},
                         "decode": {"$ref": "#/$defs/role"}},
                        minProperties=1,
                    ),
                },
                "adapters": obj(
                    "Placement and scaling adapters.",
                    {
                        "placement": obj(
                            "Router.",
                            {
                                "provider": enum("Policy.", ["round_robin", "kv_router"], "round_robin"),
                                "config": nullable(native_placement_config),
                            },
                            ["provider"],
                        ),
                        "scaling": obj(
                            "Scaling policy.",
                            {
                                "provider": enum("Policy.", ["none", "planner"], "none"),
                                "config": nullable({"type": "object", "description": "Passed through."}),
                            },
                            ["provider"],
                        ),
                    },
                ),
                "max_sim_time_ms": nullable(pos_num("Simulated-time cutoff (ms).")),
                "record_per_request": {"type": "boolean", "default": True, "description": "Keep per-request records."},
                "sla": nullable(evaluation["properties"]["sla"]),
            },
            ["version", "topology", "engine"],
        ),
        "traffic": native_traffic,
    },
    "required": ["spec"],
    "additionalProperties": False,
}


def render(which: S) -> str:
    return json.dumps(which, indent=2, sort_keys=False, ensure_ascii=False) + "\n"


def _type_of(node: S) -> str:
    if "const" in node:
        return f"`{node['const']}`"
    if "enum" in node:
        return " \\| ".join(f"`{v}`" for v in node["enum"])
    if "anyOf" in node:
        return " or ".join(_type_of(n) for n in node["anyOf"])
    kind = node.get("type", "")
    bounds = []
    if "minimum" in node and kind in ("integer", "number"):
        bounds.append(f">= {node['minimum']:g}")
    if "exclusiveMinimum" in node:
        bounds.append(f"> {node['exclusiveMinimum']:g}")
    if "maximum" in node and node["maximum"] < 1e9 and kind in ("integer", "number"):
        bounds.append(f"<= {node['maximum']:g}")
    return {"object": "mapping", "array": "list", "null": "null"}.get(kind, kind) + (
        " " + ", ".join(bounds) if bounds else "")


def _rows(node: S, prefix: str, out: list[str]) -> None:
    for key, child in node.get("properties", {}).items():
        path = f"{prefix}.{key}" if prefix else key
        default = child.get("default")
        shown = "" if "default" not in child else f"`{json.dumps(default)}`"
        required = key in node.get("required", [])
        meaning = child.get("description", "").replace("|", "\\|")
        out.append(f"| `{path}` | {_type_of(child)} | {'required' if required else shown} | "
                   f"{meaning} |")
        if child.get("type") == "object" and "properties" in child:
            _rows(child, path, out)


def render_reference() -> str:
    """docs/config-reference.md: every key of the config schema, generated from it."""
    out = [
        "# Config reference",
        "",
        "Every key of the user YAML, generated from `schema/config.schema.json`",
        "(`python tools/gen_schemas.py`). See [config.md](config.md) for the concepts.",
        "Worker roles (`aggregated`, `prefill`, `decode`) share one shape, shown once under",
        "`engine.workers.aggregated`.",
        "",
    ]
    for section in schema["properties"]:
        out += [f"## `{section}`", "", "| key | type | default | meaning |", "| --- | --- | --- | --- |"]
        node = schema["properties"][section]
        if section == "engine":
            node = json.loads(json.dumps(node))
            for role in ("prefill", "decode"):
                node["properties"]["workers"]["properties"].pop(role)
        _rows({"properties": {section: node}, "required": schema["required"]}, "", out)
        out.append("")
    return "\n".join(out)


def state_bounds(node: Any) -> None:
    """Append an integer's own maximum to its description (editors show the description, and a
    bound below the generic ones is a policy the user cannot guess)."""
    if isinstance(node, list):
        for item in node:
            state_bounds(item)
        return
    if not isinstance(node, dict):
        return
    for child in node.values():
        state_bounds(child)
    typed = [node, *node.get("anyOf", [])]
    bound = next((b["maximum"] for b in typed if isinstance(b, dict)
                  and b.get("type") == "integer" and b.get("maximum", 1e9) < 1e9), None)
    text = node.get("description")
    if bound is not None and isinstance(text, str) and f"..{bound})" not in text \
            and "At most" not in text:
        node["description"] = f"{text.rstrip('.')}. At most {bound:,}."


state_bounds(schema)
state_bounds(native_schema)
TARGETS = {"config.schema.json": schema, "native.schema.json": native_schema}


if __name__ == "__main__":
    root = Path(__file__).resolve().parent.parent
    outputs = {root / "schema" / n: render(s) for n, s in TARGETS.items()}
    outputs[root / "docs" / "config-reference.md"] = render_reference()
    if sys.argv[1:] == ["--check"]:
        stale = [p for p, text in outputs.items() if p.read_text("utf-8") != text]
        print("\n".join(f"stale: {p.relative_to(root)}" for p in stale))
        sys.exit(1 if stale else 0)
    for path, text in outputs.items():
        path.write_text(text, encoding="utf-8")
