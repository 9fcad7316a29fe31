"""Generate schema/config.schema.json and schema/native.schema.json (run: python tools/gen_schemas.py).

The config schema is generated from the attrs model (compiler/schema_gen.py walks compiler/model.py's
field metadata); the native schema is still written out here, reusing config nodes where the native
form has the same shape. The committed JSON files are the contract; a test checks they equal what
this script produces.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from kvreplay.compiler.model import BANDWIDTH
from kvreplay.compiler.schema_gen import config_schema

from kvreplay.schema_facts import MAX_INT, MAX_NUM, only_keys, requires

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


# --- config JSON: generated from the attrs model (compiler/model.py, compiler/schema_gen.py) ---

schema: S = config_schema()


def _at(*path: str) -> S:
    """The config schema node at `path` (property names; shared with the native schema)."""
    node = schema
    for key in path:
        node = node["properties"][key]
    return node


scheduler = _at("engine", "workers", "aggregated", "scheduler")
g3_offload = _at("engine", "workers", "aggregated", "kv_cache", "g3_offload")
speculation = _at("engine", "workers", "aggregated", "speculation")
source = _at("traffic", "source")
profile = _at("traffic", "load", "agentic_profile")
router = _at("router")
evaluation = _at("evaluation")


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
