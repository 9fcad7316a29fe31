"""Printing the findings of compile and run to stderr (lint has its own formats on stdout)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from kvreplay.io.output import write_stderr
from kvreplay.schema.diagnostics import Diagnostic

Findings = tuple[str | None, str | None, Sequence[Diagnostic]]  # file, source text, diagnostics


def print_diagnostics(items: Sequence[Findings], args: argparse.Namespace) -> None:
    """Text with code frames on a terminal, concise lines otherwise; --quiet keeps errors only."""
    quiet = getattr(args, "quiet", False)
    kept = [(f, t, [d for d in ds if not quiet or d.severity == "error"]) for f, t, ds in items]
    kept = [(f, t, ds) for f, t, ds in kept if ds]
    if not kept:
        return
    from kvreplay.formats import FileResult, render, use_color
    from kvreplay.schema.diagnostics import collapse_repeats

    files = [FileResult(f or "<input>", t, tuple(collapse_repeats(ds))) for f, t, ds in kept]
    is_tty = sys.stderr.isatty()
    color = use_color(is_tty, args.no_color, os.environ)
    write_stderr(render("text" if is_tty else "concise", files, color=color))
