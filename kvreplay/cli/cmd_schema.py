"""`kvreplay schema {config,native,report}`."""

from __future__ import annotations

import argparse
from importlib import resources

from kvreplay.cli import exits
from kvreplay.io.output import write_stdout


def run(args: argparse.Namespace) -> int:
    schema = resources.files("kvreplay.schema").joinpath(f"{args.which}.schema.json")
    text = schema.read_text("utf-8")
    write_stdout(text)
    return exits.OK
