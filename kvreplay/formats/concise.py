"""`--format concise`: one line per finding, `file:line:col: severity RULE message` (the first
line of the text format), for grep, editors and pre-commit."""

from __future__ import annotations

from collections.abc import Sequence

from kvreplay.formats.result import FileResult
from kvreplay.io.display import escape_inline
from kvreplay.schema.diagnostics import Diagnostic


def render_concise(results: Sequence[FileResult]) -> str:
    """Every finding of every file on its own line, in the order given; empty when clean."""
    lines = [concise_line(d, result.path) for result in results for d in result.diagnostics]
    return "".join(line + "\n" for line in lines)


def concise_line(d: Diagnostic, default_file: str) -> str:
    """`file:line:col: severity RULE message`, dropping the location parts the finding does
    not have."""
    location = location_prefix(d.file or default_file, d.line, d.column)
    return f"{location}{d.severity} {d.rule} {escape_inline(d.message)}"


def location_prefix(file: str | None, line: int | None, column: int | None) -> str:
    """`file:line:col: ` with missing trailing parts left out (empty when there is no file)."""
    if not file:
        return ""
    parts = [escape_inline(file)]
    if line is not None:
        parts.append(str(line))
        if column is not None:
            parts.append(str(column))
    return ":".join(parts) + ": "
