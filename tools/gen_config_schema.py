"""Generate schema/config.schema.json from one readable Python description (run: python tools/gen_config_schema.py).

The committed JSON is the contract; a test checks it equals what this script produces.
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
    },
)

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
    },
    allOf=[only_keys("type", "polynomial", []), requires("type", "fixed", ["prefill_ms", "decode_ms"])],
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
SOURCE_SYNTH = ["input_tokens", "output_tokens", "cached_prefix_tokens"]
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
        "host_cache_hit_weight": nonneg_num("Credit of a host-pinned (G2) block beyond the GPU prefix (kv_router only).", 0.75),
        "overlap_score_credit": nonneg_num("Credit of a GPU-resident overlap block (kv_router only).", 1.0),
        "prefill_load_scale": nonneg_num("Weight of prefill load in the cost (kv_router only).", 1.0),
        "temperature": nonneg_num("0 = argmin; > 0 = seeded softmax sampling (kv_router only).", 0.0),
        "seed": nonneg_int("Seed of softmax sampling (kv_router, temperature > 0).", 0, maximum=2**64 - 1),
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


def render() -> str:
    return json.dumps(schema, indent=2, sort_keys=False, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    target = Path(__file__).resolve().parent.parent / "schema" / "config.schema.json"
    if sys.argv[1:] == ["--check"]:
        sys.exit(0 if target.read_text(encoding="utf-8") == render() else 1)
    target.write_text(render(), encoding="utf-8")
