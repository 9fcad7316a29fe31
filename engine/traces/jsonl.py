"""JSON Lines at the byte level: one object per line, located by line, column and byte offset.

Lines are read as bytes so that a row can be found again by its offset (the replay pass re-reads
rows instead of keeping them) and so that bad UTF-8 is reported with its position rather than
failing the whole file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from itertools import repeat
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any, BinaryIO

_BOM = b"\xef\xbb\xbf"
# The decoder recurses per level and runs out of stack somewhere past 900 levels; the place
# reported then is where the value passes this many.
MAX_NESTING = 200
TOO_DEEP = "arrays and objects nest too deeply"


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


# json.loads(text, parse_constant=..., object_pairs_hook=...) builds this decoder on every call.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=_unique_pairs)


def _find(text: str, token: tuple[str, int]) -> int | None:
    """1-based column of the n-th occurrence of a token in the line (None when not found)."""
    needle, occurrence = token
    at = -1
    for _ in range(occurrence):
        at = text.find(needle, at + 1)
        if at < 0:
            return None
    return at + 1


_LONG_NUMBER = re.compile(r"\d{4301,}")  # past Python's int-string conversion limit


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
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise LineError("TRACE-JSON", f"invalid JSON: {exc.msg}", exc.colno) from None
    except _BadToken as exc:
        raise LineError("TRACE-JSON", f"invalid JSON: {exc}", _find(text, exc.token)) from None
    except RecursionError:
        raise LineError("TRACE-JSON", f"invalid JSON: {TOO_DEEP}", too_deep(text) + 1) from None
    except ValueError as exc:
        digits = _LONG_NUMBER.search(text)
        if digits is not None and "digits" in str(exc):
            raise LineError("TRACE-JSON", f"a number of {len(digits.group()):,} digits is beyond "
                            "any value a trace field can hold", digits.start() + 1) from None
        raise LineError("TRACE-JSON", f"invalid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise LineError("TRACE-JSON", f"expected a JSON object, found {json_type(value)}", 1)
    return text, value


def too_deep(text: str, start: int = 0) -> int:
    """Offset of the first `[` or `{` nested more than MAX_NESTING levels deep in the value at
    `start` (else of the deepest one): where to point when the decoder ran out of stack."""
    depth = deepest = 0
    at = i = start
    while (found := _STRUCTURE.search(text, i)) is not None:
        i = found.end()
        if found.group() == '"':
            i = _string_end(text, found.start())
        elif found.group() in "[{":
            depth += 1
            if depth > deepest:
                deepest, at = depth, found.start()
                if depth > MAX_NESTING:
                    break
        else:
            depth -= 1
            if depth <= 0:
                break
    return at


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

    Walks the top-level object one member at a time and skips each value with the C decoder, so
    a key after a 50 MB value is found about as fast as json parses it. Only called when a
    diagnostic is made, on a line that parsed.
    """
    n = len(text)
    i = _skip_space(text, 0)
    if i >= n or text[i] != "{":
        return None
    i = _skip_space(text, i + 1)
    while i < n and text[i] == '"':
        end = _string_end(text, i)
        j = _skip_space(text, end)
        if j >= n or text[j] != ":":
            return None
        start = _skip_space(text, j + 1)
        if _is_key(text[i:end], key):
            if index is None:
                return start + 1, _value_end(text, start) + 1
            return _item_span(text, start, index)
        i = _skip_space(text, _value_end(text, start))
        if i >= n or text[i] != ",":
            return None
        i = _skip_space(text, i + 1)
    return None


def locate_path(text: str, keys: tuple[str, ...],
                index: int | None = None) -> tuple[int, int] | None:
    """locate() for a nested key (`("request", "replay", "input_length")`), its value's columns
    [start, end) in the line; the innermost object found when a key is missing."""
    span: tuple[int, int] | None = None
    for depth, key in enumerate(keys):
        inner = text if span is None else text[span[0] - 1:span[1] - 1]
        base = 0 if span is None else span[0] - 1
        found = locate(inner, key, index if depth == len(keys) - 1 else None)
        if found is None:
            return span
        span = (found[0] + base, found[1] + base)
    return span


_SPACE = re.compile(r"[ \t\r\n]*")
_SCALAR_END = re.compile(r"[,}\] \t\r\n]")
_STRUCTURE = re.compile(r'["\[\]{}]')
_BLOCK = 1 << 16
_PLAIN = json.JSONDecoder()


def _is_key(quoted: str, key: str) -> bool:
    if len(quoted) - 2 < len(key):  # escapes only make the quoted form longer
        return False
    try:
        return bool(json.loads(quoted) == key)
    except ValueError:
        return False


def _string_end(text: str, i: int) -> int:
    try:
        return int(scanstring(text, i + 1, False)[1])
    except ValueError:
        return len(text)


def _skip_space(text: str, i: int) -> int:
    match = _SPACE.match(text, i)
    return match.end() if match else i


def _value_end(text: str, i: int) -> int:
    """Index just past the JSON value starting at i."""
    n = len(text)
    if i >= n:
        return n
    if text[i] == '"':
        return _string_end(text, i)
    if text[i] in "{[":
        try:
            return int(_PLAIN.raw_decode(text, i)[1])
        except (ValueError, RecursionError):
            return n
    match = _SCALAR_END.search(text, i)
    return match.start() if match else n


def _item_span(text: str, start: int, index: int) -> tuple[int, int]:
    """The index-th item of the array at `start` (else the whole value): commas between nested
    values are counted in bulk, so an item near the end of a 5-million-item array is found at C
    speed."""
    if start >= len(text) or text[start] != "[":
        return start + 1, _value_end(text, start) + 1
    j = start + 1
    remaining = index  # commas of this array still to pass
    while remaining:
        end = _next_structure(text, j)
        commas = text.count(",", j, end)
        if commas >= remaining:
            j = _after_nth_comma(text, j, remaining)
            break
        remaining -= commas
        if end >= len(text) or text[end] in "]}":
            return start + 1, _value_end(text, start) + 1
        j = _value_end(text, end)
    j = _skip_space(text, j)
    return j + 1, _value_end(text, j) + 1


def _next_structure(text: str, j: int) -> int:
    """Index of the next quote or bracket from j (len(text) if none): five memchr-speed finds
    beat one regex search over a long run of numbers."""
    found = [at for at in map(text.find, '"[]{}', repeat(j)) if at >= 0]
    return min(found) if found else len(text)


def _after_nth_comma(text: str, j: int, n: int) -> int:
    """Index just past the n-th comma from j (there are at least n before any bracket)."""
    while True:
        block = j + _BLOCK
        count = text.count(",", j, block)
        if count >= n:
            break
        n -= count
        j = block
    at = j - 1
    for _ in range(n):
        at = text.find(",", at + 1, block)
    return at + 1
