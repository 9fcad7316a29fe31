"""`--format github`: GitHub Actions workflow commands, which the runner turns into annotations.

`::error file=F,line=L,col=C,endLine=L2,endColumn=C2,title=RULE::message` (`warning` and
`notice` for the other severities). The message carries the hint and the related notes on
further lines. Text that may quote input (messages, paths) has its control characters shown as
escapes (io.display) and is then escaped as the runner documents (`%`, CR, LF; `:` and `,`
in properties), so no input can end a command's line or start another command. The runner
rejects columns on a multi-line annotation and an `endColumn` before `col`, so those are left
out; `endColumn` is exclusive, as in kvreplay's spans.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from kvreplay.formats.paths import root_relative
from kvreplay.formats.result import FileResult
from kvreplay.io.display import escape_inline
from kvreplay.schema.diagnostics import Diagnostic, Span

_COMMAND = {"error": "error", "warning": "warning", "note": "notice"}


def render_github(
    results: Sequence[FileResult], *, root: str | None = None, cwd: str | None = None
) -> str:
    """One workflow command per finding, in the order given; file paths relative to `root`."""
    return "".join(
        annotation(d, r.path, root=root, cwd=cwd) + "\n" for r in results for d in r.diagnostics
    )


def annotation(
    d: Diagnostic, default_file: str, *, root: str | None = None, cwd: str | None = None
) -> str:
    """The workflow command line (no newline) for one finding."""
    file = d.file or default_file
    properties: list[tuple[str, str]] = []
    if file:
        properties.append(("file", root_relative(file, root, cwd)[0]))
    properties.extend(_position(d.span))
    properties.append(("title", d.rule))
    parts = [d.message]
    if d.hint:
        parts.append(f"hint: {d.hint}")
    for related in d.related:
        where = _location(related.span.file or file, related.span, root, cwd)
        parts.append(f"note: {where}{related.message}")
    rendered = ",".join(f"{key}={property_value(value)}" for key, value in properties)
    head = f"::{_COMMAND[d.severity]} {rendered}" if rendered else f"::{_COMMAND[d.severity]}"
    return f"{head}::{data(*parts)}"


def _position(span: Span) -> list[tuple[str, str]]:
    if span.line is None:
        return []
    line, column = span.line, span.column
    end_line, end_column = span.end_line, span.end_column
    if end_line is not None and end_column == 1 and end_line > line:
        # A block value ends where the next line starts: the annotation ends a line earlier.
        end_line, end_column = end_line - 1, None
    if end_line is None or end_line < line:
        end_line, end_column = None, None
    fields = [("line", str(line))]
    if end_line is not None and end_line != line:
        return [*fields, ("endLine", str(end_line))]
    if column is not None:
        fields.append(("col", str(column)))
    if end_line is not None:
        fields.append(("endLine", str(end_line)))
    if column is not None and end_column is not None and end_column >= column:
        fields.append(("endColumn", str(end_column)))
    return fields


def _location(file: str, span: Span, root: str | None, cwd: str | None) -> str:
    parts = [root_relative(file, root, cwd)[0]] if file else []
    if file and span.line is not None:
        parts.append(str(span.line))
        if span.column is not None:
            parts.append(str(span.column))
    return ":".join(parts) + ": " if parts else ""


def data(*lines: str) -> str:
    """A command's message from text that may quote input, one line per part: control
    characters shown as escapes (so a part cannot break its line or colour the log), then the
    runner's escaping."""
    return escape_data("\n".join(escape_inline(line) for line in lines))


def property_value(text: str) -> str:
    """A property (`file=`, `title=`) from text that may quote input."""
    return escape_property(escape_inline(text))


def unprocessed(text: str) -> str:
    """Plain text for the log, which the runner must not read as commands (a line of input
    beginning with `::`, or holding `##[`, would be one): between `::stop-commands::TOKEN` and
    `::TOKEN::`. TOKEN is derived from the text (SHA-256), so the text cannot hold it and the
    output stays deterministic."""
    token = "kvreplay-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    ending = "" if not text or text.endswith("\n") else "\n"
    return f"::stop-commands::{token}\n{text}{ending}::{token}::\n"


def escape_data(text: str) -> str:
    """The runner's escaping of a command's message: `%`, CR and LF."""
    text = _encodable(text)
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """The runner's escaping of a property value: as data, plus `:` and `,`."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _encodable(text: str) -> str:
    # Lone surrogates (undecodable file names) cannot be written as UTF-8: show them escaped.
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
