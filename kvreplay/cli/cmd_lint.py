"""`kvreplay lint PATH...`: every problem of every file at once, in the format CI wants."""

from __future__ import annotations

import argparse
import fnmatch
import os
import sys
from collections.abc import Iterable, Sequence

from kvreplay import HOMEPAGE, __version__
from kvreplay.cli import exits
from kvreplay.cli.output import write_stderr, write_stdout
from kvreplay.diagnostics import Diagnostic, Span, sort_unique


def _rule_patterns(values: Iterable[str]) -> list[str]:
    return [p.strip() for v in values for p in v.split(",") if p.strip()]


def _unknown_patterns(patterns: Sequence[str], known: Iterable[str]) -> list[str]:
    names = sorted(known)
    return [p for p in patterns if not fnmatch.filter(names, p)]


def _keep(d: Diagnostic, select: Sequence[str], ignore: Sequence[str]) -> bool:
    if d.rule in exits.IO_RULES:
        return True  # unreadable input is never filtered away
    if select and not any(fnmatch.fnmatchcase(d.rule, p) for p in select):
        return False
    return not any(fnmatch.fnmatchcase(d.rule, p) for p in ignore)


def run(args: argparse.Namespace) -> int:
    from kvreplay.api import matrix_rules
    from kvreplay.catalog import catalog
    from kvreplay.cli import suppressions
    from kvreplay.cli.discovery import expand
    from kvreplay.compiler.documents import compile_path
    from kvreplay.compiler.overrides import OverrideError
    from kvreplay.compiler.suggest import hint_for
    from kvreplay.formats import FileResult, render, resolve_auto, use_color

    select = _rule_patterns(args.select)
    ignore = _rule_patterns(args.ignore)
    for pattern in _unknown_patterns(select + ignore, catalog()) if select or ignore else ():
        hint = hint_for(pattern, catalog(), "rule IDs") or ""
        write_stderr(f"kvreplay: unknown rule ID `{pattern}` in --select/--ignore; {hint}\n")
        return exits.USAGE
    rules = matrix_rules()
    results: list[FileResult] = []
    kept_all: list[Diagnostic] = []
    for target in expand(args.paths):
        if target.missing:
            found: list[Diagnostic] = [Diagnostic(
                "FILE-UNREADABLE", "error", "no such file or directory (nothing matched)",
                Span(file=target.path))]
            text = None
        else:
            try:
                compiled = compile_path(target.path, overrides=args.overrides, rules=rules)
            except OverrideError as exc:
                write_stderr(f"kvreplay: {exc}\n")
                return exits.USAGE
            text = compiled.text
            found = suppressions.apply(compiled.diagnostics, text, compiled.file)
        kept = [d for d in sort_unique(found) if _keep(d, select, ignore)]
        kept_all.extend(kept)
        if args.quiet:
            kept = [d for d in kept if d.severity == "error"]
        results.append(FileResult(target.path, text, tuple(kept)))
    if not results:
        write_stderr("kvreplay: no YAML or JSON files found to lint\n")
        return exits.OK
    is_tty = sys.stdout.isatty()
    name = resolve_auto(is_tty, os.environ) if args.format == "auto" else args.format
    write_stdout(render(name, results, color=use_color(is_tty, args.no_color, os.environ),
                        root=args.root or os.getcwd(), cwd=os.getcwd(),
                        version=__version__, information_uri=HOMEPAGE))
    return exits.for_diagnostics(kept_all, strict=args.strict)
