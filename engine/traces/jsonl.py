"""JSON Lines at the byte level: one object per line, located by line, column and byte offset.

Lines are read as bytes so that a row can be found again by its offset (the replay pass re-reads
rows instead of keeping them) and so that bad UTF-8 is reported with its position rather than
failing the whole file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, BinaryIO

_BOM = b"\xef\xbb\xbf"


class LineError(Exception):
    """A line that is not one JSON object: rule, message and 1-based column (None = whole line)."""

    def __init__(self, rule: str, message: str, column: int | None = None) -> None:
        super().__init__(message)
        self.rule = rule
        self.message = message
        self.column = column


def iter_lines(stream: BinaryIO) -> Iterator[tuple[int, int, bytes]]:
    """(1-based line number, byte offset, raw bytes) of every line that is not blank."""
    offset = 0
    for number, raw in enumerate(stream, start=1):
        if raw.strip():
            yield number, offset, raw
        offset += len(raw)


class _BadToken(ValueError):
    """A NaN/Infinity literal or a repeated key; `token` is the text to point at."""

    def __init__(self, message: str, token: str, occurrence: int = 1) -> None:
        super().__init__(message)
        self.token = (token, occurrence)


def _reject_constant(name: str) -> Any:
    raise _BadToken(f"`{name}` is not a JSON number (NaN and Infinity are not allowed)", name)


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _BadToken(f"duplicate key `{key}`", json.dumps(key), 2)
            seen.add(key)
    return obj


def _find(text: str, token: tuple[str, int]) -> int | None:
    """1-based column of the n-th occurrence of a token in the line (None when not found)."""
    needle, occurrence = token
    at = -1
    for _ in range(occurrence):
        at = text.find(needle, at + 1)
        if at < 0:
            return None
    return at + 1


def decode_object(raw: bytes, *, first_line: bool = False) -> tuple[str, dict[str, Any]]:
    """The line's text and its JSON object; raises LineError (TRACE-ENCODING or TRACE-JSON)."""
    if first_line and raw.startswith(_BOM):
        raise LineError("TRACE-ENCODING", "the file starts with a UTF-8 byte-order mark", 1)
    try:
        text = raw.rstrip(b"\r\n").decode("utf-8")
    except UnicodeDecodeError as exc:
        column = len(raw[: exc.start].decode("utf-8", "replace")) + 1
        bad = raw[exc.start: exc.end].hex(" ")
        raise LineError("TRACE-ENCODING", f"invalid UTF-8 byte(s) {bad}", column) from None
    try:
        value = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_unique_pairs)
    except json.JSONDecodeError as exc:
        raise LineError("TRACE-JSON", f"invalid JSON: {exc.msg}", exc.colno) from None
    except _BadToken as exc:
        raise LineError("TRACE-JSON", f"invalid JSON: {exc}", _find(text, exc.token)) from None
    except (ValueError, RecursionError) as exc:
        raise LineError("TRACE-JSON", f"invalid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise LineError("TRACE-JSON", f"expected a JSON object, found {json_type(value)}", 1)
    return text, value


def json_type(value: object) -> str:
    """The JSON name of a parsed value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def shown(value: object, limit: int = 40) -> str:
    """A short rendering of a found value for messages."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def locate(text: str, key: str, index: int | None = None) -> tuple[int, int] | None:
    """1-based columns [start, end) of a top-level key's value (or of its `index`-th item).

    A small scanner over the line: strings and nesting are tracked, so a key name inside a string
    value never matches. Only called when a diagnostic is made.
    """
    i, n, depth = 0, len(text), 0
    while i < n:
        ch = text[i]
        if ch == '"':
            end = _string_end(text, i)
            if depth == 1:
                j = _skip_space(text, end)
                if j < n and text[j] == ":" and json.loads(text[i:end]) == key:
                    start = _skip_space(text, j + 1)
                    stop = _value_end(text, start)
                    if index is None:
                        return start + 1, stop + 1
                    return _item_span(text, start, stop, index)
            i = end
            continue
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        i += 1
    return None


def _string_end(text: str, i: int) -> int:
    j = i + 1
    while j < len(text):
        if text[j] == "\\":
            j += 2
            continue
        if text[j] == '"':
            return j + 1
        j += 1
    return len(text)


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _value_end(text: str, i: int) -> int:
    """Index just past the JSON value starting at i."""
    n = len(text)
    if i >= n:
        return n
    if text[i] == '"':
        return _string_end(text, i)
    if text[i] in "{[":
        depth = 0
        j = i
        while j < n:
            ch = text[j]
            if ch == '"':
                j = _string_end(text, j)
                continue
            if ch in "{[":
                depth += 1
            elif ch in "}]":
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
        return n
    j = i
    while j < n and text[j] not in ",}] \t\r\n":
        j += 1
    return j


def _item_span(text: str, start: int, stop: int, index: int) -> tuple[int, int]:
    if start >= len(text) or text[start] != "[":
        return start + 1, stop + 1
    j = _skip_space(text, start + 1)
    for _ in range(index):
        j = _skip_space(text, _value_end(text, j))
        if j >= stop or text[j] != ",":
            return start + 1, stop + 1
        j = _skip_space(text, j + 1)
    return j + 1, _value_end(text, j) + 1
