"""`kvreplay compare BASE NEW`: two reports side by side, a per-request join, CI gates."""

from __future__ import annotations

import argparse

from kvreplay.cli import exits
from kvreplay.io.display import escape_inline
from kvreplay.io.output import emit_all, write_stderr


def run(args: argparse.Namespace) -> int:
    from kvreplay.compare import (
        GateError,
        ReportInputError,
        compare_reports,
        evaluate_gates,
        load_report,
        parse_gate,
    )
    from kvreplay.compare.formats import RENDERERS

    try:
        gates = [parse_gate(text) for text in args.fail_on]
        base, new = load_report(args.base), load_report(args.new)
        comparison = compare_reports(base, new, top=args.top)
        results = evaluate_gates(comparison, gates)
    except (GateError, ReportInputError) as exc:
        write_stderr(f"kvreplay: {escape_inline(str(exc))}\n")
        return exits.USAGE
    text = RENDERERS[args.format](comparison, results, (args.base, args.new),
                                  changed_only=args.changed_only)
    inputs = [("the BASE report", args.base), ("the NEW report", args.new)]
    writes: list[tuple[str | None, str, str]] = []
    if args.html is not None:
        from kvreplay.cli.cmd_report import run_labels
        from kvreplay.html import ReportShapeError
        from kvreplay.html.compare_page import render_comparison_html

        labels = run_labels([args.base, args.new], [])
        try:
            page = render_comparison_html([(labels[0], base), (labels[1], new)], comparison,
                                          results)
        except ReportShapeError as exc:
            where = (args.base, args.new)[exc.run or 0]
            write_stderr(escape_inline(f"kvreplay: {where}: not a kvreplay report: {exc}")
                         + "\n")
            return exits.USAGE
        writes.append((args.html, page, "the --html page"))
    writes.append((args.output, text, "the -o output"))
    if not emit_all(writes, inputs):  # both or neither
        return exits.USAGE
    tripped = [r for r in results if r.tripped]
    if args.format == "json" or args.output not in (None, "-"):  # the table is not on screen
        write_stderr("".join(escape_inline(f"kvreplay: warning: {w}") + "\n"
                             for w in comparison.warnings))
        write_stderr("".join(f"kvreplay: gate failed: {escape_inline(r.gate.text)}\n"
                             for r in tripped))
    return exits.FINDINGS if tripped else exits.OK
