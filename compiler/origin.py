"""Where each Spec field came from: maps Spec paths back to spans in the user's source.

Each entry point supplies the function that turns a Spec path (kvreplay.schema.origin) into a
path of its own document (YAML config, native JSON, Python engine args).
"""

from __future__ import annotations

from collections.abc import Callable

from kvreplay.compiler.source import Path, SourceMap, format_path
from kvreplay.schema.diagnostics import Span
from kvreplay.schema.origin import SpecPath


class SourceOrigin:
    """An Origin (kvreplay.schema.origin): Spec paths to spans through an entry point's path
    mapping and source map."""

    def __init__(self, source: SourceMap | None, to_source: Callable[[SpecPath], Path],
                 file: str | None = None) -> None:
        self.source = source
        self.to_source = to_source
        self.file = file if source is None else source.file

    def span(self, spec_path: SpecPath) -> Span:
        path = self.to_source(spec_path)
        if self.source is None:
            return Span(file=self.file, path=format_path(path))
        return self.source.span(path)


# --- YAML configs -------------------------------------------------------------------------

_ROLE_FIELDS_YAML: dict[str, Path] = {
    "workers": ("parallelism", "replicas"),
    "dp_size": ("parallelism", "attention_data"),
    "tensor_parallel_size": ("parallelism", "tensor"),
    "pipeline_parallel_size": ("parallelism", "pipeline"),
    "prefill_context_parallel_size": ("parallelism", "prefill_context"),
    "decode_context_parallel_size": ("parallelism", "decode_context"),
    "num_gpu_blocks": ("kv_cache", "capacity"),
    "num_gpu_blocks_is_explicit": ("kv_cache", "capacity"),
    "startup_seconds": ("startup_seconds",),
    "speculation": ("speculation",),
    "block_size": ("kv_cache", "block_size"),
    "max_num_seqs": ("scheduler", "max_sequences"),
    "max_num_batched_tokens": ("scheduler", "max_batched_tokens"),
    "enable_prefix_caching": ("kv_cache", "prefix_caching"),
    "enable_chunked_prefill": ("scheduler", "chunked_prefill"),
    "prefill_schedule_interval": ("scheduler", "prefill_schedule_interval"),
    "prefill_decode_interval": ("scheduler", "sglang", "prefill_decode_interval"),
    "preemption_mode": ("scheduler", "preemption_mode"),
    "speedup_ratio": ("timing", "speedup_ratio"),
    "decode_speedup_ratio": ("timing", "decode_speedup_ratio"),
    "sglang": ("scheduler", "sglang"),
    "trtllm": ("scheduler", "trtllm"),
    "kv_cache_bytes_per_token": ("kv_cache", "bytes_per_token"),
    "timing_model": ("timing",),
    "host_offload": ("kv_cache", "host_offload"),
    "g3_offload": ("kv_cache", "g3_offload"),
}

_ENGINE_LEVEL_YAML: dict[str, Path] = {
    "backend": ("engine", "backend"),
    "max_model_len": ("engine", "context_length"),
    "kv_transfer_bytes_per_token": ("engine", "kv_transfer", "bytes_per_token"),
    "kv_transfer_bandwidth": ("engine", "kv_transfer", "bandwidth_gb_per_second"),
    "kv_transfer_timing_mode": ("engine", "kv_transfer", "timing_mode"),
}

_TRAFFIC_YAML: dict[str, Path] = {
    "source_type": ("source", "type"),
    "trace_format": ("source", "format"),
    "trace_paths": ("source", "paths"),
    "trace_block_size": ("source", "block_size"),
    "weka_nested_timestamp_basis": ("source", "nested_timestamp_basis"),
    "input_tokens": ("source", "input_tokens"),
    "output_tokens": ("source", "output_tokens"),
    "cached_prefix_tokens": ("source", "cached_prefix_tokens"),
    "turns_per_session": ("source", "session", "turns"),
    "shared_prefix_ratio": ("source", "session", "shared_prefix_ratio"),
    "num_prefix_groups": ("source", "session", "prefix_groups"),
    "inter_turn_delay_ms": ("source", "session", "inter_turn_delay_ms"),
    "load_type": ("load", "type"),
    "concurrency": ("load", "concurrency"),
    "request_rate": ("load", "requests_per_second"),
    "arrival_seed": ("load", "seed"),
    "speedup": ("load", "speedup"),
    "agentic_lanes": ("load", "agentic_lanes"),
    "agentic_snapshot_seed": ("load", "agentic_snapshot", "seed"),
    "agentic_warmup": ("load", "agentic_warmup"),
    "agentic_profile": ("load", "agentic_profile"),
    "stop_requests": ("stop", "requests"),
    "stop_sessions": ("stop", "sessions"),
}

_TOP_YAML: dict[str, Path] = {
    "model": ("engine", "model"),
    "mode": ("engine", "mode"),
    "hardware": ("engine", "hardware"),
    "backend_version": ("engine", "backend_version"),
    "handoff_latency_ms": ("engine", "kv_transfer", "handoff_latency_ms"),
    "scaling": ("scaling",),
    "max_sim_time_ms": ("traffic", "stop", "max_virtual_time_seconds"),
    "sla": ("evaluation", "sla"),
    "record_per_request": ("report", "per_request"),
    "router": ("router",),
}


def yaml_path(spec_path: SpecPath, source: SourceMap | None = None) -> Path:
    """The config.md path that a Spec field comes from."""
    head, rest = spec_path[0], spec_path[1:]
    if head == "roles" and rest:
        role = rest[0]
        if len(rest) == 1:
            return ("engine", "workers", role)
        field, tail = rest[1], rest[2:]
        if field in _ENGINE_LEVEL_YAML:
            return _ENGINE_LEVEL_YAML[field] + tail
        if field == "speculation" and tail:
            return ("engine", "workers", role, "speculation") + tail
        return ("engine", "workers", role) + _ROLE_FIELDS_YAML.get(field, (field,)) + tail
    if head == "traffic" and rest:
        field = rest[0]
        mapped = _TRAFFIC_YAML.get(field, (field,))
        if field in ("shared_prefix_ratio", "num_prefix_groups") and source is not None and \
                not source.has(("traffic", "source", "session")):
            mapped = ("source", mapped[-1])
        if field == "request_rate" and source is not None and \
                source.has(("traffic", "load", "sessions_per_second")):
            mapped = ("load", "sessions_per_second")
        return ("traffic",) + mapped + rest[1:]
    if head == "router":
        return ("router",) + rest
    if head in _TOP_YAML:
        return _TOP_YAML[head] + rest
    return (head,) + rest


def yaml_origin(source: SourceMap) -> SourceOrigin:
    return SourceOrigin(source, lambda p: yaml_path(p, source))
