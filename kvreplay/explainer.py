"""`kvreplay explain ID`: an ID of the catalog, why it exists, a failing and a passing example.

The text is kvreplay.rule_docs' help, the same SARIF carries, plus a matrix rule's own source.
The examples are the rule's cases (corpus.example), shown with what lint reports on them.
"""

from __future__ import annotations

from kvreplay.rule_docs import render_text, rule_doc
from kvreplay.rules import unparse


def _rule_source(rule_id: str) -> list[str]:
    from kvreplay.rules.loader import shipped_ruleset

    rule = next(r for r in shipped_ruleset().rules if r.id == rule_id)
    out = [f"Rule ({rule.pos.file}:{rule.pos.line}):"]
    for check in rule.checks:
        out.append("")
        out.extend("    " + line for line in unparse.check_lines(check))
    return out


def explain(rule_id: str) -> str | None:
    """The explanation of one catalog ID (rule or code), or None when no ID matches."""
    doc = rule_doc(rule_id)
    if doc is None:
        return None
    return render_text(doc, _rule_source(rule_id) if doc.matrix else None)
