"""The support matrix rendered from the rule files (markdown or JSON), and the rule catalog.

docs/support-matrix.md is `render_matrix("markdown")`; a test fails when it is stale. Regenerate
it with `python -m kvreplay.rules.matrix > docs/support-matrix.md` (or `kvreplay matrix`).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from kvreplay.rules import syntax as s
from kvreplay.rules import unparse

_INTRO = """\
Which configurations kvreplay accepts. Every row is a rule of `rules/*.rules`, written in the
rules language (docs/rules.md); this page is generated from those files by `kvreplay matrix` and
a test fails when it is stale. The rule IDs are a public contract: users suppress, grep and link
them. The same rules run on every entry point (YAML config, Python API, native JSON), so a
configuration rejected through one is rejected through all of them with the same ID.

Vocabulary: "agentic" = the workload is an agentic trace (`weka`, `agentic_mooncake`) or sets an
agentic load key (`traffic.agentic`); "G2" = a role has `host_offload` (predicate `g2(r)`); "any
role" = any of the roles present in the topology. Conditions are three-valued: a comparison that
reads an unknown value (for example a required field missing from a document with other errors)
is unknown, and a rule reports only when its condition is true, never on a guess.

The **condition** column is the rule's own text (`for ... when ...`); **says** is its title.
Predicates used in conditions are defined at the end."""


def _code(text: str) -> str:
    """A markdown code span that survives backticks and table pipes."""
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}".replace("|", "\\|")


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _markdown(ruleset: s.RuleSet) -> str:
    out = ["# The support matrix", "",
           "<!-- Generated from rules/*.rules by `kvreplay matrix`: do not edit by hand. -->", "",
           _INTRO, ""]
    for f in ruleset.files:
        if not f.rules:
            continue
        out.append(f"## {f.heading} (`{f.name}`)")
        out.append("")
        if f.summary:
            out.append(_cell(f.summary[:1].upper() + f.summary[1:]))
            out.append("")
        out.append("| ID | severity | condition | says |")
        out.append("| --- | --- | --- | --- |")
        for rule in f.rules:
            condition = "<br>".join(_code(unparse.condition(c)) for c in rule.checks)
            anchor = f'<a id="{rule.id.lower()}"></a>{rule.id}'
            out.append(f"| {anchor} | {rule.severity} | {condition} | {_cell(rule.title)} |")
        out.append("")
    accepted = ruleset.accepted
    if accepted:
        out.append("## Accepted on purpose")
        out.append("")
        out.append("These configurations pass every rule; the cases named pin it "
                   "(`rules/cases/`).")
        out.append("")
        for a in accepted:
            cases = ", ".join(_code(c) for c in a.cases)
            out.append(f"- {_cell(a.text)} Cases: {cases}.")
        out.append("")
    if ruleset.defines:
        out.append("## Predicates")
        out.append("")
        out.append("| predicate | means | defined in |")
        out.append("| --- | --- | --- |")
        for d in ruleset.defines:
            head = f"{d.name}({', '.join(d.params)})"
            out.append(f"| {_code(head)} | {_code(unparse.expr(d.body))} | `{d.pos.file}` |")
        out.append("")
    return "\n".join(out)


def _json(ruleset: s.RuleSet) -> str:
    concerns: list[dict[str, Any]] = []
    for f in ruleset.files:
        concerns.append({
            "file": f.name,
            "heading": f.heading,
            "summary": f.summary,
            "rules": [
                {
                    "id": r.id,
                    "severity": r.severity,
                    "title": r.title,
                    "rationale": r.rationale,
                    "line": r.pos.line,
                    "checks": [
                        {"for": unparse.binders(c), "when": unparse.expr(c.when),
                         "at": unparse.expr(c.at)}
                        for c in r.checks
                    ],
                }
                for r in f.rules
            ],
        })
    document = {
        "version": 1,
        "concerns": concerns,
        "accepted": [{"text": a.text, "cases": list(a.cases)} for a in ruleset.accepted],
        "predicates": [
            {"name": d.name, "params": list(d.params), "means": unparse.expr(d.body),
             "file": d.pos.file}
            for d in ruleset.defines
        ],
    }
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def render_matrix(format: Literal["markdown", "json"] = "markdown",
                  ruleset: s.RuleSet | None = None) -> str:
    """The support matrix of the shipped rule files (or of `ruleset`) as markdown or JSON."""
    from kvreplay.rules.loader import shipped_ruleset

    rules = shipped_ruleset() if ruleset is None else ruleset
    if format == "markdown":
        return _markdown(rules)
    if format == "json":
        return _json(rules)
    raise ValueError(f"unknown matrix format `{format}`: use `markdown` or `json`")


if __name__ == "__main__":
    import sys

    sys.stdout.write(render_matrix(sys.argv[1] if len(sys.argv) > 1 else "markdown"))  # type: ignore[arg-type]
