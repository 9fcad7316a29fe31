"""YAML that cannot be composed at all, located: non-printable characters, deep nesting and
documents too large to compose."""

from __future__ import annotations

import io

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError
from ruamel.yaml.events import (
    CollectionEndEvent,
    CollectionStartEvent,
    MappingStartEvent,
    NodeEvent,
)
from ruamel.yaml.reader import ReaderError

from kvreplay.compiler.reading import MAX_CONFIG_VALUES, too_many_values
from kvreplay.schema.diagnostics import Diagnostic, Span

# Configs nest a few levels; the same bound as native JSON (json_loader), well before the
# recursive composer runs out of stack (somewhere past 450 levels).
MAX_DEPTH = 200


def unprintable(exc: ReaderError, file: str | None, text: str) -> Diagnostic | None:
    """A character YAML allows nowhere (a raw control character, U+FFFE...), at its line and
    column (lines split at `\\n`, as code frames are); None if the error is not about one."""
    if not isinstance(exc.character, int) or not isinstance(exc.position, int):
        return None
    code, offset = exc.character, exc.position
    line, col = text.count("\n", 0, offset) + 1, offset - text.rfind("\n", 0, offset)
    escape = f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"
    return Diagnostic("YAML-SYNTAX", "error",
                      f"YAML syntax error: non-printable character U+{code:04X} is not allowed",
                      Span(file, "$", line, col, line, col + 1),
                      hint=f'remove it; inside a double-quoted string it can be written "{escape}"')


def too_deep(file: str | None, text: str, where: tuple[int, int] | None = None) -> Diagnostic:
    """Nesting past MAX_DEPTH, at `where` (line, column) or, when the composer ran out of stack
    before saying where, at the node `scan` finds."""
    if where is None:
        found = _scan(text, pure=True)
        where = found[1] if found is not None else None
    line, col = where or (None, None)
    return Diagnostic("YAML-SYNTAX", "error", f"document nests deeper than {MAX_DEPTH} levels",
                      Span(file, "$", line, col, line, col + 1 if col else None))


def oversized(file: str | None, text: str) -> Diagnostic | None:
    """Nesting past MAX_DEPTH, or more than MAX_CONFIG_VALUES values, found before composing.

    ruamel's C composer recurses without a stack check (a config nested 30,000 levels deep
    kills the process) and every composed node costs about a kilobyte, so both are looked for
    in the parser's event stream, which does not recurse and keeps nothing. That walk costs an
    eighth of composing; it is skipped when the text is too short to hold that many values and
    has too few indicators to open that many collections (each collection starts at one of
    `[ { - ? :`)."""
    if len(text) < MAX_CONFIG_VALUES and sum(map(text.count, "[{-?:")) <= MAX_DEPTH:
        return None
    found = _scan(text, pure=False)
    if found is None:
        return None
    kind, (line, column) = found
    if kind == "deep":
        return too_deep(file, text, (line, column))
    return too_many_values(file, line, column)


def _scan(text: str, pure: bool) -> tuple[str, tuple[int, int]] | None:
    """("deep", where) for the first value nested in more than MAX_DEPTH collections, or
    ("many", where) for value MAX_CONFIG_VALUES + 1 (mapping keys are not counted); with
    pure=True, the deepest value up to the end or a syntax error (the composer ran out of stack
    first). Else None: a syntax error that comes first is for the composer to report."""
    open_: list[list[int]] = []  # per open collection: [is a mapping, nodes seen in it]
    deepest: tuple[int, tuple[int, int] | None] = (-1, None)
    values = 0
    try:
        for event in YAML(typ="safe", pure=pure).parse(io.StringIO(text)):
            if isinstance(event, CollectionEndEvent):
                open_.pop()
                continue
            if not isinstance(event, NodeEvent):
                continue
            key = bool(open_) and open_[-1][0] == 1 and open_[-1][1] % 2 == 0
            if open_:
                open_[-1][1] += 1
            if not key:
                values += 1
                if len(open_) > deepest[0]:
                    mark = event.start_mark
                    deepest = (len(open_), (mark.line + 1, mark.column + 1))
                    if len(open_) > MAX_DEPTH:
                        return "deep", deepest[1]
                if values > MAX_CONFIG_VALUES:
                    mark = event.start_mark
                    return "many", (mark.line + 1, mark.column + 1)
            if isinstance(event, CollectionStartEvent):
                open_.append([int(isinstance(event, MappingStartEvent)), 0])
    except YAMLError:
        if not pure:
            return None
    return ("deep", deepest[1]) if pure and deepest[1] is not None else None
