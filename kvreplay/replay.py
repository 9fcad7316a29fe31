"""Running a compiled spec with the bundled engine: capabilities, workload, replay, report.

Shared by `kvreplay run` and `kvreplay.run_spec`. The engine takes the compiled Spec as it is
(kvreplay.engine.Replay: refusals and limits judged once, on the typed spec); the workload is
read from the native document's traffic section (compiled once, Compiled.native()).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from kvreplay.compiler.pipeline import Compiled
from kvreplay.schema.diagnostics import Diagnostic, has_errors, sort_unique
from kvreplay.schema.frozen import evolve

# Where a config (False) or a native spec (True) sets the trace block size and format.
_TRAFFIC_KEYS = {False: ("traffic.source.block_size", "traffic.source.format"),
                 True: ("traffic.trace_block_size", "traffic.trace_format")}


@attrs.frozen
class RunOutcome:
    """A report (None when the run could not happen), the findings, and refusals by capability."""

    report: dict[str, Any] | None
    diagnostics: tuple[Diagnostic, ...] = ()
    refusals: tuple[str, ...] = ()
    error: str | None = None  # an engine failure (stall, unreadable document), one line

    @property
    def ok(self) -> bool:
        return self.report is not None


def replay(
    compiled: Compiled,
    *,
    base_dir: str,
    trace_paths: Sequence[str] | None = None,
    stepwise: bool = False,
    progress: Callable[[float, float | None], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    lifecycle: Callable[[str], None] | None = None,
    stream: bool = False,
    rows: bool | None = None,
    phase: Callable[[str], None] | None = None,
    timed: bool = True,
    scaling_policy: Any = None,
) -> RunOutcome:
    """Replay a compiled spec; raises kvreplay.engine.Interrupted when should_stop() fires.

    `lifecycle` receives the agentic lifecycle transcript, one JSONL line at a time (an error
    when the traffic is not agentic). `stream`: records leave memory as they end (the summary
    is accumulated, rows are spilled to a temporary file and the report's `per_request` is a
    `SpilledRows`; write it with `kvreplay.engine.report_stream.write_report`, then close it).
    `rows`: None lists the rows when the spec's `record_per_request` says so; True lists them
    whatever it says (an export needs them), False never (nothing will read them). `phase`
    hears "building the report" once the replay is done. `timed=False` leaves the wall time
    out of `meta` (null), so that equal runs give equal bytes (sweeps). `scaling_policy`: a
    policy object for a spec without `scaling` (kvreplay.run_spec)."""
    from kvreplay import __version__
    from kvreplay.engine import EngineError, Interrupted, Replay, Unsupported
    from kvreplay.engine.report import report_from_run
    from kvreplay.engine.report_stream import ReportStream
    from kvreplay.engine.traces import WorkloadError, workload_from_traffic

    found = list(compiled.diagnostics)
    spec = compiled.spec
    if spec is None or has_errors(found):
        return RunOutcome(None, tuple(found))
    try:
        engine = Replay(spec)
    except Unsupported as exc:
        return RunOutcome(None, tuple(found), tuple(exc.refusals))
    except EngineError as exc:  # beyond the engine's limits (rules not run)
        return RunOutcome(None, tuple(sort_unique(found)), error=str(exc))
    try:
        # The workload reads the native traffic section (its diagnostics point into it).
        workload = workload_from_traffic(
            compiled.native()["traffic"], base_dir=base_dir, trace_paths=trace_paths,
            block_size=min(role.block_size for role in spec.roles), source_file=compiled.file,
            model=spec.model)
    except WorkloadError as exc:
        from kvreplay.trace_hints import explain_trace_findings  # a trace that did not read

        traffic = compiled.native()["traffic"]
        explained = explain_trace_findings(
            explain_trace_paths(exc.diagnostics, compiled.kind, traffic, base_dir, trace_paths),
            traffic, *_TRAFFIC_KEYS[compiled.kind == "native"])
        return RunOutcome(None, tuple(sort_unique([*found, *explained])))
    found.extend(workload.diagnostics)
    if lifecycle is not None:
        from kvreplay.engine.agentic.driver import AgenticWorkload

        if not isinstance(workload, AgenticWorkload):
            return RunOutcome(None, tuple(sort_unique(found)), error="--lifecycle needs an "
                              "agentic trace (weka or agentic_mooncake)")
        workload.lifecycle.sink = lifecycle
    keep_rows = spec.record_per_request if rows is None else rows
    sink = ReportStream(spec.sla, rows=keep_rows) if stream else None
    started = time.perf_counter()
    try:
        result = engine.run(workload, stepwise=stepwise, progress=progress,
                            should_stop=should_stop, sink=sink, scaling_policy=scaling_policy)
    except BaseException as exc:
        if sink is not None:
            sink.close()
        if isinstance(exc, Unsupported):  # G2 under a policy passed to the run
            return RunOutcome(None, tuple(sort_unique(found)), tuple(exc.refusals))
        if isinstance(exc, EngineError) and not isinstance(exc, Interrupted):
            return RunOutcome(None, tuple(sort_unique(found)), error=str(exc))
        if isinstance(exc, WorkloadError):  # a row re-read during the replay (the file changed)
            return RunOutcome(None, tuple(sort_unique([*found, *exc.diagnostics])))
        raise
    wall_ms = (time.perf_counter() - started) * 1000.0 if timed else None
    if phase is not None:
        phase("building the report")
    if sink is not None:
        report = sink.finish(result, wall_time_ms=wall_ms, version=__version__)
    else:
        report = report_from_run(result, sla=spec.sla, wall_time_ms=wall_ms,
                                 version=__version__, per_request=keep_rows)
    report["meta"].setdefault("stepwise", stepwise)
    report["meta"]["per_request"] = "full" if keep_rows else "summary-only"
    return RunOutcome(report, tuple(sort_unique(found)))


def explain_trace_paths(diagnostics: Sequence[Diagnostic], kind: str, traffic: dict[str, Any],
                        base_dir: str, trace_paths: Sequence[str] | None) -> list[Diagnostic]:
    """A trace that is not where a relative path led says which folder the path was read from
    and why (the config's, the spec's own, or the current one for `--trace`), and how to point
    it elsewhere."""
    if trace_paths is not None:
        written = [(p, os.path.normpath(p)) for p in trace_paths]
        why = f"a --trace path is read from the current folder, {os.getcwd()}"
        hint = None
    elif kind == "native":
        written = [(p, os.path.normpath(os.path.join(base_dir, p)))
                   for p in traffic.get("trace_paths") or [] if isinstance(p, str)]
        why = f"a native spec's trace paths are read relative to the spec's folder, {base_dir}"
        hint = ("give the trace with `kvreplay run SPEC --trace PATH`, or recompile with "
                "`kvreplay compile CONFIG -o SPEC`, which writes the paths relative to SPEC's "
                "folder (a spec written to stdout keeps them relative to the config's folder)")
    else:
        written = [(p, os.path.normpath(os.path.join(base_dir, p)))
                   for p in traffic.get("trace_paths") or [] if isinstance(p, str)]
        why = f"`traffic.source.paths` are read relative to the config's folder, {base_dir}"
        hint = "give the trace with `kvreplay run CONFIG --trace PATH`, or fix the path"
    lost = {shown for given, shown in written
            if not os.path.isabs(given) and not os.path.lexists(shown)}
    return [evolve(d, message=f"{d.message} ({why})", hint=d.hint or hint)
            if d.rule == "TRACE-PATH" and d.span.file in lost else d for d in diagnostics]
