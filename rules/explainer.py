"""`kvreplay explain RULE-ID`: the rule, why it exists, and a failing and a passing example.

The examples are the first failing and first passing case of the rule in the case corpus
(corpus.py), shown with the findings the rules actually report on them.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from kvreplay.rules import syntax as s
from kvreplay.rules import unparse
from kvreplay.rules.corpus import CASES_DIR, cases

_WIDTH = 88


def _find(rule_id: str) -> s.Rule | None:
    from kvreplay.rules.loader import shipped_ruleset

    return next((r for r in shipped_ruleset().rules if r.id == rule_id), None)


def _findings(path: Path) -> list[str]:
    from kvreplay.compiler.documents import compile_text
    from kvreplay.rules.runner import run_rules

    compiled = compile_text(path.read_text(encoding="utf-8"), path.name, rules=run_rules)
    lines = []
    for d in compiled.diagnostics:
        lines.append(f"{d.line}:{d.column}: {d.severity} {d.rule} {d.message}")
        if d.hint:
            lines.append(f"  hint: {d.hint}")
    return lines


def _example(label: str, path: Path | None, rule_id: str) -> list[str]:
    if path is None:
        return [f"{label}: none (rules/cases/{rule_id}/ has no such case)"]
    shown = "rules/cases/" + path.relative_to(CASES_DIR).as_posix()
    lines = [f"{label} ({shown}):", ""]
    lines.extend("    " + line for line in path.read_text(encoding="utf-8").rstrip().splitlines())
    lines.append("")
    findings = _findings(path)
    if findings:
        lines.append("  reports:")
        lines.extend("    " + f for f in findings)
    else:
        lines.append("  reports nothing.")
    return lines


def explain(rule_id: str) -> str | None:
    """The explanation of one rule, or None when no rule has that ID."""
    rule = _find(rule_id)
    if rule is None:
        return None
    out = [f"{rule.id} ({rule.severity}): {rule.title}", ""]
    out.extend(textwrap.wrap(" ".join(rule.rationale.split()), _WIDTH))
    out.append("")
    out.append(f"Rule ({rule.pos.file}:{rule.pos.line}):")
    for check in rule.checks:
        out.append("")
        out.extend("    " + line for line in unparse.check_lines(check))
    out.append("")
    fail = cases(rule.id, "fail")
    passing = cases(rule.id, "pass")
    out.extend(_example("Failing example", fail[0] if fail else None, rule.id))
    out.append("")
    out.extend(_example("Passing example", passing[0] if passing else None, rule.id))
    return "\n".join(out) + "\n"
