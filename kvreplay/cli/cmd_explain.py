"""`kvreplay explain RULE-ID`: a rule or code, its rationale, examples and fix."""

from __future__ import annotations

import argparse

from kvreplay.cli import exits
from kvreplay.io.display import escape_inline
from kvreplay.io.output import write_stderr, write_stdout


def run(args: argparse.Namespace) -> int:
    from kvreplay.catalog import catalog
    from kvreplay.explainer import explain
    from kvreplay.schema.suggest import hint_for

    text = explain(args.rule.strip().upper())
    if text is None:
        hint = hint_for(args.rule.strip().upper(), catalog(), "rule IDs") or ""
        write_stderr(f"kvreplay: unknown rule ID `{escape_inline(args.rule)}`; {hint}\n")
        return exits.USAGE
    write_stdout(text if text.endswith("\n") else text + "\n")
    return exits.OK
