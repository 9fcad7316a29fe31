"""Inline suppressions: `# kvreplay: ignore[RULE-ID, ...]` on the line of a finding."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence

import attrs

from kvreplay.schema.diagnostics import Diagnostic, Span

_COMMENT = re.compile(r"#\s*kvreplay:\s*ignore\[([^\]]*)\]")


@attrs.frozen
class Suppression:
    line: int
    column: int
    end_column: int
    rule: str


def find(text: str) -> list[Suppression]:
    """Every rule named by an ignore comment, with the comment's position."""
    found: list[Suppression] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if "kvreplay" not in line:
            continue
        for match in _COMMENT.finditer(line):
            for rule in (r.strip() for r in match.group(1).split(",")):
                if rule:
                    found.append(Suppression(number, match.start() + 1, match.end() + 1, rule))
    return found


def apply(diagnostics: Sequence[Diagnostic], text: str | None,
          file: str | None) -> list[Diagnostic]:
    """Drop suppressed findings; warn (LINT-UNUSED-SUPPRESSION) about comments that drop nothing."""
    if not text or "kvreplay" not in text:
        return list(diagnostics)
    suppressions = find(text)
    used: set[Suppression] = set()
    kept: list[Diagnostic] = []
    for d in diagnostics:
        hits = [s for s in suppressions if s.line == d.line and fnmatch.fnmatchcase(d.rule, s.rule)]
        if hits and d.span.file == file:
            used.update(hits)
        else:
            kept.append(d)
    for s in suppressions:
        if s not in used:
            kept.append(Diagnostic(
                "LINT-UNUSED-SUPPRESSION", "warning",
                f"`kvreplay: ignore[{s.rule}]` suppresses nothing on this line",
                Span(file, None, s.line, s.column, s.line, s.end_column),
                hint="remove the comment, or fix the rule ID",
            ))
    return kept
