"""Diagnostics as values: every finding of every stage, and how they are ordered and counted."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

import attrs

Severity = Literal["error", "warning", "note"]
SEVERITY_ORDER: dict[str, int] = {"error": 0, "warning": 1, "note": 2}


@attrs.frozen
class Span:
    """A place in a source: file, JSON path and 1-based line/column range (line None = unknown)."""

    file: str | None = None
    path: str | None = None
    line: int | None = None
    column: int | None = None
    end_line: int | None = None
    end_column: int | None = None


@attrs.frozen
class Related:
    """Another place a finding read, e.g. the other role's value in a pool mismatch."""

    message: str
    span: Span


@attrs.frozen
class Diagnostic:
    """One finding: a rule ID, severity, message, optional hint, its span and related spans."""

    rule: str
    severity: Severity
    message: str
    span: Span = Span()
    hint: str | None = None
    related: tuple[Related, ...] = ()
    # Repeats of one finding folded into this one by `collapse_repeats`: how many there were in
    # all (this one, at `span`, is the first) and where the last one is.
    count: int = 1
    last: Span | None = None

    @property
    def file(self) -> str | None:
        return self.span.file

    @property
    def path(self) -> str | None:
        return self.span.path

    @property
    def line(self) -> int | None:
        return self.span.line

    @property
    def column(self) -> int | None:
        return self.span.column

    @property
    def end_line(self) -> int | None:
        return self.span.end_line

    @property
    def end_column(self) -> int | None:
        return self.span.end_column

    def sort_key(self) -> tuple[object, ...]:
        return (
            self.span.file or "",
            self.span.line if self.span.line is not None else 0,
            self.span.column if self.span.column is not None else 0,
            SEVERITY_ORDER[self.severity],
            self.rule,
            self.span.path or "",
            self.message,
        )

    def to_dict(self) -> dict[str, object]:
        """The public JSON form (cli.md): flat span fields plus related spans; a finding that
        stands for repeats also has their `count` and the `last` one's span."""
        out: dict[str, object] = {
            "rule": self.rule,
            "severity": self.severity,
            "message": self.message,
            "hint": self.hint,
            **_span_dict(self.span),
            "related": [
                {"message": r.message, **_span_dict(r.span)} for r in self.related
            ],
        }
        if self.count > 1:
            out["count"] = self.count
            out["last"] = _span_dict(self.last or self.span)
        return out


def _span_dict(span: Span) -> dict[str, object]:
    return {
        "file": span.file,
        "path": span.path,
        "line": span.line,
        "column": span.column,
        "end_line": span.end_line,
        "end_column": span.end_column,
    }


def sort_unique(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Sort by position and drop exact repeats, so each finding is reported once."""
    seen: set[Diagnostic] = set()
    unique: list[Diagnostic] = []
    for d in diagnostics:
        if d not in seen:
            seen.add(d)
            unique.append(d)
    return sorted(unique, key=Diagnostic.sort_key)


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.severity == "error" for d in diagnostics)


def collapse_repeats(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """One finding for each cause repeated down a file: the findings of one rule about the same
    key of the same file, with the same hint (a trace's rows that all miss `hash_ids`, or all
    overflow their hash ids at a wrong block size) become the first of them, with their count
    and the last one's line; the rest is kept as it is, in its order."""
    listed = list(diagnostics)
    groups: dict[tuple[object, ...], list[Diagnostic]] = {}
    for d in listed:
        groups.setdefault(_cause(d), []).append(d)
    out: list[Diagnostic] = []
    for d in listed:
        group = groups[_cause(d)]
        if len(group) < 2 or _cause(d) == ():
            out.append(d)
        elif group[0] is d:
            out.append(_folded(group))
    return out


# The figures of a row (its line, its lengths) differ from one repeat to the next; the words of
# the message say what the cause is.
_NUMBERS = re.compile(r"\d[\d,.]*")


def _cause(d: Diagnostic) -> tuple[object, ...]:
    """What makes two findings the same one repeated (the same rule, place in the row, hint
    and words); () for a finding never folded (no line in a file, related places, or already a
    fold)."""
    if d.span.file is None or d.span.line is None or d.related or d.count > 1:
        return ()
    return (d.rule, d.severity, d.span.file, d.span.path, d.hint,
            _NUMBERS.sub("#", d.message))


def _folded(group: list[Diagnostic]) -> Diagnostic:
    first, last = group[0], group[-1]
    lines = f"line {first.span.line}" if first.span.line == last.span.line \
        else f"lines {first.span.line} to {last.span.line}"
    return attrs.evolve(first, message=f"{first.message} ({len(group):,} times in this file, "
                        f"{lines})", count=len(group), last=last.span)
