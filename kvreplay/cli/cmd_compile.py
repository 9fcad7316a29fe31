"""`kvreplay compile CONFIG [-o OUT | --check OUT]`."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import os

from kvreplay.cli import exits
from kvreplay.cli.diagnostics_out import print_diagnostics
from kvreplay.cli.output import Output, same_file, write_stderr, write_stdout
from kvreplay.compiler.overrides import OverrideError
from kvreplay.files import open_regular


def run(args: argparse.Namespace) -> int:
    if args.check_sibling:
        codes = [_compile_one(args, config, _sibling(config)) for config in args.config]
        return max(codes, default=exits.OK)
    if len(args.config) != 1:
        write_stderr("kvreplay: compile takes one CONFIG (several only with --check-sibling)\n")
        return exits.USAGE
    return _compile_one(args, args.config[0], args.check)


def _sibling(config: str) -> str | None:
    candidate = os.path.splitext(config)[0] + ".json"
    return candidate if os.path.isfile(candidate) and not same_file(candidate, config) else None


def _compile_one(args: argparse.Namespace, config: str, check: str | None) -> int:
    from kvreplay.api import matrix_rules
    from kvreplay.compiler.documents import compile_path

    if args.check_sibling and check is None:
        return exits.OK
    if check and same_file(check, config):
        write_stderr(f"kvreplay: --check {check} is the config {config} itself: check it against "
                     "the JSON it compiles to\n")
        return exits.USAGE
    with contextlib.ExitStack() as stack:
        # Opened before compiling: an output that is the config is refused before any work.
        out = None if check else stack.enter_context(
            Output(args.output or "-", [("the config", config)]))
        try:
            result = compile_path(config, overrides=args.overrides,
                                  rules=None if args.no_matrix else matrix_rules())
        except OverrideError as exc:
            write_stderr(f"kvreplay: {exc}\n")
            return exits.USAGE
        print_diagnostics([(result.file, result.text, result.diagnostics)], args)
        code = exits.for_diagnostics(result.diagnostics)
        if code != exits.OK or result.spec is None:
            return code or exits.FINDINGS
        text = result.emitted()
        if check:
            return _check(check, text)
        assert out is not None
        out.write(text)
        out.commit()
    return exits.OK


def _check(path: str, expected: str) -> int:
    """Compare the committed artifact with a fresh compile; print a unified diff when stale."""
    if os.path.isdir(path):
        write_stderr(f"kvreplay: {path}: is a directory\n")
        return exits.USAGE
    try:
        with open_regular(path) as fh:  # a FIFO or device is refused, never waited on
            current = fh.read().decode("utf-8")
    except FileNotFoundError:
        current = ""
        write_stderr(f"kvreplay: {path} does not exist: it is not up to date\n")
    except (OSError, UnicodeDecodeError) as exc:
        write_stderr(f"kvreplay: cannot read {path}: {exc}\n")
        return exits.USAGE
    if current == expected:
        return exits.OK
    diff = difflib.unified_diff(current.splitlines(keepends=True),
                                expected.splitlines(keepends=True),
                                fromfile=f"{path} (committed)", tofile=f"{path} (compiled)")
    write_stdout("".join(diff))
    write_stderr(f"kvreplay: {path} is stale: run `kvreplay compile ... -o {path}`\n")
    return exits.FINDINGS
