"""`kvreplay lint PATH...`: every problem of every file at once, in the format CI wants."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kvreplay import HOMEPAGE, __version__
from kvreplay.cli import exits
from kvreplay.cli.rule_select import keeps, unknown_patterns
from kvreplay.io.output import Output, say, write_stderr
from kvreplay.schema.diagnostics import Diagnostic, Span, collapse_repeats, sort_unique
from kvreplay.schema.frozen import evolve

if TYPE_CHECKING:  # kept out of start-up
    from kvreplay.cli.selection import Selection
    from kvreplay.cli.settings import Resolver


def run(args: argparse.Namespace) -> int:
    from kvreplay.cli.project_cli import report_settings_error, resolver_or_error
    from kvreplay.cli.settings_file import SettingsError

    resolver = resolver_or_error(args)
    if resolver is None:
        return exits.USAGE
    if bad_rule_options(args):
        return exits.USAGE
    paths = args.paths or ["."]
    try:
        if args.show_settings:
            from kvreplay.cli.show_settings import show

            return show(resolver, paths[0], args)
        return _lint(args, resolver, paths)
    except SettingsError as exc:
        report_settings_error(exc, args)
        return exits.USAGE


def bad_rule_options(args: argparse.Namespace) -> bool:
    """An unknown rule ID in --select / --ignore is a usage error (with a did-you-mean hint)."""
    from kvreplay.cli.rule_select import split_patterns

    patterns = split_patterns(args.select) + split_patterns(args.ignore)
    if not patterns:
        return False
    from kvreplay.catalog import catalog
    from kvreplay.io.display import escape_inline
    from kvreplay.schema.suggest import hint_for

    for pattern in unknown_patterns(patterns, catalog()):
        hint = hint_for(pattern, catalog(), "rule IDs") or ""
        write_stderr(f"kvreplay: unknown rule ID `{escape_inline(pattern)}` in "
                     f"--select/--ignore; {hint}\n")
        return True
    return False


def _lint(args: argparse.Namespace, resolver: Resolver, paths: Sequence[str]) -> int:
    from kvreplay import suppressions
    from kvreplay.api import matrix_rules
    from kvreplay.cli.selection import select
    from kvreplay.compiler.overrides import OverrideError
    from kvreplay.formats import FileResult, render, resolve_auto, use_color
    from kvreplay.sweep.documents import compile_document

    selection = select(paths, resolver, force_exclude=args.force_exclude)
    if args.verbose:
        _verbose(selection)
    with contextlib.ExitStack() as stack:
        out = None if args.output_file is None else stack.enter_context(Output(
            args.output_file, [("a linted file", t.path) for t in selection.targets]))
        rules = matrix_rules()
        results: list[FileResult] = []
        code = exits.OK
        for target in selection.targets:
            settings = resolver.for_path(target.path)
            if target.missing:
                found: list[Diagnostic] = [Diagnostic(
                    "FILE-UNREADABLE", "error", "no such file or directory (nothing matched)",
                    Span(file=target.path))]
                text = None
            else:
                try:
                    compiled = compile_document(target.path, overrides=args.overrides,
                                                rules=rules)
                except OverrideError as exc:
                    say(str(exc))
                    return exits.USAGE
                text = compiled.text
                found = suppressions.apply(compiled.diagnostics, text, compiled.file)
            ignore = settings.ignored_rules(target.path)
            kept = [d for d in sort_unique(found) if keeps(d.rule, settings["select"], ignore)]
            code = max(code, exits.for_diagnostics(kept, strict=settings["strict"]))
            if args.quiet:
                kept = [d for d in kept if d.severity == "error"]
            results.append(FileResult(target.path, text, tuple(kept)))
        is_tty = out is None and sys.stdout.isatty()
        name = resolver.for_cwd()["format"]
        name = resolve_auto(is_tty, os.environ) if name == "auto" else name
        if not results:
            write_stderr("kvreplay: no kvreplay configs found to lint"
                         + ("" if args.verbose else " (--verbose says what was skipped)") + "\n")
            if name not in ("json", "sarif"):  # documents stay valid (an upload needs one)
                return exits.OK
        if args.statistics:
            from kvreplay.formats.statistics import render_statistics

            text = render_statistics(results, as_json=name == "json")
        else:
            shown = [evolve(r, diagnostics=tuple(collapse_repeats(r.diagnostics)))
                     for r in results]
            text = render(name, shown, color=use_color(is_tty, args.no_color, os.environ),
                          root=args.root or os.getcwd(), cwd=os.getcwd(),
                          version=__version__, information_uri=HOMEPAGE)
        target_out = out or stack.enter_context(Output("-"))
        target_out.write(text)
        target_out.commit()
    if args.exit_zero and code == exits.FINDINGS:
        return exits.OK
    return code


def _verbose(selection: Selection) -> None:
    for skipped in selection.skipped:
        say(f"skipped {skipped.path}: {skipped.reason}")
    for note in selection.notes:
        say(note)
    counts: dict[str, int] = {}
    for skipped in selection.skipped:
        counts[skipped.reason] = counts.get(skipped.reason, 0) + 1
    detail = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))
    write_stderr(f"kvreplay: {len(selection.targets)} file(s) to lint, "
                 f"{len(selection.skipped)} skipped{': ' + detail if detail else ''}\n")
