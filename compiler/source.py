"""Documents loaded with positions: plain data, where each key and value came from, and paths."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

import attrs

from kvreplay.schema.diagnostics import Diagnostic, Span
from kvreplay.schema.frozen import evolve

Path = tuple[str | int, ...]
PathStyle = Literal["jsonpath", "pointer"]

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


def format_path(path: Path, style: PathStyle = "jsonpath") -> str:
    """Render a path as `$.a.b[0]` (YAML configs) or `/a/b/0` (native JSON, RFC 6901)."""
    if style == "pointer":
        return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)
    out = ["$"]
    for part in path:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif _IDENT.match(part):
            out.append(f".{part}")
        else:
            out.append("[" + repr(part) + "]")
    return "".join(out)


_JSONPATH_PART = re.compile(
    r"\.([A-Za-z_][A-Za-z0-9_\-]*)|\[(\d+)\]|\[('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")\]"
)


def parse_jsonpath(text: str) -> Path:
    """The inverse of format_path for the `$...` style."""
    import ast

    parts: list[str | int] = []
    pos = 1 if text.startswith("$") else 0
    while pos < len(text):
        match = _JSONPATH_PART.match(text, pos)
        if match is None:
            raise ValueError(f"not a JSON path: {text!r}")
        name, index, quoted = match.groups()
        parts.append(name if name is not None else int(index) if index is not None
                     else ast.literal_eval(quoted))
        pos = match.end()
    return tuple(parts)


def parse_path(text: str) -> Path | None:
    """Parse either style: `$.a[0]` or `/a/0` (list indices come back as ints)."""
    if text.startswith("$"):
        return parse_jsonpath(text)
    if text == "" or text.startswith("/"):
        parts = [p.replace("~1", "/").replace("~0", "~") for p in text.split("/")[1:]]
        return tuple(int(p) if p.isascii() and p.isdigit() else p for p in parts)
    return None


@attrs.frozen
class Position:
    """A 1-based inclusive-start, exclusive-end range (end_column points just past the text)."""

    line: int
    column: int
    end_line: int
    end_column: int


@attrs.define
class SourceMap:
    """Where each path's key and value sit in one source (a file, or a `--set` argument)."""

    file: str | None
    style: PathStyle = "jsonpath"
    values: dict[Path, Position] = attrs.field(factory=dict)
    keys: dict[Path, Position] = attrs.field(factory=dict)
    # Overrides: paths at or below these prefixes come from another source (a --set argument).
    overlays: list[tuple[Path, SourceMap]] = attrs.field(factory=list)
    # The source text of scalars whose text matters for hints (e.g. `1.10` read as a float).
    scalar_text: dict[Path, str] = attrs.field(factory=dict)

    def span(self, path: Path, *, key: bool = False) -> Span:
        """The span of a path's value (or key); a missing path falls back to its ancestor."""
        for prefix, overlay in reversed(self.overlays):
            if path[: len(prefix)] == prefix:
                inner = overlay.span(path[len(prefix) :], key=key)
                return evolve(inner, path=format_path(path, self.style))
        probe = path
        while True:
            pos = (self.keys.get(probe) if key else None) or self.values.get(probe)
            if pos is not None or not probe:
                break
            probe = probe[:-1]
        rendered = format_path(path, self.style)
        if pos is None:
            return Span(file=self.file, path=rendered)
        return Span(
            file=self.file,
            path=rendered,
            line=pos.line,
            column=pos.column,
            end_line=pos.end_line,
            end_column=pos.end_column,
        )

    def replaced_child(self, path: Path, key: str | None = None) -> Path | None:
        """The child of `path` (named `key`, or any) that an overlay replaced or removed, last
        first: a key missing there is the overlay's doing, so findings about it belong there."""
        for prefix, _ in reversed(self.overlays):
            if len(prefix) == len(path) + 1 and prefix[:-1] == path \
                    and key in (None, prefix[-1]):
                return prefix
        return None

    def has(self, path: Path) -> bool:
        return path in self.values


@attrs.frozen
class Loaded:
    """A parsed document: plain JSON-like data (None when unusable) plus its map and findings."""

    data: Any
    source: SourceMap
    text: str
    diagnostics: Sequence[Diagnostic] = ()
