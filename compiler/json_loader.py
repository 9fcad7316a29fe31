"""JSON to plain data with a position for every key and value (native specs get file:line:col too).

A small recursive-descent parser over the standard library's string scanner: strict JSON (no NaN,
Infinity or trailing commas), duplicate keys and out-of-range numbers reported as diagnostics.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

from kvreplay.compiler.numbers import bounded_int, number_text
from kvreplay.compiler.reading import MAX_CONFIG_VALUES, too_many_values
from kvreplay.compiler.source import Loaded, Path, PathStyle, Position, SourceMap, format_path
from kvreplay.schema.diagnostics import Diagnostic, Related, Span

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")
_MAX_DEPTH = 200
_SURROGATE = re.compile("[\ud800-\udfff]")


class _Fail(Exception):
    def __init__(self, offset: int, message: str) -> None:
        super().__init__(message)
        self.offset = offset
        self.message = message


class _TooMany(Exception):
    def __init__(self, offset: int) -> None:
        super().__init__(offset)
        self.offset = offset


class _Parser:
    def __init__(self, text: str, source: SourceMap) -> None:
        self.text = text
        self.source = source
        self.values = 0
        self.lines = [0] + [m.end() for m in re.finditer("\n", text)]
        self.diagnostics: list[Diagnostic] = []
        self.recording = True

    def lc(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.lines, offset)
        return line, offset - self.lines[line - 1] + 1

    def position(self, start: int, end: int) -> Position:
        sl, sc = self.lc(start)
        el, ec = self.lc(end)
        return Position(sl, sc, el, ec)

    def span(self, path: Path, start: int, end: int) -> Span:
        p = self.position(start, end)
        return Span(self.source.file, format_path(path, self.source.style), p.line, p.column,
                    p.end_line, p.end_column)

    def ws(self, i: int) -> int:
        match = _WS.match(self.text, i)
        return match.end() if match else i

    def value(self, i: int, path: Path, depth: int) -> tuple[Any, int]:
        if depth > _MAX_DEPTH:
            raise _Fail(i, f"document nests deeper than {_MAX_DEPTH} levels")
        i = self.ws(i)
        self.values += 1
        if self.values > MAX_CONFIG_VALUES:
            raise _TooMany(i)
        if i >= len(self.text):
            raise _Fail(i, "unexpected end of document, expected a value")
        ch = self.text[i]
        start = i
        result: Any
        if ch == "{":
            result, i = self.obj(i, path, depth)
        elif ch == "[":
            result, i = self.arr(i, path, depth)
        elif ch == '"':
            result, i = self.string(i)
        elif self.text.startswith("true", i):
            result, i = True, i + 4
        elif self.text.startswith("false", i):
            result, i = False, i + 5
        elif self.text.startswith("null", i):
            result, i = None, i + 4
        else:
            result, i = self.number(i, path)
        if self.recording:
            self.source.values[path] = self.position(start, i)
        return result, i

    def string(self, i: int) -> tuple[str, int]:
        try:
            result, end = scanstring(self.text, i + 1, True)
        except json.JSONDecodeError as exc:
            if exc.msg.startswith("Invalid control character"):
                code = ord(self.text[exc.pos])
                raise _Fail(exc.pos, f"raw control character U+{code:04X} in a string (write "
                            f"it as the escape \\u{code:04x})") from None
            raise _Fail(exc.pos, exc.msg) from None
        if _SURROGATE.search(result):
            raise _Fail(i, "string holds a lone UTF-16 surrogate escape, which is not valid text")
        return result, end

    def number(self, i: int, path: Path) -> tuple[Any, int]:
        for word in ("NaN", "Infinity", "-Infinity"):
            if self.text.startswith(word, i):
                end = i + len(word)
                self.diagnostics.append(Diagnostic(
                    "JSON-NON-FINITE", "error", f"`{word}` is not valid JSON (not a finite number)",
                    self.span(path, i, end), hint="use a finite number"))
                return None, end
        match = _NUMBER.match(self.text, i)
        if match is None or match.end() == i:
            snippet = self.text[i:i + 12].split("\n")[0]
            raise _Fail(i, f"expected a value, found `{snippet}`")
        text = match.group(0)
        value: int | float | None
        if match.group(1) is None and match.group(2) is None:
            magnitude = bounded_int(text.lstrip("-"))
            value = None if magnitude is None else -magnitude if text[0] == "-" else magnitude
        else:
            value = float(text)
        if value is None or not math.isfinite(value):
            self.diagnostics.append(Diagnostic(
                "JSON-NON-FINITE", "error",
                f"{number_text(text)} is out of the range of a finite number",
                self.span(path, i, match.end()), hint="use a finite number"))
            return None, match.end()
        return value, match.end()

    def arr(self, i: int, path: Path, depth: int) -> tuple[list[Any], int]:
        out: list[Any] = []
        i = self.ws(i + 1)
        if i < len(self.text) and self.text[i] == "]":
            return out, i + 1
        while True:
            item, i = self.value(i, path + (len(out),), depth + 1)
            out.append(item)
            i = self.ws(i)
            if i < len(self.text) and self.text[i] == ",":
                i += 1
                continue
            if i < len(self.text) and self.text[i] == "]":
                return out, i + 1
            raise _Fail(i, "expected `,` or `]` in a list")

    def obj(self, i: int, path: Path, depth: int) -> tuple[dict[str, Any], int]:
        out: dict[str, Any] = {}
        first: dict[str, tuple[int, int]] = {}
        i = self.ws(i + 1)
        if i < len(self.text) and self.text[i] == "}":
            return out, i + 1
        while True:
            i = self.ws(i)
            if i >= len(self.text) or self.text[i] != '"':
                raise _Fail(i, "expected a quoted key")
            key_start = i
            key, i = self.string(i)
            key_end = i
            i = self.ws(i)
            if i >= len(self.text) or self.text[i] != ":":
                raise _Fail(i, "expected `:` after a key")
            child = path + (key,)
            if key in first:
                self.recording = False
                _ignored, i = self.value(i + 1, child, depth + 1)
                self.recording = True
                f_start, f_end = first[key]
                self.diagnostics.append(Diagnostic(
                    "JSON-DUPLICATE-KEY", "error",
                    f"duplicate key `{key}` (first defined at line {self.lc(f_start)[0]}); "
                    "this later value is ignored",
                    self.span(child, key_start, key_end),
                    hint="keep one of the two definitions",
                    related=(Related("first definition", self.span(child, f_start, f_end)),)))
            else:
                first[key] = (key_start, key_end)
                if self.recording:
                    self.source.keys[child] = self.position(key_start, key_end)
                out[key], i = self.value(i + 1, child, depth + 1)
            i = self.ws(i)
            if i < len(self.text) and self.text[i] == ",":
                i += 1
                continue
            if i < len(self.text) and self.text[i] == "}":
                return out, i + 1
            raise _Fail(i, "expected `,` or `}` in an object")


def load_json(text: str, file: str | None, style: PathStyle = "pointer") -> Loaded:
    """Parse a JSON document into plain data plus positions; problems become diagnostics."""
    source = SourceMap(file=file, style=style)
    parser = _Parser(text, source)
    try:
        data, end = parser.value(0, (), 0)
        end = parser.ws(end)
        if end < len(text):
            raise _Fail(end, "extra data after the JSON document")
    except _Fail as exc:
        line, col = parser.lc(min(exc.offset, len(text)))
        diagnostic = Diagnostic("JSON-SYNTAX", "error", f"JSON syntax error: {exc.message}",
                                Span(file, format_path((), style), line, col, line, col + 1))
        return Loaded(None, source, text, (*parser.diagnostics, diagnostic))
    except _TooMany as exc:
        line, col = parser.lc(exc.offset)
        return Loaded(None, source, text, (
            too_many_values(file, line, col, format_path((), style)),))
    except RecursionError:
        return Loaded(None, source, text, (Diagnostic(
            "JSON-SYNTAX", "error", "document nests too deeply", Span(file)),))
    diagnostics = list(parser.diagnostics)
    if not isinstance(data, dict):
        p = source.values.get(())
        diagnostics.append(Diagnostic(
            "JSON-NOT-OBJECT", "error", "the JSON document is not an object",
            Span(file, "", p.line if p else 1, p.column if p else 1)))
        return Loaded(None, source, text, tuple(diagnostics))
    return Loaded(data, source, text, tuple(diagnostics))
