"""Lowering the config model into the normalized Spec (the one model all entry points share)."""

from __future__ import annotations

from typing import Literal, TypeVar

import attrs

from kvreplay.compiler import model as m
from kvreplay.compiler.kv_bytes import estimate_bytes_per_token
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
from kvreplay.schema.origin import Origin
from kvreplay.schema.spec import canonical_json

T = TypeVar("T", bound=attrs.AttrsInstance)

class _Lowering:
    def __init__(self, config: m.Config, origin: Origin | None) -> None:
        self.config = config
        self.origin = origin
        self.diagnostics: list[Diagnostic] = []

    def error(self, rule: str, message: str, at: tuple[str, ...], hint: str | None = None) -> None:
        span = self.origin.span(at) if self.origin else Span()
        self.diagnostics.append(Diagnostic(rule, "error", message, span, hint=hint))

    # --- roles ----------------------------------------------------------------------------

    def role(self, name: RoleName, worker: m.Worker) -> s.Role:
        engine = self.config.engine
        kv = worker.kv_cache
        par = worker.parallelism
        sched = worker.scheduler
        block_size = kv.block_size or block_size_default(engine.backend)
        if kv.bytes_per_token == "auto":
            kv_bytes = estimate_bytes_per_token(engine.model, par.tensor)
        else:
            kv_bytes = kv.bytes_per_token
        num_blocks, explicit = self.capacity(name, kv.capacity, block_size, kv_bytes)
        transfer = engine.kv_transfer
        t_bytes: int | None = None
        t_bandwidth: float | None = None
        t_mode: Literal["destination_missing", "full_prompt"] = m.applied_default(
            m.KvTransfer, "timing_mode")
        if transfer is not None:
            if transfer.bytes_per_token == "auto":
                t_bytes = self.prefill_kv_bytes() if name != "aggregated" else kv_bytes
            else:
                t_bytes = transfer.bytes_per_token
            t_bandwidth = transfer.bandwidth_gb_per_second
            t_mode = transfer.timing_mode
        return s.Role(
            name=name,
            worker_type=name,
            workers=par.replicas,
            dp_size=par.attention_data,
            tensor_parallel_size=par.tensor,
            pipeline_parallel_size=par.pipeline,
            prefill_context_parallel_size=par.prefill_context,
            decode_context_parallel_size=par.decode_context,
            num_gpu_blocks_is_explicit=explicit,
            startup_seconds=worker.startup_seconds,
            speculation=worker.speculation,  # the config's speculation is the native one
            backend=engine.backend,
            block_size=block_size,
            num_gpu_blocks=num_blocks,
            max_num_seqs=sched.max_sequences or max_num_seqs_default(name),
            max_num_batched_tokens=sched.max_batched_tokens,
            max_model_len=engine.context_length if isinstance(engine.context_length, int) else None,
            enable_prefix_caching=kv.prefix_caching,
            enable_chunked_prefill=sched.chunked_prefill,
            prefill_schedule_interval=sched.prefill_schedule_interval,
            prefill_decode_interval=sched.sglang.prefill_decode_interval if sched.sglang
            else RANK_DEFAULTS["prefill_decode_interval"],
            preemption_mode=sched.preemption_mode,
            speedup_ratio=worker.timing.speedup_ratio,
            decode_speedup_ratio=worker.timing.decode_speedup_ratio,
            kv_cache_bytes_per_token=kv_bytes,
            kv_transfer_bytes_per_token=t_bytes,
            kv_transfer_bandwidth=t_bandwidth,
            kv_transfer_timing_mode=t_mode,
            timing_model=_native(s.Timing, worker.timing),
            host_offload=self.host_offload(kv.host_offload, engine.backend, block_size, kv_bytes,
                                           par),
            g3_offload=kv.g3_offload,  # the config's G3 block is the native one
            sglang=_sglang(sched.sglang, engine.backend),
            trtllm=sched.trtllm or (s.TrtllmOptions() if engine.backend == "trtllm" else None),
        )

    def prefill_kv_bytes(self) -> int | None:
        """kv_transfer `auto`: the prefill role's KV bytes per token (its shape is what moves)."""
        engine = self.config.engine
        source = engine.workers.prefill or engine.workers.aggregated or engine.workers.decode
        if source is None:
            return None
        if source.kv_cache.bytes_per_token == "auto":
            return estimate_bytes_per_token(engine.model, source.parallelism.tensor)
        return source.kv_cache.bytes_per_token

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

    def host_offload(self, g2: s.HostOffloadOptions | None, backend: str, block_size: int,
                     kv_bytes: int | None, par: m.Parallelism) -> s.HostOffload | None:
        if g2 is None:
            return None
        layout = None
        if g2.scope == "cluster_shared":
            layout = derive_layout_id(backend, block_size, kv_bytes, par.tensor,
                                      par.prefill_context, par.decode_context)
        return s.HostOffload(**attrs.asdict(g2, recurse=False), kv_layout_id=layout)

    # --- traffic --------------------------------------------------------------------------

    def traffic(self) -> s.Traffic:
        t = self.config.traffic or m.DEFAULT_TRAFFIC
        src, load, stop = t.source, t.load, t.stop
        kind = src.type
        load_type = load.type or load_type_default(kind)
        fields: dict[str, object] = {
            "source_type": kind,
            "load_type": load_type,
            "concurrency": load.concurrency if load_type == "concurrency" else None,
            "request_rate": load.requests_per_second or load.sessions_per_second,
            "arrival_seed": load.seed if load_type == "poisson" else None,
            "speedup": load.speedup if load_type == "trace_timestamps" else None,
            "agentic_lanes": load.agentic_lanes,
            "agentic_snapshot_seed": load.agentic_snapshot.seed if load.agentic_snapshot else None,
            "agentic_warmup": load.agentic_warmup,
            "agentic_profile": load.agentic_profile,
            "stop_requests": stop.requests,
            "stop_sessions": stop.sessions,
            "input_tokens": None,
            "output_tokens": None,
            "cached_prefix_tokens": None,
        }
        if kind == "trace":
            embedded = src.format in s.AGENTIC_FORMATS
            fields.update(
                trace_format=src.format,
                trace_paths=src.paths,
                trace_block_size=src.block_size
                if src.block_size is not None or embedded
                else TRACE_BLOCK_SIZE,
                weka_nested_timestamp_basis=src.nested_timestamp_basis
                or m.applied_default(m.Source, "nested_timestamp_basis")
                if src.format == "weka"
                else src.nested_timestamp_basis,
            )
        elif kind == "synthetic":
            shared = bool(src.shared_prefix_ratio or src.prefix_groups)
            fields.update(
                input_tokens=src.input_tokens,
                output_tokens=src.output_tokens,
                cached_prefix_tokens=src.cached_prefix_tokens,
                # Written only when used, so that configs without a shared prefix keep their bytes.
                shared_prefix_ratio=src.shared_prefix_ratio if shared else None,
                num_prefix_groups=src.prefix_groups if shared else None,
            )
        else:
            fields.update(
                input_tokens=src.new_input_tokens_per_turn,
                output_tokens=src.output_tokens_per_turn,
                turns_per_session=src.session.turns,
                shared_prefix_ratio=src.session.shared_prefix_ratio,
                num_prefix_groups=src.session.prefix_groups,
                inter_turn_delay_ms=src.session.inter_turn_delay_ms,
            )
        if kind != "trace" and self.config.traffic is not None:
            self.check_rate_unit(kind, load)
        return s.Traffic(**fields)  # type: ignore[arg-type]

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

    # --- whole spec -----------------------------------------------------------------------

    def spec(self) -> s.Spec:
        c = self.config
        engine = c.engine
        roles = tuple(self.role(name, w) for name, w in engine.workers.present())
        scaling = s.Scaling()
        if c.scaling is not None:
            config = c.scaling.config if c.scaling.config is not None else {}
            scaling = s.Scaling("planner", config, canonical_json(config))
        stop = (c.traffic or m.DEFAULT_TRAFFIC).stop
        sla = c.evaluation.sla if c.evaluation is not None else None
        return s.Spec(
            model=engine.model,
            roles=roles,
            mode=engine.mode,
            hardware=engine.hardware,
            backend_version=engine.backend_version,
            handoff_latency_ms=engine.kv_transfer.handoff_latency_ms if engine.kv_transfer else 0.0,
            router=c.router,  # the config's router is the Spec's (schema/native_model.py)
            scaling=scaling,
            max_sim_time_ms=None
            if stop.max_virtual_time_seconds is None
            else stop.max_virtual_time_seconds * 1000.0,
            sla=sla,
            record_per_request=c.report is None or c.report.per_request == "full",
            traffic=self.traffic(),
        )


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


def lower(config: m.Config, origin: Origin | None = None) -> tuple[s.Spec, list[Diagnostic]]:
    """Lower a config into the Spec, with diagnostics for what only lowering can see."""
    lowering = _Lowering(config, origin)
    spec = lowering.spec()
    return spec, lowering.diagnostics
