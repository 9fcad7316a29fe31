"""Diagnostics as values: every finding of every stage, and how they are ordered and counted."""

from __future__ import annotations

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
        """The public JSON form (cli.md): flat span fields plus related spans."""
        return {
            "rule": self.rule,
            "severity": self.severity,
            "message": self.message,
            "hint": self.hint,
            **_span_dict(self.span),
            "related": [
                {"message": r.message, **_span_dict(r.span)} for r in self.related
            ],
        }


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
