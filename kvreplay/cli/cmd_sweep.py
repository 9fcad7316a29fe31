"""`kvreplay sweep SWEEP -o DIR`: plan (lint), run every point on an executor, write the reports,
the results table and the best point under the SLA."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence

from kvreplay.cli import exits
from kvreplay.cli.diagnostics_out import print_diagnostics
from kvreplay.io import signals
from kvreplay.io.display import escape_inline
from kvreplay.io.output import say, write_stdout
from kvreplay.schema.diagnostics import Diagnostic


def run(args: argparse.Namespace) -> int:
    from kvreplay.api import matrix_rules
    from kvreplay.compiler.documents import load_text, looks_like_sweep
    from kvreplay.compiler.overrides import OverrideError
    from kvreplay.compiler.reading import read_config_text
    from kvreplay.sweep.plan import plan_sweep

    if args.jobs is not None and args.jobs < 1:
        say("--jobs must be at least 1")
        return exits.USAGE
    if os.path.exists(args.output) and not os.path.isdir(args.output):
        say(f"cannot write results to {args.output}: it is not a folder")
        return exits.USAGE
    if args.html is not None:
        from kvreplay.io.output import Output

        args.html = args.html or os.path.join(args.output, "sweep.html")
        Output(args.html, [("the sweep file", args.sweep)])  # refused now, not after the run
    text, problems = read_config_text(args.sweep)
    if text is None:
        print_diagnostics([(args.sweep, None, problems)], args)
        return exits.USAGE
    kind, loaded = load_text(text, args.sweep)
    if loaded.data is None and loaded.diagnostics:  # unparsable: say where, not what it lacks
        print_diagnostics([(args.sweep, text, list(loaded.diagnostics))], args)
        return exits.for_diagnostics(loaded.diagnostics) or exits.FINDINGS
    if kind != "yaml" or not looks_like_sweep(loaded.data):
        say(f"{args.sweep} is not a sweep file (it needs `kind: sweep`, a `base` and a `grid` or "
            "`points`; docs/sweeps.md)")
        return exits.USAGE
    try:
        plan = plan_sweep(loaded, rules=matrix_rules(), overrides=args.overrides)
    except OverrideError as exc:
        say(str(exc))
        return exits.USAGE
    print_diagnostics([(plan.file, plan.text, _unsuppressed(plan.diagnostics, plan.text,
                                                           plan.file))], args)
    if not plan.ok:
        return exits.for_diagnostics(plan.diagnostics) or exits.FINDINGS
    _refuse_outputs(args, loaded.data.get("base"), plan)
    return _run(plan, args)


def _refuse_outputs(args: argparse.Namespace, base: object, plan: object) -> None:
    """OutputError (exit 2) before any point runs if a file the sweep writes (the tables, a
    report already in the folder, the --html page) is one of its inputs, or lies inside a
    trace folder."""
    from kvreplay.cli.cmd_report import sweep_tables
    from kvreplay.io.output import Inputs, Output
    from kvreplay.sweep.model import SweepPlan
    from kvreplay.sweep.store import REPORTS

    assert isinstance(plan, SweepPlan)
    inputs = Inputs([("the sweep file", args.sweep)])
    if isinstance(base, str):
        inputs.add("the base config", os.path.join(os.path.dirname(args.sweep), base))
    for trace in plan.traces:
        inputs.add("the trace", trace.path)
    tables = sweep_tables(args.output)
    for path in tables:
        Output(path, inputs)
    with contextlib.suppress(OSError), os.scandir(os.path.join(args.output, REPORTS)) as found:
        for entry in found:
            if entry.is_file():
                Output(entry.path, inputs)
    if args.html is not None:
        for path in tables:
            inputs.add("the sweep results file", path)
        Output(args.html, inputs)


def _unsuppressed(found: Sequence[Diagnostic], text: str | None, file: str) -> list[Diagnostic]:
    """The findings `kvreplay lint` would show, inline `# kvreplay: ignore[...]` comments
    applied; an error stays, suppressed or not: the sweep cannot run past it."""
    from kvreplay import suppressions
    from kvreplay.schema.diagnostics import sort_unique

    kept = suppressions.apply(found, text, file)
    shown = set(kept)
    errors = [d for d in found if d.severity == "error" and d not in shown]
    return sort_unique([*kept, *errors])


def _run(plan: object, args: argparse.Namespace) -> int:
    from kvreplay.cli.sweep_progress import SweepProgress
    from kvreplay.sweep.executors import ExecutorUnavailable
    from kvreplay.sweep.model import SweepPlan
    from kvreplay.sweep.run import SweepOptions, run_sweep

    assert isinstance(plan, SweepPlan)
    options = SweepOptions(args.output, args.executor, args.jobs, args.address,
                           args.trace_transport, force=args.force,
                           say=None if args.quiet else say)
    show = SweepProgress(enabled=not args.no_progress and not args.quiet,
                         tty=sys.stderr.isatty())
    try:
        outcome = run_sweep(plan, options, progress=show)
    except ExecutorUnavailable as exc:
        say(str(exc))
        return exits.USAGE
    except signals.STOPS as exc:  # the table of what finished is written: say how to go on
        show.close()
        code = exits.stopped(exc)
        say(f"the finished points are kept in {args.output}; rerun the same command to resume")
        return code
    finally:
        show.close()
    if outcome.diagnostics:
        print_diagnostics([(None, None, outcome.diagnostics)], args)
        return exits.for_diagnostics(outcome.diagnostics) or exits.USAGE
    statuses = [r["status"] for r in outcome.rows]
    failed = statuses.count("failed")
    if outcome.changed:
        say(f"{outcome.changed} report(s) in {args.output} did not match the digest recorded "
            "when the sweep wrote them (edited or cut since): run again")
    for note in outcome.notes:
        say(f"note: {note}")
    if args.html is not None:
        from kvreplay.cli.cmd_report import sweep_page

        code = sweep_page(args.output, args.html)
        if code != exits.OK:
            return code
    if args.format == "json":
        from kvreplay.sweep.best import best_text

        write_stdout(best_text(outcome.best))
    elif not args.quiet:
        runs = f" x {len(plan.traces)} traces" if len(plan.traces) > 1 else ""
        retried = f"; {outcome.stats.retried} run(s) retried" if outcome.stats.retried else ""
        parquet = os.path.exists(os.path.join(args.output, "results.parquet"))
        write_stdout(
            f"{len(plan.points)} points{runs}: {statuses.count('ok')} ok ({outcome.resumed} "
            f"already done), {statuses.count('skipped')} skipped, {failed} failed{retried}\n"
            f"results: {escape_inline(os.path.join(args.output, 'results.csv'))} (and .jsonl"
            f"{', .parquet' if parquet else ''}), best.json, sweep.json, reports/\n"
            + (f"page: {escape_inline(args.html)}\n" if args.html is not None else "") +
            f"best: {escape_inline(outcome.best['explanation'])}\n")
    return exits.FINDINGS if failed else exits.OK
