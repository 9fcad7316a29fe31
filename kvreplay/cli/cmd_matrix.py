"""`kvreplay matrix [--format markdown|json]`: the support matrix rendered from the rule files."""

from __future__ import annotations

import argparse

from kvreplay.cli import exits
from kvreplay.io.output import write_stdout


def run(args: argparse.Namespace) -> int:
    from kvreplay.rules import render_matrix

    write_stdout(render_matrix(args.format))
    return exits.OK
