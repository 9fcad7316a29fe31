"""`run_native`: execute a canonical native document over a workload."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kvreplay.engine.capabilities import approximations, refusals
from kvreplay.engine.config import read_engine_spec
from kvreplay.engine.errors import Unsupported
from kvreplay.engine.loop import Simulation
from kvreplay.engine.records import RequestRecord
from kvreplay.engine.result import RunResult
from kvreplay.engine.traces.request import Workload


def run_native(
    document: Mapping[str, Any],
    *,
    workload: Workload,
    stepwise: bool = False,
    progress: Callable[[float, float | None], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    sink: Callable[[RequestRecord], None] | None = None,
) -> RunResult:
    """Replay `workload` on the deployment `document` describes; return records and run facts.

    Raises `Unsupported` (one message per feature the engine does not execute) before doing
    anything, `EngineConfigError` for a document it cannot read, `Interrupted` (carrying the
    partial result) when `should_stop()` turns true between events, and `ReplayStalled` when
    requests are left that nothing can ever move. `progress(sim_time_ms, fraction)` is called
    every few thousand events and once at the end; fraction is terminal/total when the workload
    has a `total_requests` attribute, else None. `stepwise=True` disables fast-forwarding of
    pure decode stretches (same records, slower). The core reads no files itself (the workload
    is built by the caller, which resolves trace paths). `sink` takes each measured record as it
    becomes terminal (times already relative to the measured window); the result then keeps only
    the records that never ended.
    """
    refused = refusals(document)
    if refused:
        raise Unsupported(refused)
    cfg = read_engine_spec(document)
    simulation = Simulation(cfg, workload, stepwise=stepwise, progress=progress,
                            should_stop=should_stop, approximations=approximations(document),
                            sink=sink)
    return simulation.run()
