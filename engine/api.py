"""The engine's entry points: `run_spec` replays a typed Spec over a workload; `run_native` reads
a canonical native document into one first."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kvreplay.engine.capabilities import approximations, refusals, scaling_refusals
from kvreplay.engine.config import check_spec, read_engine_spec
from kvreplay.engine.errors import Unsupported
from kvreplay.engine.loop import Simulation
from kvreplay.engine.policies import scaling_for
from kvreplay.engine.records import RequestRecord
from kvreplay.engine.result import RunResult
from kvreplay.engine.scaling import ScalingPolicy
from kvreplay.engine.traces.request import Workload
from kvreplay.schema.spec import Spec


class Replay:
    """A spec the engine accepted, ready to replay workloads: `Replay(spec)` raises
    `Unsupported` (one message per feature the engine does not execute) or `EngineConfigError`
    (a spec beyond the engine's limits, config.check_spec) before anything runs."""

    __slots__ = ("approximations", "spec")

    def __init__(self, spec: Spec) -> None:
        refused = refusals(spec)
        if refused:
            raise Unsupported(refused)
        check_spec(spec)
        self.spec = spec
        self.approximations = approximations(spec)

    def run(self, workload: Workload, *, stepwise: bool = False,
            progress: Callable[[float, float | None], None] | None = None,
            should_stop: Callable[[], bool] | None = None,
            sink: Callable[[RequestRecord], None] | None = None,
            scaling_policy: ScalingPolicy | None = None) -> RunResult:
        """Replay `workload`; see `run_spec`."""
        policy = scaling_for(self.spec, scaling_policy)
        if scaling_policy is not None and scaling_refusals(self.spec):
            raise Unsupported(scaling_refusals(self.spec))
        simulation = Simulation(self.spec, workload, stepwise=stepwise, progress=progress,
                                should_stop=should_stop, approximations=self.approximations,
                                sink=sink, scaling_policy=policy)
        return simulation.run()


def run_spec(
    spec: Spec,
    *,
    workload: Workload,
    stepwise: bool = False,
    progress: Callable[[float, float | None], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    sink: Callable[[RequestRecord], None] | None = None,
    scaling_policy: ScalingPolicy | None = None,
) -> RunResult:
    """Replay `workload` on the deployment `spec` describes; return records and run facts.

    Raises what `Replay(spec)` raises before doing anything, `Interrupted` (carrying the partial
    result) when `should_stop()` turns true between events, and `ReplayStalled` when requests
    are left that nothing can ever move. `progress(sim_time_ms, fraction)` is called every few
    thousand events and once at the end; fraction is the workload's `progress_fraction`, else
    terminal/total when it knows its `total_requests`, else None. `stepwise=True` disables
    fast-forwarding of pure decode stretches (same records, slower). The core reads no files
    itself (the workload is built by the caller, which resolves trace paths). `sink` takes each
    measured record as it becomes terminal (times already relative to the measured window); the
    result then keeps only the records that never ended. `scaling_policy`: an object with the
    reference's scaling protocol (kvreplay.engine.scaling.ScalingPolicy) drives the pools'
    sizes, for a spec without a scaling section of its own (a kvreplay policy in the spec runs
    without it); a bad answer raises ScalingPolicyError.
    """
    return Replay(spec).run(workload, stepwise=stepwise, progress=progress,
                            should_stop=should_stop, sink=sink, scaling_policy=scaling_policy)


def run_native(
    document: Mapping[str, Any],
    *,
    workload: Workload,
    stepwise: bool = False,
    progress: Callable[[float, float | None], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    sink: Callable[[RequestRecord], None] | None = None,
    scaling_policy: ScalingPolicy | None = None,
) -> RunResult:
    """`run_spec` of a native document, read by config.read_engine_spec (`EngineConfigError`
    for a document the engine cannot read, naming the problem by its JSON pointer)."""
    return run_spec(read_engine_spec(document), workload=workload, stepwise=stepwise,
                    progress=progress, should_stop=should_stop, sink=sink,
                    scaling_policy=scaling_policy)
