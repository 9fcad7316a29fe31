"""`kvreplay compile CONFIG [-o OUT | --check OUT]`, `kvreplay compile --check-pairs [FILE...]`
(`--fix` rewrites what is stale)."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import shlex

from kvreplay.cli import exits
from kvreplay.cli.diagnostics_out import print_diagnostics
from kvreplay.compiler.overrides import OverrideError
from kvreplay.compiler.pipeline import Compiled
from kvreplay.io.display import escape_inline
from kvreplay.io.output import Output, commit_all, same_file, say, write_stderr, write_stdout
from kvreplay.schema.files import open_regular


def run(args: argparse.Namespace) -> int:
    if args.check_pairs or (args.fix and not args.check and not args.output):
        return _check_pairs(args)
    if args.fix and args.output:
        write_stderr("kvreplay: --fix rewrites stale outputs of --check OUT or --check-pairs; "
                     "-o always writes\n")
        return exits.USAGE
    if len(args.config) != 1:
        write_stderr("kvreplay: compile takes one CONFIG (several only with --check-pairs)\n")
        return exits.USAGE
    return _compile_one(args, args.config[0], args.check)


def _check_pairs(args: argparse.Namespace) -> int:
    from kvreplay.cli.pairs import configured, pairs_of, refuse_unsafe
    from kvreplay.cli.project_cli import report_settings_error, resolver_or_error
    from kvreplay.cli.settings_file import SettingsError

    resolver = resolver_or_error(args)
    if resolver is None:
        return exits.USAGE
    try:
        if args.config:
            pairs, alone = pairs_of(args.config, resolver)
        else:
            pairs, alone = configured(resolver), []
        refuse_unsafe(pairs)  # before any pair is written
    except SettingsError as exc:
        report_settings_error(exc, args)
        return exits.USAGE
    if args.verbose:
        for path in alone:
            say(f"skipped {path}: in no compile pair")
        write_stderr(f"kvreplay: {len(pairs)} pair(s) to check\n")
    with contextlib.ExitStack() as stack:
        fixes = _Fixes(stack)
        codes = [_compile_one(args, pair.config, pair.output, fixes, within=pair.root)
                 for pair in pairs]
        fixes.commit()
    return max(codes, default=exits.OK)


class _Fixes:
    """The outputs `--fix` rewrites, published together once every one is written (a write
    that fails leaves all of them as they were)."""

    def __init__(self, stack: contextlib.ExitStack) -> None:
        self.stack = stack
        self.outputs: list[Output] = []
        self.notes: list[str] = []

    def add(self, out: Output, text: str, note: str) -> None:
        self.stack.enter_context(out)
        out.write(text)
        self.outputs.append(out)
        self.notes.append(note)

    def commit(self) -> None:
        commit_all(self.outputs)
        for note in self.notes:
            write_stderr(note)


def _compile_one(args: argparse.Namespace, config: str, check: str | None,
                 fixes: _Fixes | None = None, within: str | None = None) -> int:
    from kvreplay.api import matrix_rules
    from kvreplay.cli.cmd_run import spec_traces
    from kvreplay.compiler.documents import compile_path

    if check and same_file(check, config):
        say(f"--check {check} is the config {config} itself: check it against the JSON it "
            "compiles to")
        return exits.USAGE
    with contextlib.ExitStack() as stack:
        # Opened before compiling: an output that is the config is refused before any work.
        out = None if check else stack.enter_context(
            Output(args.output or "-", [("the config", config)]))
        try:
            result = compile_path(config, overrides=args.overrides,
                                  rules=None if args.no_matrix else matrix_rules())
        except OverrideError as exc:
            say(str(exc))
            return exits.USAGE
        print_diagnostics([(result.file, result.text, result.diagnostics)], args)
        code = exits.for_diagnostics(result.diagnostics)
        if code != exits.OK or result.spec is None:
            return code or exits.FINDINGS
        # A file (replaced by a rename) gets paths for its folder; a stream keeps the config's.
        target = check or (args.output if out is not None and out.replace else None)
        text = result.emitted() if not target else _written_for(result, config, target)
        # The traces the spec names are not compile's inputs, but an output must not be one.
        folder = os.path.dirname(os.path.abspath(config))
        inputs = [("the config", config),
                  *(("the trace", real) for _, real in spec_traces(result.native(), folder))]
        if check:
            mine = fixes or _Fixes(stack)
            code = _check(check, text, config, args, inputs, mine, within)
            if fixes is None:
                mine.commit()
            return code
        assert out is not None
        out.refuse(inputs)
        out.write(text)
        out.commit()
    return exits.OK


def _written_for(result: Compiled, config: str, output: str) -> str:
    """The JSON as written to the file `output`: trace paths relative to its folder (stdout, a
    FIFO or a device keeps the config's paths, relative to the config's folder)."""
    from kvreplay.compiler.emit import dumps
    from kvreplay.compiler.relocate import relocated_trace_paths

    return dumps(relocated_trace_paths(result.native(), os.path.dirname(config) or os.curdir,
                                       os.path.dirname(output) or os.curdir))


def _check(path: str, expected: str, config: str, args: argparse.Namespace,
           inputs: list[tuple[str, str]], fixes: _Fixes, within: str | None) -> int:
    """Compare the output on disk with a fresh compile: print a unified diff when stale, or with
    --fix rewrite it (exit 1 either way, so a pre-commit hook shows the change)."""
    shown, source = escape_inline(path), escape_inline(config)
    if os.path.isdir(path):
        write_stderr(f"kvreplay: {shown}: is a directory\n")
        return exits.USAGE
    try:
        with open_regular(path) as fh:  # a FIFO or device is refused, never waited on
            current: str | None = fh.read().decode("utf-8")
    except FileNotFoundError:
        current = None
    except (OSError, UnicodeDecodeError) as exc:
        write_stderr(f"kvreplay: cannot read {shown}: {escape_inline(str(exc))}\n")
        return exits.USAGE
    if current == expected:
        return exits.OK
    if args.fix:
        out = Output(path, inputs, within=within)  # refused before any folder is made
        if current is None:  # a configured output may live in a folder not made yet
            with contextlib.suppress(OSError):  # if it cannot be made, Output says why
                os.makedirs(os.path.dirname(path) or os.curdir, exist_ok=True)
        state = "missing" if current is None else "stale"
        fixes.add(out, expected, f"kvreplay: {shown} was {state}: rewritten from {source}\n")
        return exits.FINDINGS
    if current is not None:
        # The file on disk may hold anything: each line is shown with its control characters
        # as escapes, so the diff cannot drive the terminal.
        diff = difflib.unified_diff(_shown_lines(current), _shown_lines(expected),
                                    fromfile=f"{shown} (on disk)",
                                    tofile=f"{shown} (compiled from {source})")
        write_stdout("".join(diff))
    state = "does not exist" if current is None else "is stale"
    write_stderr(f"kvreplay: {shown} {state}: run "
                 f"`{escape_inline(_fix_command(config, path, args))}` (or add --fix)\n")
    return exits.FINDINGS


def _shown_lines(text: str) -> list[str]:
    """`text` split at LF, each line terminal-safe (a CR or an ESC shown as an escape)."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
        return [escape_inline(line) + "\n" for line in lines]
    return [escape_inline(line) + "\n" for line in lines[:-1]] + [escape_inline(lines[-1])]


def _fix_command(config: str, path: str, args: argparse.Namespace) -> str:
    """The command that writes the up-to-date output, with the options this run used."""
    words = ["kvreplay", "compile", config]
    for override in args.overrides:
        words += ["--set", override]
    if args.no_matrix:
        words.append("--no-matrix")
    return shlex.join([*words, "-o", path])
