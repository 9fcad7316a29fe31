"""Running a planned sweep: resume what is done, run the rest on an executor, write the reports
as they finish and the table and the best point at the end (or when interrupted)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

import attrs

from kvreplay.schema.diagnostics import Diagnostic, Span
from kvreplay.sweep.best import best_text, choose_best
from kvreplay.sweep.executors import Backend, ExecutorUnavailable, Stats, execute
from kvreplay.sweep.model import SweepPlan, Trace
from kvreplay.sweep.results import Row, csv_text, jsonl_text, make_row, parquet_bytes
from kvreplay.sweep.store import (
    REPORTS,
    finished_summary,
    report_digest,
    report_name,
    report_path,
    write_atomic,
)
from kvreplay.sweep.task import PointJob, PointResult, trace_digest


@attrs.frozen
class SweepOptions:
    out_dir: str
    executor: str = "local"  # "local" | "ray"
    jobs: int | None = None  # local default: os.cpu_count(); ray default: the cluster's CPUs
    address: str | None = None
    trace_transport: str = "object-store"  # ray: "object-store" | "path"
    force: bool = False  # replace the table of another sweep's results folder
    say: Callable[[str], None] | None = None  # what the sweep waits for (one line each)


@attrs.frozen
class Progress:
    done: int  # point runs finished this time (resumed ones are not counted)
    total: int
    failed: int
    elapsed_s: float

    def eta_s(self) -> float | None:
        if not self.done or self.done >= self.total:
            return None
        return self.elapsed_s / self.done * (self.total - self.done)


@attrs.define
class SweepOutcome:
    rows: list[Row]
    best: dict[str, Any]
    stats: Stats
    resumed: int = 0
    to_run: int = 0
    diagnostics: tuple[Diagnostic, ...] = ()  # trace problems: nothing was run
    changed: int = 0  # reports found but edited since written (or unrecorded): run again
    notes: list[str] = attrs.Factory(list)  # said once on stderr (sweep.json keeps their gist)


def run_sweep(plan: SweepPlan, options: SweepOptions, *,
              progress: Callable[[Progress], None] | None = None,
              on_result: Callable[[PointJob, PointResult], None] | None = None) -> SweepOutcome:
    """Run every runnable point of a plan without errors; raises ExecutorUnavailable, and
    KeyboardInterrupt (or the CLI's Terminated) after writing a consistent partial table."""
    from kvreplay import __version__

    traces, problems = _checked_traces(plan)
    if problems:
        return SweepOutcome([], {}, Stats(), diagnostics=problems)
    recorded = _previous(plan, options)
    digests: dict[str, str] = {}  # report path (as rows name it) -> digest of its bytes
    changed = 0
    runs: list[Trace | None] = [*traces] or [None]
    several = len(runs) > 1
    rows: list[Row] = []
    jobs: dict[str, PointJob] = {}
    waiting: dict[str, list[int]] = {}  # report name -> rows it completes
    resumed = 0
    refused = _refusals(plan)
    for point in plan.points:
        for trace in runs:
            label = trace.label if trace else None
            digest = traces[trace] if trace else None
            if point.status != "ok" or point.index in refused:
                rules = point.rules if point.status != "ok" else ("SWEEP-UNSUPPORTED",)
                message = point.message if point.status != "ok" else refused[point.index]
                rows.append(make_row(plan, point.index, label, status="skipped", rules=rules,
                                     error=message, trace_digest=digest))
                continue
            assert point.spec_digest is not None and point.native is not None
            name = report_name(point.spec_digest, digest, several)
            where = os.path.join(options.out_dir, REPORTS, f"{name}.json")
            shown = report_path(name)
            summary = finished_summary(where, point.spec_digest, digest, __version__,
                                       recorded.get(shown))
            if summary is None and name not in jobs and shown in recorded \
                    and os.path.lexists(where):  # written by a sweep, edited or cut since
                changed += 1
            if summary is not None:
                digests[shown] = recorded[shown]
                resumed += 1
                rows.append(make_row(plan, point.index, label, status="ok", trace_digest=digest,
                                     report=report_path(name), summary=summary))
                continue
            rows.append(make_row(plan, point.index, label, status="pending", trace_digest=digest))
            waiting.setdefault(name, []).append(len(rows) - 1)
            jobs.setdefault(name, PointJob(name, point.native, point.spec_digest, digest,
                                           trace.path if trace else None,
                                           os.path.splitext(trace.path)[1] if trace else ""))
    # Started before anything is written: an executor that cannot start leaves no trace.
    backend = _backend(options, len(jobs), traces) if jobs else None
    _make_folder(os.path.join(options.out_dir, REPORTS))
    outcome = SweepOutcome(rows, {}, Stats(), resumed, len(jobs), changed=changed)
    started = time.perf_counter()
    finished = 0

    def done(job: PointJob, result: PointResult) -> None:
        nonlocal finished
        finished += 1
        if result.ok:
            assert result.report_text is not None
            data = result.report_text.encode("utf-8")
            write_atomic(os.path.join(options.out_dir, REPORTS, f"{job.name}.json"), data)
            digests[report_path(job.name)] = report_digest(data)
        for i in waiting[job.name]:
            old = rows[i]
            rows[i] = make_row(plan, old["point"], old["trace"],
                               status="ok" if result.ok else "failed",
                               error=result.error, trace_digest=job.trace_digest,
                               report=report_path(job.name) if result.ok else None,
                               summary=result.summary)
        if on_result is not None:
            on_result(job, result)
        tick()

    def tick() -> None:
        if progress is not None:
            progress(Progress(finished, len(jobs), sum(r["status"] == "failed" for r in rows),
                              time.perf_counter() - started))

    complete = False
    try:
        if backend is not None:
            try:
                outcome.stats = execute(list(jobs.values()), backend, done, tick=tick,
                                        version=__version__)
            except BaseException:
                backend.close(kill=True)
                raise
            backend.close(kill=False)
        complete = True
    finally:
        outcome.best = write_tables(plan, rows, options.out_dir, complete=complete,
                                    digests=digests, notes=outcome.notes)
    return outcome


# What a sweep writes in its results folder, besides reports/<name>.json.
WRITTEN = ("results.jsonl", "results.csv", "results.parquet", "best.json", "sweep.json",
           "sweep.html")


def _previous(plan: SweepPlan, options: SweepOptions) -> dict[str, str]:
    """The report digests the sweep that wrote the folder recorded (none for a new folder).

    Refused (OutputError): a symlink where the sweep writes (it would write outside the
    folder), and, without --force, a folder holding the results of another sweep file."""
    from kvreplay.io.output import OutputError
    from kvreplay.sweep.folder import ResultsError, read_manifest
    from kvreplay.sweep.manifest import manifest, shown_path

    out = options.out_dir
    _refuse_links(out)
    try:
        previous = read_manifest(out) if os.path.isdir(out) else None
    except ResultsError as exc:
        if not options.force:
            raise OutputError(f"refusing to write in {out}: {exc} (--force replaces it)") \
                from None
        return {}
    if previous is None:
        return {}
    ours = manifest(plan, [], {})
    if previous["sweep"] != shown_path(plan.file) and previous["sweep_digest"] != \
            ours["sweep_digest"] and not options.force:
        raise OutputError(
            f"refusing to write in {out}: it holds the results of another sweep "
            f"({previous['sweep']}, sha256 {previous['sweep_digest']}), whose table this "
            "sweep would replace; use another -o folder, or --force to replace it (its "
            "reports are kept)")
    return dict(previous.get("reports", {}))


def _refuse_links(out: str) -> None:
    from kvreplay.io.output import OutputError

    names = [os.path.join(out, n) for n in (REPORTS, *WRITTEN)]
    folder = os.path.join(out, REPORTS)
    if os.path.isdir(folder) and not os.path.islink(folder):
        with os.scandir(folder) as entries:
            names.extend(e.path for e in entries if e.name.endswith(".json") and e.is_symlink())
    for path in names:
        if os.path.islink(path):
            raise OutputError(
                f"refusing to write in {out}: {path} is a symlink (to {os.readlink(path)}); a "
                "sweep writes its results only inside the folder: remove the link, or use "
                "another -o folder")


def _make_folder(path: str) -> None:
    from kvreplay.io.output import OutputError

    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create {path}: {exc.strerror or exc}") from None


def write_tables(plan: SweepPlan, rows: list[Row], out_dir: str, *,
                 complete: bool, digests: dict[str, str],
                 notes: list[str] | None = None) -> dict[str, Any]:
    """results.csv, results.jsonl, results.parquet (with pyarrow), best.json and sweep.json;
    `notes` hears why results.parquet is missing when pyarrow is installed but does not import
    (sweep.json says so too), or that an earlier run's was removed."""
    from kvreplay.io import signals
    from kvreplay.io.output import write_files
    from kvreplay.sweep.manifest import MANIFEST, manifest

    best = choose_best(plan, rows, complete=complete)
    with signals.deferred():  # a second Ctrl-C waits until the table is consistent
        tables: list[tuple[str, str | bytes]] = [
            ("results.jsonl", jsonl_text(rows)), ("results.csv", csv_text(rows))]
        told, kept = _parquet(rows, tables)
        tables.append(("best.json", best_text(best)))
        shown = manifest(plan, rows, digests)
        if kept:
            shown["notes"] = kept
        tables.append((MANIFEST, json.dumps(shown, indent=2, ensure_ascii=False) + "\n"))
        # Published together: a full disk leaves the previous tables, all of them.
        write_files([(os.path.join(out_dir, name), text) for name, text in tables],
                    follow_symlinks=False)
        stale = os.path.join(out_dir, PARQUET)
        if all(name != PARQUET for name, _ in tables) and os.path.lexists(stale):
            os.remove(stale)  # an earlier run's: it would not hold this table
            told.append(f"removed {stale} from an earlier run: it would not match this table")
    if notes is not None:
        notes.extend(told)
    return best


PARQUET = "results.parquet"


def _parquet(rows: list[Row], tables: list[tuple[str, str | bytes]]) -> tuple[list[str],
                                                                              list[str]]:
    """results.parquet added to `tables` when pyarrow imports; else (the note to say, the note
    sweep.json keeps) when pyarrow is installed but does not import (nothing when it is
    absent: Parquet is an optional extra)."""
    from kvreplay.exports import REINSTALL, pyarrow_problem

    problem = pyarrow_problem()
    if problem is None:
        tables.append((PARQUET, parquet_bytes(rows)))
        return [], []
    installed, why = problem
    if not installed:
        return [], []
    said = f"{PARQUET} was not written: pyarrow is installed but does not import"
    # sweep.json holds no absolute path: the exception's type, not its words.
    return [f"{said} ({why}); {REINSTALL}"], [f"{said} ({why.split(':')[0]}); {REINSTALL}"]


def _checked_traces(plan: SweepPlan) -> tuple[dict[Trace, str], tuple[Diagnostic, ...]]:
    """Each trace's content digest, after checking it once with the traffic of the first
    runnable point (a bad trace stops the sweep before any point runs)."""
    from kvreplay.engine.traces import check_traffic

    first = next((p for p in plan.points if p.native is not None), None)
    digests: dict[Trace, str] = {}
    found: list[Diagnostic] = []
    for trace in plan.traces:
        if first is not None and first.native is not None:
            traffic = json.loads(first.native).get("traffic") or {}
            found.extend(d for d in check_traffic(traffic, base_dir=os.getcwd(),
                                                  trace_paths=[trace.path])
                         if d.severity == "error")
        if not found:
            try:
                digests[trace] = trace_digest(trace.path)
            except OSError as exc:
                found.append(Diagnostic("TRACE-PATH", "error", f"cannot read the trace: "
                                        f"{exc.strerror or exc}", Span(file=trace.path)))
    return digests, tuple(found)


def _refusals(plan: SweepPlan) -> dict[int, str]:
    """Points the bundled engine does not run (capability refusals), by index."""
    from kvreplay.engine import refusals

    out: dict[int, str] = {}
    for point in plan.points:
        if point.native is not None:
            refused = refusals(json.loads(point.native))
            if refused:
                out[point.index] = "; ".join(refused)
    return out


def _backend(options: SweepOptions, count: int, traces: dict[Trace, str]) -> Backend:
    if options.executor == "ray":
        from kvreplay.sweep.executors import RayBackend

        shipped = {digest: (t.path, os.path.splitext(t.path)[1]) for t, digest in traces.items()}
        if options.trace_transport == "object-store":
            folders = [t.label for t in traces if os.path.isdir(t.path)]
            if folders:
                raise ExecutorUnavailable(f"the object-store transport ships trace files; "
                                          f"{folders[0]} is a folder: use --trace-transport path")
        return RayBackend(options.jobs, options.address, options.trace_transport, shipped,
                          say=options.say)
    from kvreplay.sweep.executors import LocalBackend

    return LocalBackend(min(options.jobs or os.cpu_count() or 1, count))
