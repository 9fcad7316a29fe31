"""What a reporter formats: one checked file with its source text and its diagnostics."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from kvreplay.schema.diagnostics import Diagnostic


@attrs.frozen
class FileResult:
    """One checked file: its path as given, its text (None if unreadable), its findings."""

    path: str
    source: str | None = None
    diagnostics: tuple[Diagnostic, ...] = ()


@attrs.frozen
class Summary:
    """Counts over a run: files checked and findings by severity."""

    files: int
    errors: int
    warnings: int
    notes: int


def summarize(results: Sequence[FileResult]) -> Summary:
    errors = warnings = notes = 0
    for result in results:
        for d in result.diagnostics:  # a finding that stands for repeats counts each of them
            if d.severity == "error":
                errors += d.count
            elif d.severity == "warning":
                warnings += d.count
            else:
                notes += d.count
    return Summary(len(results), errors, warnings, notes)
