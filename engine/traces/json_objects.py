"""One JSON object per line of a trace file, or the located diagnostic of a line that is not one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kvreplay.engine.traces.jsonl import LineError, decode_object, iter_lines
from kvreplay.engine.traces.rules import diag, unreadable
from kvreplay.schema.diagnostics import Diagnostic
from kvreplay.schema.files import open_regular

Line = tuple[int, str, dict[str, Any]]


def json_objects(path: str, display: str) -> Iterator[Line | Diagnostic]:
    """(line number, text, object) per non-blank line; TRACE-ENCODING / TRACE-JSON at the line
    that is not one object, TRACE-PATH (and nothing after it) when the file cannot be read."""
    try:
        with open_regular(path) as stream:
            for number, _, raw in iter_lines(stream):
                try:
                    text, obj = decode_object(raw, first_line=number == 1)
                except LineError as exc:
                    yield diag(exc.rule, exc.message, file=display, line=number,
                               column=exc.column)
                    continue
                yield number, text, obj
    except OSError as exc:
        yield unreadable(exc, display)
