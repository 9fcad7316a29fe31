"""Lowering the config model into the normalized Spec (the one model all entry points share).

Each Spec field is declared once, in the tables below: the config key it comes from (a path
under the table's block) and, where the value there is not the field's as it is, what lowering
makes of it. Lowering reads the config through these tables, and `yaml_path` is their inverse:
a finding about a Spec field points at the key the field was read from (tests/compiler/
test_lowering_origins.py checks that every Spec field has its entry and names a config key).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

import attrs

from kvreplay.compiler import model as m
from kvreplay.compiler.kv_bytes import estimate_bytes_per_token
from kvreplay.compiler.origin import SourceOrigin
from kvreplay.compiler.source import Path, SourceMap
from kvreplay.schema import spec as s
from kvreplay.schema.diagnostics import Diagnostic, Span
from kvreplay.schema.layout import derive_layout_id
from kvreplay.schema.native_defaults import (
    NUM_GPU_BLOCKS,
    RANK_DEFAULTS,
    TRACE_BLOCK_SIZE,
    block_size_default,
    load_type_default,
    max_num_seqs_default,
)
from kvreplay.schema.native_model import RoleName
from kvreplay.schema.origin import Origin, SpecPath
from kvreplay.schema.scaling import ScalingOptions, policy_config
from kvreplay.schema.spec import canonical_json

T = TypeVar("T", bound=attrs.AttrsInstance)
C = TypeVar("C")


@attrs.frozen
class From(Generic[C]):
    """A Spec field lowered from the config key at `path` (under the table's block): the value
    there, or what `then` makes of it and of what the block's lowering knows (`C`). `or_else`
    is another key for the same value, read when `path` holds none."""

    path: Path
    then: Callable[[Any, C], Any] | None = None
    or_else: Path | None = None

    def value(self, block: object, known: C) -> Any:
        value = _read(block, self.path)
        if value is None and self.or_else is not None:
            value = _read(block, self.or_else)
        return value if self.then is None else self.then(value, known)

    def key(self, block: Path, source: SourceMap | None) -> Path:
        """The key a finding about the field points at: `or_else` where the source writes it."""
        if self.or_else is not None and source is not None and source.has(block + self.or_else):
            return self.or_else
        return self.path


def _read(block: object, path: Path) -> Any:
    """The config value at `path` under `block`; None where a block on the way is left out."""
    for key in path:
        if block is None:
            return None
        block = getattr(block, str(key))
    return block


class _Lowering:
    def __init__(self, config: m.Config, origin: Origin | None) -> None:
        self.config = config
        self.origin = origin
        self.diagnostics: list[Diagnostic] = []

    def error(self, rule: str, message: str, at: SpecPath, hint: str | None = None) -> None:
        span = self.origin.span(at) if self.origin else Span()
        self.diagnostics.append(Diagnostic(rule, "error", message, span, hint=hint))

    def spec(self) -> s.Spec:
        return s.Spec(**{name: entry.value(self.config, self) for name, entry in SPEC.items()})

    def roles(self) -> tuple[s.Role, ...]:
        engine = self.config.engine
        return tuple(self.role(_Role(self, name, worker), engine, worker)
                     for name, worker in engine.workers.present())

    def role(self, role: _Role, engine: m.Engine, worker: m.Worker) -> s.Role:
        fields = {name: entry.value(worker, role) for name, entry in ROLE.items()}
        fields |= {name: entry.value(engine, role) for name, entry in ROLE_ENGINE.items()}
        return s.Role(**fields)

    def traffic(self, given: m.Traffic | None) -> s.Traffic:
        traffic = given or m.DEFAULT_TRAFFIC
        known = _Traffic(traffic)
        entries = {**TRAFFIC, **TRAFFIC_BY_SOURCE[known.kind]}
        fields = {name: entry.value(traffic, known) for name, entry in entries.items()}
        if known.kind != "trace" and given is not None:
            self.check_rate_unit(known.kind, traffic.load)
        return s.Traffic(**fields)

    def check_rate_unit(self, kind: str, load: m.Load) -> None:
        wrong = "sessions_per_second" if kind == "synthetic" else "requests_per_second"
        value = load.sessions_per_second if kind == "synthetic" else load.requests_per_second
        if value is not None:
            right = "requests_per_second" if kind == "synthetic" else "sessions_per_second"
            self.error(
                "CONFIG-RATE-UNIT",
                f"`{wrong}` does not match source type `{kind}`",
                ("traffic", "request_rate"),
                hint=f"use `{right}`",
            )

    def capacity(self, role: str, capacity: m.Capacity, block_size: int,
                 kv_bytes: int | None) -> tuple[int, bool]:
        if capacity.type == "default":
            return NUM_GPU_BLOCKS, False
        if capacity.blocks is not None:
            return capacity.blocks, True
        if capacity.bytes is None:
            return NUM_GPU_BLOCKS, False  # schema already reported the missing key
        at = ("roles", role, "num_gpu_blocks")
        if kv_bytes is None:
            self.error(
                "CONFIG-CAPACITY-BYTES",
                "capacity given in bytes needs the KV bytes per token, which is `auto` and not "
                "known for this model",
                at,
                hint="set kv_cache.bytes_per_token explicitly, or give capacity in blocks",
            )
            return NUM_GPU_BLOCKS, True
        blocks = capacity.bytes // (block_size * kv_bytes)
        if blocks < 1:
            self.error(
                "CONFIG-CAPACITY-BYTES",
                f"capacity of {capacity.bytes:,} bytes holds no KV block of {block_size} tokens x "
                f"{kv_bytes:,} bytes",
                at,
                hint="raise capacity.bytes or give capacity in blocks",
            )
            return 1, True
        return blocks, True

    def prefill_kv_bytes(self) -> int | None:
        """kv_transfer `auto`: the prefill role's KV bytes per token (its shape is what moves)."""
        engine = self.config.engine
        source = engine.workers.prefill or engine.workers.aggregated or engine.workers.decode
        if source is None:
            return None
        if source.kv_cache.bytes_per_token == "auto":
            return estimate_bytes_per_token(engine.model, source.parallelism.tensor)
        return source.kv_cache.bytes_per_token


class _Role:
    """What lowering one role knows beyond its own keys: its name, the engine, and the sizes
    that several fields are made of."""

    def __init__(self, lowering: _Lowering, name: RoleName, worker: m.Worker) -> None:
        self.lowering, self.name, self.worker = lowering, name, worker
        self.backend = lowering.config.engine.backend
        kv = worker.kv_cache
        self.block_size = kv.block_size or block_size_default(self.backend)
        if kv.bytes_per_token == "auto":
            # KV cache groups size their pages themselves: no per-token estimate is written
            # (the reference refuses a linear KV size beside groups).
            self.kv_bytes = None if kv.groups is not None else estimate_bytes_per_token(
                lowering.config.engine.model, worker.parallelism.tensor)
        else:
            self.kv_bytes = kv.bytes_per_token
        if kv.groups is not None and kv.capacity.blocks is None:
            # The groups' byte budget is kv_cache_capacity_bytes; the block count stays the
            # native default (the reference sizes nothing from it beside groups).
            self.num_gpu_blocks, self.num_gpu_blocks_is_explicit = NUM_GPU_BLOCKS, False
        else:
            self.num_gpu_blocks, self.num_gpu_blocks_is_explicit = lowering.capacity(
                name, kv.capacity, self.block_size, self.kv_bytes)

    def transfer_bytes(self, given: int | str | None) -> int | None:
        """kv_transfer.bytes_per_token: `auto` is the prefill role's KV bytes per token."""
        if given == "auto":
            return self.lowering.prefill_kv_bytes() if self.name != "aggregated" else self.kv_bytes
        return given if isinstance(given, int) else None

    def host_offload(self, g2: s.HostOffloadOptions | None) -> s.HostOffload | None:
        if g2 is None:
            return None
        layout = None
        if g2.scope == "cluster_shared":
            par = self.worker.parallelism
            layout = derive_layout_id(self.backend, self.block_size, self.kv_bytes, par.tensor,
                                      par.prefill_context, par.decode_context)
        return s.HostOffload(**attrs.asdict(g2, recurse=False), kv_layout_id=layout)


class _Traffic:
    """What lowering the traffic knows beyond each key: the source kind and the load type."""

    def __init__(self, traffic: m.Traffic) -> None:
        source = traffic.source
        self.kind = source.type
        self.load_type = traffic.load.type or load_type_default(self.kind)
        self.format = source.format
        # The trace states its block size (an explicit one must match it).
        self.embedded = source.format in (*s.AGENTIC_FORMATS, "dynamo")
        self.shared = bool(source.shared_prefix_ratio or source.prefix_groups)


def _native(cls: type[T], block: object) -> T:
    """The native block `cls` with the values of the config block's keys of the same names."""
    return cls(**{f.name: getattr(block, f.name) for f in attrs.fields(cls)
                  if hasattr(block, f.name)})


def _sglang(options: m.SglangScheduler | None, backend: str) -> s.SglangOptions | None:
    """Given options (without the rank-level cadence), or the defaults written explicitly for an
    sglang rank."""
    if options is None:
        return s.SglangOptions() if backend == "sglang" else None
    return _native(s.SglangOptions, options)


def _scaling(scaling: m.Scaling | None) -> s.Scaling:
    if scaling is None or scaling.policy is None:
        return s.Scaling()
    if scaling.policy == "planner":
        config = scaling.config if scaling.config is not None else {}
        return s.Scaling("planner", config, canonical_json(config))
    options = _native(ScalingOptions, scaling)
    config = policy_config(scaling.policy, options)
    return s.Scaling(scaling.policy, config, canonical_json(config), options)


def _when(load_type: str) -> Callable[[Any, _Traffic], Any]:
    """The value where the load type reads it; None under the other load types."""
    return lambda value, known: value if known.load_type == load_type else None


# --- the tables ------------------------------------------------------------------------------

# The whole Spec, under the config's top level. `roles` and `traffic` are lowered by the tables
# further down, under engine.workers.<role> and traffic.
SPEC: Mapping[str, From[_Lowering]] = {
    "model": From(("engine", "model")),
    "roles": From(("engine", "workers"), lambda _, lowering: lowering.roles()),
    "mode": From(("engine", "mode")),
    "hardware": From(("engine", "hardware")),
    "backend_version": From(("engine", "backend_version")),
    "handoff_latency_ms": From(("engine", "kv_transfer", "handoff_latency_ms"),
                               lambda ms, _: 0.0 if ms is None else ms),
    "router": From(("router",)),  # the config's router is the Spec's (schema/native_model.py)
    "scaling": From(("scaling",), lambda scaling, _: _scaling(scaling)),
    "max_sim_time_ms": From(("traffic", "stop", "max_virtual_time_seconds"),
                            lambda seconds, _: None if seconds is None else seconds * 1000.0),
    "record_per_request": From(("report", "per_request"), lambda rows, _: rows in (None, "full")),
    "sla": From(("evaluation", "sla")),
    "telemetry": From(("report", "telemetry")),
    "traffic": From(("traffic",), lambda given, lowering: lowering.traffic(given)),
}
NOT_FROM_CONFIG = frozenset({"version"})  # Spec fields no config key sets

# A role, under its worker block engine.workers.<role>.
ROLE: Mapping[str, From[_Role]] = {
    "name": From((), lambda _, role: role.name),  # the block's own key
    "worker_type": From((), lambda _, role: role.name),
    "workers": From(("parallelism", "replicas")),
    "dp_size": From(("parallelism", "attention_data")),
    "tensor_parallel_size": From(("parallelism", "tensor")),
    "pipeline_parallel_size": From(("parallelism", "pipeline")),
    "prefill_context_parallel_size": From(("parallelism", "prefill_context")),
    "decode_context_parallel_size": From(("parallelism", "decode_context")),
    "num_gpu_blocks": From(("kv_cache", "capacity"), lambda _, role: role.num_gpu_blocks),
    "num_gpu_blocks_is_explicit": From(("kv_cache", "capacity"),
                                       lambda _, role: role.num_gpu_blocks_is_explicit),
    "startup_seconds": From(("startup_seconds",)),
    "speculation": From(("speculation",)),  # the config's speculation is the native one
    "block_size": From(("kv_cache", "block_size"), lambda _, role: role.block_size),
    "max_num_seqs": From(("scheduler", "max_sequences"),
                         lambda given, role: given or max_num_seqs_default(role.name)),
    "max_num_batched_tokens": From(("scheduler", "max_batched_tokens")),
    "enable_prefix_caching": From(("kv_cache", "prefix_caching")),
    "enable_chunked_prefill": From(("scheduler", "chunked_prefill")),
    "prefill_schedule_interval": From(("scheduler", "prefill_schedule_interval")),
    "prefill_decode_interval": From(
        ("scheduler", "sglang", "prefill_decode_interval"),
        lambda given, _: RANK_DEFAULTS["prefill_decode_interval"] if given is None else given),
    "preemption_mode": From(("scheduler", "preemption_mode")),
    "speedup_ratio": From(("timing", "speedup_ratio")),
    "decode_speedup_ratio": From(("timing", "decode_speedup_ratio")),
    "kv_cache_bytes_per_token": From(("kv_cache", "bytes_per_token"),
                                     lambda _, role: role.kv_bytes),
    "timing_model": From(("timing",), lambda timing, _: _native(s.Timing, timing)),
    "host_offload": From(("kv_cache", "host_offload"), lambda g2, role: role.host_offload(g2)),
    "g3_offload": From(("kv_cache", "g3_offload")),  # the config's G3 block is the native one
    "state_cache": From(("kv_cache", "state_cache")),  # the config's block is the native one
    "prefix_match_unit": From(("kv_cache", "prefix_match_unit")),
    "kv_cache_groups": From(("kv_cache", "groups")),  # the config's groups are the native ones
    "kv_cache_capacity_bytes": From(("kv_cache", "capacity"), lambda capacity, role: (
        capacity.bytes if role.worker.kv_cache.groups is not None else None)),
    "sglang": From(("scheduler", "sglang"), lambda given, role: _sglang(given, role.backend)),
    "trtllm": From(("scheduler", "trtllm"), lambda given, role: given or (
        s.TrtllmOptions() if role.backend == "trtllm" else None)),
}

# A role's fields that every role takes from `engine`.
ROLE_ENGINE: Mapping[str, From[_Role]] = {
    "backend": From(("backend",)),
    "max_model_len": From(("context_length",),
                          lambda tokens, _: tokens if isinstance(tokens, int) else None),
    "kv_transfer_bytes_per_token": From(("kv_transfer", "bytes_per_token"),
                                        lambda given, role: role.transfer_bytes(given)),
    "kv_transfer_bandwidth": From(("kv_transfer", "bandwidth_gb_per_second")),
    "kv_transfer_timing_mode": From(
        ("kv_transfer", "timing_mode"),
        lambda mode, role: mode if mode is not None else RANK_DEFAULTS["kv_transfer_timing_mode"]
        # the reference's state cache refuses any other mode (aggregated: no handoff to time)
        if role.worker.kv_cache.state_cache is not None
        else m.applied_default(m.KvTransfer, "timing_mode")),
}

# The traffic, under `traffic` (its defaults where the config has none): every source's fields,
# then each source type's own. A field no table of the source sets keeps the Spec's default.
TRAFFIC: Mapping[str, From[_Traffic]] = {
    "source_type": From(("source", "type")),
    "load_type": From(("load", "type"), lambda _, known: known.load_type),
    "concurrency": From(("load", "concurrency"), _when("concurrency")),
    "request_rate": From(("load", "requests_per_second"), or_else=("load", "sessions_per_second")),
    "arrival_seed": From(("load", "seed"), _when("poisson")),
    "speedup": From(("load", "speedup"), _when("trace_timestamps")),
    "agentic_lanes": From(("load", "agentic_lanes")),
    "agentic_snapshot_seed": From(("load", "agentic_snapshot", "seed")),
    "agentic_warmup": From(("load", "agentic_warmup")),
    "agentic_profile": From(("load", "agentic_profile")),
    "stop_requests": From(("stop", "requests")),
    "stop_sessions": From(("stop", "sessions")),
}

TRAFFIC_BY_SOURCE: Mapping[str, Mapping[str, From[_Traffic]]] = {
    "trace": {
        "trace_format": From(("source", "format")),
        "trace_paths": From(("source", "paths")),
        "trace_block_size": From(("source", "block_size"), lambda given, known: given
                                 if given is not None or known.embedded else TRACE_BLOCK_SIZE),
        "weka_nested_timestamp_basis": From(
            ("source", "nested_timestamp_basis"),
            lambda given, known: given or m.applied_default(m.Source, "nested_timestamp_basis")
            if known.format == "weka" else given),
        # Applied Compute sessions' shared prefixes (written only when used).
        "shared_prefix_ratio": From(("source", "shared_prefix_ratio"),
                                    lambda ratio, known: ratio if known.shared else None),
        "num_prefix_groups": From(("source", "prefix_groups"),
                                  lambda groups, known: groups if known.shared else None),
    },
    "synthetic": {
        "input_tokens": From(("source", "input_tokens")),
        "output_tokens": From(("source", "output_tokens")),
        "cached_prefix_tokens": From(("source", "cached_prefix_tokens")),
        # Written only when used, so that configs without a shared prefix keep their bytes.
        "shared_prefix_ratio": From(("source", "shared_prefix_ratio"),
                                    lambda ratio, known: ratio if known.shared else None),
        "num_prefix_groups": From(("source", "prefix_groups"),
                                  lambda groups, known: groups if known.shared else None),
    },
    "synthetic-session": {
        "input_tokens": From(("source", "new_input_tokens_per_turn")),
        "output_tokens": From(("source", "output_tokens_per_turn")),
        "turns_per_session": From(("source", "session", "turns")),
        "shared_prefix_ratio": From(("source", "session", "shared_prefix_ratio")),
        "num_prefix_groups": From(("source", "session", "prefix_groups")),
        "inter_turn_delay_ms": From(("source", "session", "inter_turn_delay_ms")),
    },
}


def lower(config: m.Config, origin: Origin | None = None) -> tuple[s.Spec, list[Diagnostic]]:
    """Lower a config into the Spec, with diagnostics for what only lowering can see."""
    lowering = _Lowering(config, origin)
    spec = lowering.spec()
    return spec, lowering.diagnostics


# --- the inverse: where a Spec field comes from ---------------------------------------------

def source_type(config: m.Config) -> str:
    """The traffic's source type, which decides where its fields come from."""
    return (config.traffic or m.DEFAULT_TRAFFIC).source.type


def _traffic_entry(field: str, kind: str) -> From[_Traffic] | None:
    """The field's entry for this source type; else another type's (the key the field would
    come from there)."""
    found = TRAFFIC.get(field) or TRAFFIC_BY_SOURCE.get(kind, {}).get(field)
    return found or next((t[field] for t in TRAFFIC_BY_SOURCE.values() if field in t), None)


def yaml_path(spec_path: SpecPath, kind: str = "synthetic",
              source: SourceMap | None = None) -> Path:
    """The config path (config.md) a Spec field comes from, for a traffic of source type `kind`
    (what the source writes decides between two keys of one value)."""
    head, rest = spec_path[0], spec_path[1:]
    if head == "roles" and rest:
        block: Path = ("engine", "workers", rest[0])
        if len(rest) == 1:
            return block
        field, tail = rest[1], rest[2:]
        if field in ROLE_ENGINE:
            return ("engine",) + ROLE_ENGINE[field].key(("engine",), source) + tail
        entry = ROLE.get(field)
        return block + (entry.key(block, source) if entry else (field,)) + tail
    if head == "traffic" and rest:
        traffic = _traffic_entry(rest[0], kind)
        key = traffic.key(("traffic",), source) if traffic else (rest[0],)
        return ("traffic",) + key + rest[1:]
    if head == "scaling" and rest[:1] == ("options",):  # a policy's keys sit in `scaling`
        return ("scaling",) + rest[1:]
    top = SPEC.get(head)
    return (top.key((), source) if top else (head,)) + rest


def yaml_origin(source: SourceMap, config: m.Config) -> SourceOrigin:
    """The Origin of a YAML config's Spec: each field at the key lowering read it from."""
    kind = source_type(config)
    return SourceOrigin(source, lambda p: yaml_path(p, kind, source))
