"""`kvreplay completion bash|zsh|fish`: a completion script for the shell, on stdout."""

from __future__ import annotations

import argparse

from kvreplay.cli import exits
from kvreplay.io.output import write_stdout


def run(args: argparse.Namespace) -> int:
    from kvreplay.catalog import catalog
    from kvreplay.cli.completion import render
    from kvreplay.cli.main import build_parser

    write_stdout(render(args.shell, build_parser(), sorted(catalog())))
    return exits.OK
