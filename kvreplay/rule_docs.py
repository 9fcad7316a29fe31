"""Each catalog ID's documentation: what `kvreplay explain` prints and SARIF's rule help says.

One entry per ID of kvreplay.catalog: default severity, title, description (a matrix rule's
rationale, a code's summary), area, help URI, the fix, and a failing and a passing example from
rules/cases/ with what `kvreplay lint` reports on them. The examples are linted when first
needed, so only `explain` and `--format sarif` pay for them.
"""

from __future__ import annotations

import re
import textwrap
from functools import cache
from pathlib import Path

import attrs

from kvreplay.schema.diagnostics import Diagnostic

PRECISION = "very-high"  # every rule is an exact check: no heuristics, no guesses on unknowns
MATRIX_TAG = "support-matrix"
_WIDTH = 88


@attrs.frozen
class Example:
    """A case file of rules/cases/, shown as `shown`, and what lint reports on it."""

    path: Path
    shown: str

    @property
    def language(self) -> str:
        return "json" if self.path.suffix == ".json" else "yaml"

    @property
    def text(self) -> str:
        return self.path.read_text(encoding="utf-8")

    @property
    def reports(self) -> tuple[Diagnostic, ...]:
        return _reports(self.path, self.shown)


@attrs.frozen
class RuleDoc:
    id: str
    severity: str
    title: str
    description: str
    area: str  # the rule file's stem (g2, router, ...) or the code's category (schema, yaml, ...)
    matrix: bool  # a support-matrix rule (rules/*.rules), not a built-in code
    help_uri: str | None
    code_fix: str | None  # a built-in code's written fix (matrix rules: their hints)
    failing: Example | None
    passing: Example | None
    no_example: str | None

    @property
    def precision(self) -> str:
        return PRECISION

    @property
    def tags(self) -> tuple[str, ...]:
        return (self.area, MATRIX_TAG) if self.matrix else (self.area,)

    @property
    def fix(self) -> tuple[str, ...]:
        """A code's written fix; a matrix rule's hints on its failing example."""
        if self.code_fix:
            return (self.code_fix,)
        found = self.failing.reports if self.failing else ()
        hints = (_sentence(d.hint) for d in found if d.rule == self.id and d.hint)
        return tuple(dict.fromkeys(hints))


def lint_text(text: str, file: str) -> tuple[Diagnostic, ...]:
    """What `kvreplay lint` reports on this text (rules, then inline suppressions), sorted."""
    from kvreplay import suppressions
    from kvreplay.compiler.documents import compile_text
    from kvreplay.rules.runner import run_rules
    from kvreplay.schema.diagnostics import sort_unique

    compiled = compile_text(text, file, rules=run_rules)
    return tuple(sort_unique(suppressions.apply(compiled.diagnostics, text, file)))


@cache
def _reports(path: Path, shown: str) -> tuple[Diagnostic, ...]:
    return lint_text(path.read_text(encoding="utf-8"), shown)


def rule_doc(rule_id: str) -> RuleDoc | None:
    return rule_docs().get(rule_id)


@cache
def rule_docs() -> dict[str, RuleDoc]:
    """Every catalog ID's documentation, sorted by ID."""
    from kvreplay.catalog import builtin_codes, catalog
    from kvreplay.rules.registry import rule_infos

    uris = {rule_id: entry[2] for rule_id, entry in catalog().items()}
    docs = [RuleDoc(info.code, info.severity, info.summary, info.summary,
                    info.category, False, uris.get(info.code), info.fix,
                    _example(info.code, "fail"), _example(info.code, "pass"), info.no_example)
            for info in builtin_codes()]
    docs += [RuleDoc(info.id, info.severity, info.title, " ".join(info.rationale.split()),
                     Path(info.file).stem, True, uris.get(info.id), None,
                     _example(info.id, "fail"), _example(info.id, "pass"), None)
             for info in rule_infos().values()]
    return {doc.id: doc for doc in sorted(docs, key=lambda d: d.id)}


def _example(rule_id: str, kind: str) -> Example | None:
    from kvreplay.rules.corpus import CASES_DIR, example

    path = example(rule_id, kind)
    if path is None:
        return None
    return Example(path, "rules/cases/" + path.relative_to(CASES_DIR).as_posix())


def _sentence(text: str) -> str:
    text = text.strip()
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def report_lines(found: tuple[Diagnostic, ...]) -> list[str]:
    """`line:col: severity RULE message` per finding, its hint on the next line."""
    lines = []
    for d in found:
        lines.append(f"{_where(d)}{d.severity} {d.rule} {d.message}")
        if d.hint:
            lines.append(f"  hint: {d.hint}")
    return lines


def _where(d: Diagnostic) -> str:
    if d.line is None:
        return ""
    return f"{d.line}:{d.column}: " if d.column is not None else f"{d.line}: "


def heading(doc: RuleDoc) -> str:
    return f"{doc.id} ({doc.severity}, {doc.area}): {doc.title}"


def render_text(doc: RuleDoc, rule_source: list[str] | None = None) -> str:
    """The plain-text help (SARIF `help.text`, and `kvreplay explain` with the rule's source)."""
    out = [heading(doc), ""]
    if doc.description.rstrip(".") != doc.title:
        out += [*textwrap.wrap(doc.description, _WIDTH), ""]
    if rule_source:
        out += [*rule_source, ""]
    if doc.failing is None or doc.passing is None:
        out += [*textwrap.wrap(f"Examples: none, because {_reason(doc)}.", _WIDTH), ""]
    else:
        out += [*_text_example("Failing example", doc.failing), ""]
        out += [*_text_example("Passing example", doc.passing), ""]
    out += textwrap.wrap("Fix: " + " ".join(doc.fix), _WIDTH, subsequent_indent="  ")
    if doc.help_uri:
        out += ["", f"Docs: {doc.help_uri}"]
    return "\n".join(out) + "\n"


def _text_example(label: str, example: Example) -> list[str]:
    lines = [f"{label} ({example.shown}):", ""]
    lines += ["    " + line if line else "" for line in example.text.rstrip().splitlines()]
    found = report_lines(example.reports)
    lines += ["", "  kvreplay lint reports:", *("    " + f for f in found)] if found else \
        ["", "  kvreplay lint reports nothing."]
    return lines


def render_markdown(doc: RuleDoc) -> str:
    """The Markdown help (SARIF `help.markdown`: GitHub code scanning shows it with the alert)."""
    out = [f"**{doc.id}** ({doc.severity}, `{doc.area}`): {doc.title}", ""]
    if doc.description.rstrip(".") != doc.title:
        out += [doc.description, ""]
    if doc.failing is None or doc.passing is None:
        out += [f"**Examples:** none, because {_reason(doc)}.", ""]
    else:
        out += [*_markdown_example("Failing example", doc.failing), ""]
        out += [*_markdown_example("Passing example", doc.passing), ""]
    out += ["**Fix:** " + " ".join(doc.fix), ""]
    more = f"`kvreplay explain {doc.id}` prints this help."
    out.append(f"[Documentation]({doc.help_uri}); {more}" if doc.help_uri else more)
    return "\n".join(out) + "\n"


def _markdown_example(label: str, example: Example) -> list[str]:
    text = example.text.rstrip()
    fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
    lines = [f"**{label}** (`{example.shown}`):", "", fence + example.language, text, fence, ""]
    found = example.reports
    if not found:
        return [*lines, "`kvreplay lint` reports nothing."]
    lines += ["`kvreplay lint` reports:", ""]
    for d in found:
        hint = f" (hint: {d.hint})" if d.hint else ""
        lines.append(f"- {_where(d)}{d.severity} `{d.rule}`: {d.message}{hint}")
    return lines


def _reason(doc: RuleDoc) -> str:
    return doc.no_example or "rules/cases/ holds no such case"
