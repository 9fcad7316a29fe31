"""Printing diagnostics of compile/run to stderr (lint has its own formats)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from kvreplay.cli.output import write_stderr, write_stdout
from kvreplay.compiler.pipeline import Compiled


def print_diagnostics(results: Sequence[Compiled], args: argparse.Namespace,
                      stream: str = "stderr") -> None:
    out = sys.stderr if stream == "stderr" else sys.stdout
    with_findings = [r for r in results if r.diagnostics]
    quiet = getattr(args, "quiet", False)
    if not with_findings or (quiet and not any(
            d.severity == "error" for r in with_findings for d in r.diagnostics)):
        return
    from kvreplay.formats import FileResult, render, use_color

    files = [FileResult(r.file or "<input>", r.text, tuple(r.diagnostics)) for r in with_findings]
    is_tty = out.isatty()
    color = use_color(is_tty, args.no_color, os.environ)
    text = render("text" if is_tty else "concise", files, color=color)
    (write_stderr if stream == "stderr" else write_stdout)(text)
