"""Where each key of a TOML document is defined (tomllib keeps no positions): a line scanner
good for the shapes settings take (tables, dotted keys, arrays over several lines)."""

from __future__ import annotations

import re

_PART = r"""(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*')"""
_DOTTED = rf"{_PART}(?:\s*\.\s*{_PART})*"
_HEADER = re.compile(rf"\s*\[\[?\s*({_DOTTED})\s*\]\]?\s*(?:#.*)?$")
_KEY = re.compile(rf"(\s*)({_DOTTED})\s*=")
_ONE_PART = re.compile(_PART)

Position = tuple[int, int]  # 1-based line and column


def parts(dotted: str) -> tuple[str, ...]:
    """`tool."kvreplay" . x` -> ("tool", "kvreplay", "x") (simple escapes only)."""
    return tuple(p[1:-1] if p[:1] in "\"'" else p for p in _ONE_PART.findall(dotted))


def key_positions(text: str) -> dict[tuple[str, ...], Position]:
    """The first definition of every table and key, by its full dotted path."""
    found: dict[tuple[str, ...], Position] = {}
    table: tuple[str, ...] = ()
    in_string: str | None = None
    depth = 0  # open brackets of a value that spans lines
    for number, line in enumerate(text.splitlines(), start=1):
        if in_string is not None:
            if line.count(in_string) % 2 == 1:
                in_string = None
            continue
        if depth == 0:
            header = _HEADER.match(line)
            key = None if header else _KEY.match(line)
            if header:
                table = parts(header.group(1))
                found.setdefault(table, (number, line.index("[") + 1))
            elif key:
                path = table + parts(key.group(2))
                for n in range(len(table) + 1, len(path) + 1):
                    found.setdefault(path[:n], (number, len(key.group(1)) + 1))
        value = _without_strings(line)
        depth = max(0, depth + value.count("[") - value.count("]")) if not _HEADER.match(line) \
            else 0
        for quote in ('"""', "'''"):
            if line.count(quote) % 2 == 1:
                in_string = quote
    return found


def _without_strings(line: str) -> str:
    line = re.sub(r'"(?:[^"\\]|\\.)*"|\'[^\']*\'', "", line)
    return line.split("#", 1)[0]


def locate(positions: dict[tuple[str, ...], Position], path: tuple[str, ...]) -> Position | None:
    """The position of `path`, else of its closest defined ancestor."""
    for n in range(len(path), 0, -1):
        if path[:n] in positions:
            return positions[path[:n]]
    return None


# Strings and comments (skipped whole), and the brackets that open and close arrays, inline
# tables and table headers.
_NESTING_TOKEN = re.compile(r'"""|\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*|[\[\]{}]')


def too_deep(text: str, limit: int) -> Position | None:
    """Where brackets and braces outside strings and comments first open more than `limit`
    levels, without recursing (tomllib recurses once or more a level)."""
    if text.count("[") + text.count("{") <= limit:
        return None
    depth = i = 0
    while (match := _NESTING_TOKEN.search(text, i)) is not None:
        token, i = match.group(), match.end()
        if token in ('"""', "'''"):
            end = text.find(token, i)
            if end < 0:
                return None
            i = end + 3
        elif token in "[{":
            depth += 1
            if depth > limit:
                at = match.start()
                return text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)
        elif token in "]}":
            depth = max(depth - 1, 0)
    return None
