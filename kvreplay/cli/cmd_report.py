"""`kvreplay report REPORT... -o OUT`: the self-contained HTML report of one or more runs, or
`kvreplay report DIR -o OUT`: the page of a sweep's results folder."""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from kvreplay.cli import exits
from kvreplay.io.display import escape_inline
from kvreplay.io.output import Output, say, write_stderr, write_stdout


def run(args: argparse.Namespace) -> int:
    code = _render(args)
    if code == exits.OK and args.output and not args.quiet and args.output != "-":
        what = "sweep page" if any(os.path.isdir(p) for p in args.reports) else "HTML report"
        write_stdout(f"{what} written to {escape_inline(args.output)}\n")
    return code


def _render(args: argparse.Namespace) -> int:
    from kvreplay.html import ReportShapeError, render_html
    from kvreplay.report_file import ReportInputError, load_report

    if not args.output and sys.stdout.isatty():
        suggested = shlex.join(["kvreplay", "report", *args.reports, "-o", _html_name(args)])
        say(f"the HTML page is not printed to a terminal: write it to a file with -o "
            f"(`{suggested}`), or redirect stdout")
        return exits.USAGE
    folders = [p for p in args.reports if os.path.isdir(p)]
    if folders:
        if len(args.reports) > 1 or args.label:
            write_stderr(f"kvreplay: {escape_inline(folders[0])} is a sweep results folder: its "
                         "page is "
                         "rendered alone, without other reports or --label\n")
            return exits.USAGE
        return sweep_page(folders[0], args.output or "-")
    if len(args.label) > len(args.reports):
        write_stderr(f"kvreplay: {len(args.label)} --label for {len(args.reports)} report(s)\n")
        return exits.USAGE
    labels = run_labels(args.reports, args.label)
    with Output(args.output or "-", [("the report", p) for p in args.reports]) as out:
        runs = []
        for path, label in zip(args.reports, labels, strict=True):
            try:
                runs.append((label, load_report(path)))
            except ReportInputError as exc:
                write_stderr(f"kvreplay: {escape_inline(str(exc))}\n")
                return exits.USAGE
        try:
            text = render_html(runs)
        except ReportShapeError as exc:
            where = args.reports[exc.run or 0]
            write_stderr(escape_inline(f"kvreplay: {where}: not a kvreplay report: {exc}")
                         + "\n")
            return exits.USAGE
        out.write(text)
        out.commit()
    return exits.OK


def _html_name(args: argparse.Namespace) -> str:
    """A file name for the page: the one report's (or folder's) name with `.html`."""
    if len(args.reports) != 1:
        return "report.html"
    base = os.path.splitext(os.path.basename(os.path.normpath(args.reports[0])))[0]
    return (base or "report") + ".html"


def run_labels(paths: list[str], given: list[str]) -> list[str]:
    """The given labels, then file names without extension; repeated names get a #n suffix."""
    labels = given + [os.path.splitext(os.path.basename(p))[0] or p for p in paths[len(given):]]
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label}#{seen[label]}")
    return out


def sweep_tables(folder: str) -> list[str]:
    """The files a sweep writes into its results folder, beside `reports/`."""
    from kvreplay.sweep.manifest import MANIFEST

    names = ("results.jsonl", "results.csv", "results.parquet", "best.json", MANIFEST)
    return [os.path.join(folder, name) for name in names]


def sweep_page(folder: str, output: str) -> int:
    """The page of a sweep's results folder written to `output` (atomically); exit 2 and one
    line when the folder is not one, and nothing written."""
    from kvreplay.html.sweep_page import render_sweep_html
    from kvreplay.sweep.folder import ResultsError, read_results

    inputs = [("the sweep results", path) for path in sweep_tables(folder)]
    with Output(output, inputs) as out:
        try:
            results = read_results(folder)
        except ResultsError as exc:
            write_stderr(f"kvreplay: {escape_inline(str(exc))}\n")
            return exits.USAGE
        out.write(render_sweep_html(results))
        out.commit()
    return exits.OK
