"""What a sweep file names must exist: dotted config paths (in the config or native schema)
and summary figures (in the report schema)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

from kvreplay.compiler.source import Path, SourceMap

# Trace paths are the sweep's `traces`, never a swept value (they resolve against another folder).
TRACE_KEYS = {"yaml": ("traffic", "source", "paths"), "native": ("traffic", "trace_paths")}


def split_path(text: str) -> tuple[str, ...] | None:
    """`a.b.c` -> ("a", "b", "c"); None when a part is empty."""
    parts = tuple(text.split("."))
    return parts if all(parts) else None


def _branches(node: Mapping[str, Any], root: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The node and the alternatives it may take (anyOf, oneOf, allOf, if/then/else), with
    local `$ref`s resolved."""
    pending = [node]
    while pending:
        here = pending.pop()
        ref = here.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            target: Any = root
            for part in ref[2:].split("/"):
                target = target.get(part, {}) if isinstance(target, Mapping) else {}
            pending.append(target)
        yield here
        for key in ("anyOf", "oneOf", "allOf"):
            pending.extend(b for b in here.get(key, ()) if isinstance(b, Mapping))
        pending.extend(here[k] for k in ("then", "else") if isinstance(here.get(k), Mapping))


def path_problem(schema: Mapping[str, Any], parts: tuple[str, ...]) -> tuple[str, list[str]] | None:
    """Why `parts` names no key of `schema`: (message, the keys valid there); None if it does.

    Below a free-form mapping (an object without listed properties) any key goes."""
    node: Mapping[str, Any] = schema
    for i, part in enumerate(parts):
        where = ".".join(parts[:i]) or "the top level"
        props: dict[str, Any] = {}
        free = False
        for branch in _branches(node, schema):
            props.update(branch.get("properties") or {})
            if branch.get("additionalProperties") not in (None, False):
                free = True  # a mapping of free names (or of a shape)
        if not props and not free:
            free = any(b.get("type") == "object" for b in _branches(node, schema))
        if part in props:
            node = props[part]
            continue
        if free:
            return None
        if not props:
            return f"`{where}` is a value, not a mapping, so it has no key `{part}`", []
        return f"unknown key `{part}` in `{where}`", sorted(props)
    return None


@cache
def numeric_figures() -> tuple[str, ...]:
    """The report summary's number figures (report.schema.json), in schema order."""
    from kvreplay.compiler.validate import load_schema

    summary = load_schema("report")["properties"]["summary"]["properties"]
    out = []
    for name, node in summary.items():
        kinds = node.get("type")
        kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
        if {"number", "integer"} & set(kinds):
            out.append(name)
    return tuple(out)


def subtree(source: SourceMap, prefix: Path) -> SourceMap:
    """The source map of the value at `prefix`, re-rooted: positions stay in the same file."""
    n = len(prefix)

    def below(table: Mapping[Path, Any]) -> dict[Path, Any]:
        return {p[n:]: v for p, v in table.items() if p[:n] == prefix}

    return SourceMap(source.file, source.style, below(source.values), below(source.keys),
                     scalar_text=below(source.scalar_text))
