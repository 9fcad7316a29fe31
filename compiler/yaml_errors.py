"""YAML that cannot be composed at all, located: non-printable characters and deep nesting."""

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
    before saying where, at the node found by `deep_node`."""
    line, col = where or deep_node(text) or (None, None)
    return Diagnostic("YAML-SYNTAX", "error", f"document nests deeper than {MAX_DEPTH} levels",
                      Span(file, "$", line, col, line, col + 1 if col else None))


def deep_node(text: str) -> tuple[int, int] | None:
    """Line and column of the first value nested in more than MAX_DEPTH collections (else of
    the deepest value), from the parser's event stream, which does not recurse."""
    open_: list[list[int]] = []  # per open collection: [is a mapping, nodes seen in it]
    deepest: tuple[int, tuple[int, int] | None] = (-1, None)
    try:
        for event in YAML(typ="safe", pure=True).parse(io.StringIO(text)):
            if isinstance(event, CollectionEndEvent):
                open_.pop()
                continue
            if not isinstance(event, NodeEvent):
                continue
            key = bool(open_) and open_[-1][0] == 1 and open_[-1][1] % 2 == 0
            if open_:
                open_[-1][1] += 1
            if not key and len(open_) > deepest[0]:
                mark = event.start_mark
                deepest = (len(open_), (mark.line + 1, mark.column + 1))
                if len(open_) > MAX_DEPTH:
                    break
            if isinstance(event, CollectionStartEvent):
                open_.append([int(isinstance(event, MappingStartEvent)), 0])
    except YAMLError:
        pass
    return deepest[1]
