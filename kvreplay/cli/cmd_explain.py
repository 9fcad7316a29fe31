"""`kvreplay explain RULE-ID`: a rule's text, rationale and a failing and a passing example."""

from __future__ import annotations

import argparse

from kvreplay.cli import exits
from kvreplay.cli.output import write_stderr, write_stdout


def run(args: argparse.Namespace) -> int:
    from kvreplay.catalog import builtin_codes, catalog
    from kvreplay.compiler.suggest import hint_for
    from kvreplay.rules import explain

    rule_id = args.rule.strip().upper()
    text = explain(rule_id)
    if text is None:
        info = next((c for c in builtin_codes() if c.code == rule_id), None)
        if info is not None:
            severity = catalog()[info.code][1]
            text = f"{info.code} ({info.category}, {severity})\n\n{info.summary}\n"
    if text is None:
        hint = hint_for(rule_id, catalog(), "rule IDs") or ""
        write_stderr(f"kvreplay: unknown rule ID `{args.rule}`; {hint}\n")
        return exits.USAGE
    write_stdout(text if text.endswith("\n") else text + "\n")
    return exits.OK
