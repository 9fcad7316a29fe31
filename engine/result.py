"""What a run returns besides the per-request records: the facts the report needs."""

from __future__ import annotations

from typing import Any

from kvreplay.engine.records import RequestRecord


class PoolFacts:
    """One worker pool (aggregated, prefill or decode) as it ran."""

    __slots__ = ("backend", "block_size", "dp_size", "gpus_per_worker", "name",
                 "num_gpu_blocks", "pipeline_parallel_size", "tensor_parallel_size", "workers")

    def __init__(self, name: str, workers: int, dp_size: int, tensor_parallel_size: int,
                 pipeline_parallel_size: int, backend: str, block_size: int,
                 num_gpu_blocks: int) -> None:
        self.name = name
        self.workers = workers
        self.dp_size = dp_size
        self.tensor_parallel_size = tensor_parallel_size
        self.pipeline_parallel_size = pipeline_parallel_size
        self.gpus_per_worker = dp_size * tensor_parallel_size * pipeline_parallel_size
        self.backend = backend
        self.block_size = block_size
        self.num_gpu_blocks = num_gpu_blocks

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


class RunFacts:
    """Run-level values: simulated span, pools, counters, and what ran approximately."""

    __slots__ = (
        "approximations",
        "committed_prefill_tokens",
        "duration_ms",
        "end_ms",
        "fast_forwarded_passes",
        "g2_domains",
        "g2_timeline",
        "g3_offload",
        "g3_timeline",
        "has_host_tier",
        "host_transfers",
        "kv_eviction_policy",
        "max_sim_time_ms",
        "mode",
        "passes",
        "pools",
        "preemptions_total",
        "reported_duration_ms",
        "requests_released",
        "requests_terminal",
        "router",
        "scaling",
        "speculation_draws",
        "stepwise",
        "stopped_at_time_cap",
        "telemetry",
        "workload_summary",
    )

    def __init__(self) -> None:
        self.mode = "aggregated"
        self.router = "round_robin"
        self.pools: list[PoolFacts] = []
        self.duration_ms = 0.0  # last terminal time (requests are normalized to start at 0)
        self.reported_duration_ms: float | None = None  # the summary's, when not the default
        self.end_ms = 0.0  # the clock when the run stopped
        self.requests_released = 0
        self.requests_terminal = 0
        self.committed_prefill_tokens = 0  # prompt tokens computed by aggregated/prefill ranks
        self.preemptions_total = 0
        self.passes = 0  # passes executed one by one
        self.fast_forwarded_passes = 0  # passes covered by fast-forwarded decode stretches
        self.stepwise = False
        self.kv_eviction_policy = "lru"
        self.has_host_tier = False  # first_admission_{g1,host}_* stay None without G2
        self.g2_domains: list[dict[str, int]] | None = None  # the shared pool, when there is one
        self.host_transfers: dict[str, Any] | None = None  # G2 copy totals (host_runtime.py)
        self.g2_timeline: dict[str, Any] | None = None  # G2 copies over time (host_timeline.py)
        self.g3_offload: dict[str, Any] | None = None  # the G3 tier's block (g3_runtime.py)
        self.g3_timeline: dict[str, Any] | None = None  # G3 copies over time
        self.workload_summary: dict[str, Any] | None = None  # e.g. the agentic summary keys
        self.approximations: list[str] = []
        self.max_sim_time_ms: float | None = None
        self.stopped_at_time_cap = False  # requests not terminal at the cap have status None
        self.telemetry: dict[str, Any] | None = None  # samples of the engine (telemetry.py)
        # With a scaling policy (scaling.py: ScalingRuntime.finish): ticks, lifecycle
        # operations, replicas over time, provisioned worker seconds per pool.
        self.scaling: dict[str, Any] | None = None
        # MTP ranks' draws (speculation_report.merged_draws): [a] = verifications accepting a.
        self.speculation_draws: tuple[int, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__slots__}
        out["pools"] = [p.to_dict() for p in self.pools]
        return out


class RunResult:
    """Records in workload order (by ordinal) and the run facts. With a record sink, `records`
    holds only those never handed to it (not terminal) and `streamed` counts the others."""

    __slots__ = ("facts", "records", "streamed")

    def __init__(self, records: list[RequestRecord], facts: RunFacts, streamed: int = 0) -> None:
        self.records = records
        self.facts = facts
        self.streamed = streamed
