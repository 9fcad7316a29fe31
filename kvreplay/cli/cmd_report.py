"""`kvreplay report REPORT... -o OUT`: the self-contained HTML report of one or more runs."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from kvreplay.cli import exits
from kvreplay.cli.output import Output, write_stderr


class ReportLoadError(Exception):
    """A report file that cannot be read as a report: one line, exit 2."""


def run(args: argparse.Namespace) -> int:
    from kvreplay.html import ReportShapeError, render_html

    if len(args.label) > len(args.reports):
        write_stderr(f"kvreplay: {len(args.label)} --label for {len(args.reports)} report(s)\n")
        return exits.USAGE
    labels = run_labels(args.reports, args.label)
    with Output(args.output or "-", [("the report", p) for p in args.reports]) as out:
        runs = []
        for path, label in zip(args.reports, labels, strict=True):
            try:
                runs.append((label, load_report(path)))
            except ReportLoadError as exc:
                write_stderr(f"kvreplay: {path}: {exc}\n")
                return exits.USAGE
        try:
            text = render_html(runs)
        except ReportShapeError as exc:
            where = args.reports[exc.run or 0]
            write_stderr(f"kvreplay: {where}: not a kvreplay report: {exc}\n")
            return exits.USAGE
        out.write(text)
        out.commit()
    return exits.OK


def run_labels(paths: list[str], given: list[str]) -> list[str]:
    """The given labels, then file names without extension; repeated names get a #n suffix."""
    labels = given + [os.path.splitext(os.path.basename(p))[0] or p for p in paths[len(given):]]
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label}#{seen[label]}")
    return out


def _no_constants(name: str) -> Any:
    raise ReportLoadError(f"{name} is not a JSON number (a report holds finite numbers only)")


def load_report(path: str) -> dict[str, Any]:
    """A report file as a dict; ReportLoadError saying why not (unreadable, not JSON, ...)."""
    from kvreplay.files import open_regular

    try:
        with open_regular(path) as f:
            data = json.load(f, parse_constant=_no_constants)
    except OSError as exc:
        raise ReportLoadError(f"cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ReportLoadError("not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ReportLoadError(f"not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
                              ) from None
    except RecursionError:
        raise ReportLoadError("not a report: nested too deeply") from None
    if not isinstance(data, dict) or not isinstance(data.get("summary"), dict):
        raise ReportLoadError("not a kvreplay report (no `summary` object at the top)")
    return data
