"""`--format text`: each finding with a code frame of its lines, its hint and its related notes.

```
configs/a.yaml:3:1: error YAML-DUPLICATE-KEY duplicate key `a`
 2 | b: 2
 3 | a: 3
   | ^
  hint: keep one of the two definitions
configs/a.yaml:1:1: note: first definition
 1 | a: 1
   | -

1 error, 0 warnings in 1 file
```

Columns are code points (as the loaders count them); on screen tabs expand to stops of
`TAB_WIDTH`, wide (East Asian) characters take two cells and combining marks none, so the
underline sits under the span. Control and other invisible characters in the code frame show as
the same escapes as in messages (`\x1b`, `\u202e`: io.display), as wide as they print. A line
wider than `MAX_LINE_CELLS` (a one-line file of 40,000 characters) shows that many cells of it,
from its start when the span starts in its first `MAX_LINE_CELLS - LEAD_CELLS`, else from
`LEAD_CELLS` before the span's start, with `...` where it is cut; a context line is cut around
the same column as the spanned line beside it.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence

from kvreplay.formats.concise import location_prefix
from kvreplay.formats.result import FileResult, Summary, summarize
from kvreplay.io.display import escape_inline
from kvreplay.schema.diagnostics import Diagnostic, Span

TAB_WIDTH = 4
CONTEXT_LINES = 1
# A span longer than this (a missing key points at its whole parent mapping) shows its first and
# last KEPT_LINES lines around an ellipsis.
MAX_SPAN_LINES = 5
KEPT_LINES = 2
MAX_LINE_CELLS = 120  # of a line shown in a frame; a wider one is cut around the span
LEAD_CELLS = 40  # of which before the span's start
CUT = "..."

_RESET = "\x1b[0m"
_BOLD = "\x1b[1m"
_RED = "\x1b[31m"
_GREEN = "\x1b[32m"
_YELLOW = "\x1b[33m"
_BLUE = "\x1b[34m"
_CYAN = "\x1b[36m"
_SEVERITY_STYLE = {"error": _BOLD + _RED, "warning": _BOLD + _YELLOW, "note": _BOLD + _CYAN}


def render_text(results: Sequence[FileResult], *, color: bool = False) -> str:
    """All findings, in the order given, each followed by a blank line; then a summary line."""
    rows: list[str] = []
    for result in results:
        if not result.diagnostics:
            continue
        source = _Source(result.source) if result.source is not None else None
        for d in result.diagnostics:
            rows.extend(_block(d, result.path, source, color))
            rows.append("")
    rows.append(summary_line(summarize(results), color=color))
    return "\n".join(rows) + "\n"


def summary_line(summary: Summary, *, color: bool = False) -> str:
    """`N errors, M warnings in K files` (notes mentioned only when there are some)."""
    counts = [_plural(summary.errors, "error"), _plural(summary.warnings, "warning")]
    if summary.notes:
        counts.append(_plural(summary.notes, "note"))
    line = f"{', '.join(counts)} in {_plural(summary.files, 'file')}"
    if summary.errors:
        style = _BOLD + _RED
    elif summary.warnings:
        style = _BOLD + _YELLOW
    else:
        style = _BOLD + _GREEN
    return _paint(line, style, color)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _paint(text: str, style: str, color: bool) -> str:
    return f"{style}{text}{_RESET}" if color and text else text


def _block(d: Diagnostic, path: str, source: _Source | None, color: bool) -> list[str]:
    file = d.file or path
    location = location_prefix(file, d.line, d.column)
    rows = [
        _paint(location.rstrip(), _BOLD, color)
        + (" " if location else "")
        + _paint(d.severity, _SEVERITY_STYLE[d.severity], color)
        + " "
        + _paint(d.rule, _BOLD, color)
        + " "
        + escape_inline(d.message)
    ]
    frame: list[str] = []
    if source is not None and file == path:
        frame = code_frame(source, d.span, CONTEXT_LINES, "^", _SEVERITY_STYLE[d.severity], color)
    rows.extend(frame)
    if not frame and d.path not in (None, "", "$"):
        rows.append(f"  at {escape_inline(d.path or '')}")
    if d.hint:
        rows.append(f"  {_paint('hint', _BOLD + _CYAN, color)}: {escape_inline(d.hint)}")
    for related in d.related:
        related_file = related.span.file or file
        note_location = location_prefix(related_file, related.span.line, related.span.column)
        rows.append(
            _paint(note_location.rstrip(), _BOLD, color)
            + (" " if note_location else "")
            + _paint("note", _SEVERITY_STYLE["note"], color)
            + ": "
            + escape_inline(related.message)
        )
        if source is not None and related_file == path:
            rows.extend(code_frame(source, related.span, 0, "-", _BOLD + _CYAN, color))
    return rows


class _Source:
    """A file's lines as the loaders number them: split at `\\n`, a trailing `\\r` dropped."""

    def __init__(self, text: str) -> None:
        self._lines = text.split("\n")
        # The empty piece after a final newline is a place a span can point at (end of file),
        # but not a line worth showing as context.
        ends_with_newline = len(self._lines) > 1 and text.endswith("\n")
        self.last_context_line = len(self._lines) - (1 if ends_with_newline else 0)

    def __len__(self) -> int:
        return len(self._lines)

    def line(self, number: int) -> str:
        return self._lines[number - 1].removesuffix("\r")


def code_frame(
    source: _Source,
    span: Span,
    context: int,
    marker: str,
    style: str,
    color: bool,
) -> list[str]:
    """Gutter-numbered lines of `span` (plus `context` lines each side) with `marker`s under it."""
    if span.line is None or not 1 <= span.line <= len(source):
        return []
    segments = _segments(source, span)
    first, last = segments[0][0], segments[-1][0]
    before = range(max(1, first - context), first)
    after = range(last + 1, min(last + context, source.last_context_line) + 1)
    elide = len(segments) > MAX_SPAN_LINES
    shown: list[tuple[int, int, int] | None] = (
        [*segments[:KEPT_LINES], None, *segments[-KEPT_LINES:]] if elide else [*segments]
    )
    width = len(str(max(last, after[-1] if after else 0)))
    gutter_blank = _paint(f" {'':>{width}} |", _BLUE, color)

    def numbered(n: int, near: tuple[int, int, int]) -> str:
        text = _Shown(source.line(n), near[1]).text()
        return (_paint(f" {n:>{width}} |", _BLUE, color) + " " + text).rstrip()

    rows = [numbered(n, segments[0]) for n in before]
    for segment in shown:
        if segment is None:
            rows.append(f"{gutter_blank} ...")
            continue
        n, start, end = segment
        rows.append(numbered(n, segment))
        if end > start:
            lead, cells = _Shown(source.line(n), start).underline(start, end)
            underline = marker * cells
            rows.append(f"{gutter_blank} {' ' * lead}{_paint(underline, style, color)}")
    rows.extend(numbered(n, segments[-1]) for n in after)
    return rows


class _Shown:
    """A line as a frame shows it: whole when it fits `MAX_LINE_CELLS`, else the code points
    [first, last) around the code point `near` (the span's start), cut marks around them."""

    def __init__(self, line: str, near: int) -> None:
        self.parts, self.columns = _display(line)
        columns = self.columns
        self.first, self.last = 0, len(columns) - 1
        if columns[-1] <= MAX_LINE_CELLS:
            return
        lead = _cell(columns, near)
        if lead <= MAX_LINE_CELLS - LEAD_CELLS:  # the line's start leaves room for the span
            lead = LEAD_CELLS
        lo = max(0, min(lead - LEAD_CELLS, columns[-1] - MAX_LINE_CELLS))
        self.first = bisect_left(columns, lo)  # the first code point starting at or after lo
        self.last = bisect_right(columns, columns[self.first] + MAX_LINE_CELLS) - 1

    def text(self) -> str:
        cut = self.last < len(self.columns) - 1
        return ((CUT if self.first else "") + "".join(self.parts[self.first:self.last])
                + (CUT if cut else ""))

    def underline(self, start: int, end: int) -> tuple[int, int]:
        """(cells before the underline, its cells) of code points [start, end), within what
        is shown (under a cut mark when the span lies past it)."""
        columns = self.columns
        lo = columns[self.first]
        s, e = max(_cell(columns, start), lo), _cell(columns, end)
        if self.last < len(columns) - 1:
            hi = columns[self.last]
            s, e = min(s, hi), min(e, hi)
        return s - lo + (len(CUT) if self.first else 0), max(1, e - s)


def _segments(source: _Source, span: Span) -> list[tuple[int, int, int]]:
    """`(line, start, end)` per spanned line: 0-based code-point ranges to underline."""
    assert span.line is not None
    first_line = span.line
    first_text = source.line(first_line)
    if span.column is None:
        indent = _indent(first_text)
        return [(first_line, indent, max(len(first_text.rstrip()), indent + 1))]
    start = span.column - 1
    end_line, end_column = span.end_line, span.end_column
    if (
        end_line is None
        or end_column is None
        or (end_line, end_column) <= (first_line, span.column)
    ):
        return [(first_line, start, start + 1)]
    if end_line > len(source):
        end_line = len(source)
        end_column = len(source.line(end_line)) + 1
    segments: list[tuple[int, int, int]] = []
    for n in range(first_line, end_line + 1):
        text = source.line(n)
        seg_start = start if n == first_line else _indent(text)
        seg_end = end_column - 1 if n == end_line else len(text.rstrip())
        segments.append((n, seg_start, seg_end))
    # Block values end at the start of the next key: drop trailing lines the span only touches.
    while len(segments) > 1 and segments[-1][2] <= segments[-1][1]:
        segments.pop()
    n, seg_start, seg_end = segments[0]
    if seg_end <= seg_start:
        segments[0] = (n, seg_start, seg_start + 1)
    return segments


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


def _cell(columns: list[int], index: int) -> int:
    """The screen cell where code point `index` starts (past the end: one cell per code point)."""
    if index < len(columns):
        return columns[index]
    return columns[-1] + index - (len(columns) - 1)


def _display(text: str) -> tuple[str | list[str], list[int]]:
    """The glyph of each code point as shown (the line itself when each is its own), and the
    screen cell where each code point (and the end) starts."""
    if text.isascii() and text.isprintable():
        return text, list(range(len(text) + 1))
    parts: list[str] = []
    columns = [0]
    cell = 0
    for ch in text:
        if ch == "\t":
            width = TAB_WIDTH - cell % TAB_WIDTH
            glyph = " " * width
        else:
            glyph, width = _glyph(ch)
        parts.append(glyph)
        cell += width
        columns.append(cell)
    return parts, columns


def _glyph(ch: str) -> tuple[str, int]:
    if not ch.isprintable():  # shown as every formatter shows it: `\x1b`, `\u202e`...
        glyph = escape_inline(ch)
        return glyph, len(glyph)
    if ch.isascii():
        return ch, 1
    import unicodedata

    if unicodedata.category(ch) in ("Mn", "Me"):
        return ch, 0
    return ch, 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
