"""`--set path.to.key=YAML_VALUE`: change a loaded document before validation.

The value is parsed as YAML and its diagnostics point at the `--set` argument, not the file.
A null value removes the key, as in a JSON Merge Patch (RFC 7386): `--set
engine.workers.aggregated.kv_cache.host_offload=null` replays the same config without G2. (The
one config key whose value may be null, `kv_transfer.bandwidth_gb_per_second`, defaults to null,
so removing it and setting it to null mean the same.) Removing a key that is not there is checked
as setting it would be: a misspelt key is SCHEMA-UNKNOWN-KEY either way, never a silent no-op.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from typing import Any

from kvreplay.compiler.source import (
    Loaded,
    Path,
    Position,
    SourceMap,
    format_path,
    parse_jsonpath,
    parse_path,
)
from kvreplay.schema.diagnostics import Diagnostic, Span
from kvreplay.schema.frozen import evolve

# The JSON loader's nesting bound: a deeper document would overflow the recursive validators.
MAX_DEPTH = 200
# A value that does not parse is a usage error (exit 2), not a finding about the config.
_UNPARSED = frozenset({"YAML-SYNTAX", "YAML-MULTI-DOCUMENT"})
# What a key itself can be refused for, whatever its value.
_KEY_PROBLEMS = frozenset({"SCHEMA-UNKNOWN-KEY", "SCHEMA-NOT-APPLICABLE"})
_LABEL = "--set "  # the "file" of a finding located in an argument: `--set ARGUMENT`
_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


class OverrideError(ValueError):
    """A --set argument that cannot be applied (a usage error)."""


def from_argument(span: Span) -> bool:
    """Whether a finding is located in a `--set` argument (rather than in a file)."""
    return (span.file or "").startswith(_LABEL)


def _quoted(argument: str) -> str:
    text = repr(argument)
    return text if len(text) <= 80 else text[:76] + "...'"


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def parse_assignment(argument: str) -> tuple[Path, str]:
    where = f"--set {_quoted(argument)}"
    if _SURROGATE.search(argument):
        raise OverrideError(f"{where}: the argument is not valid UTF-8 text")
    key, sep, value = argument.partition("=")
    if not sep:
        raise OverrideError(f"{where}: expected PATH=VALUE, e.g. engine.backend=vllm")
    parts = key.strip().split(".")
    if not key.strip() or any(not p for p in parts):
        raise OverrideError(f"{where}: the path must be dotted keys like a.b.c")
    if any(_CONTROL.search(p) for p in parts):
        raise OverrideError(f"{where}: a key of the path holds a control character")
    if len(parts) > MAX_DEPTH:
        raise OverrideError(f"{where}: the path has {len(parts)} keys; a config nests at most "
                            f"{MAX_DEPTH} levels")
    return tuple(parts), value


def _depth(value: Any) -> int:
    """Nesting levels of a parsed value (0 for a scalar), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(node, dict):
            stack.extend((child, level + 1) for child in node.values())
        elif isinstance(node, list):
            stack.extend((child, level + 1) for child in node)
    return deepest


def _unparsed(argument: str, parsed: Loaded, offset: int) -> OverrideError | None:
    """The usage error of a value that is not one YAML value, if it is not."""
    problem = next((d for d in parsed.diagnostics if d.rule in _UNPARSED), None)
    if problem is None:
        return None
    message = problem.message.removeprefix("YAML syntax error: ")
    if problem.rule == "YAML-MULTI-DOCUMENT":
        message = "it holds more than one YAML document"
    at = ""
    if problem.span.line == 1 and problem.span.column is not None:
        at = f" (character {max(problem.span.column - offset, 1)} of the value)"
    return OverrideError(f"--set {_quoted(argument)}: the value is not valid YAML: "
                         f"{_printable(message)}{at}")


def parse_override(argument: str) -> tuple[Path, Loaded]:
    """The path and the parsed value of one `--set` argument; OverrideError when either is
    malformed (whatever the document it would apply to)."""
    path, value_text = parse_assignment(argument)
    label = _LABEL + argument
    offset = len(label) - len(value_text)  # columns index into the label as printed
    from kvreplay.compiler.yaml_loader import load_yaml_value  # ruamel: only for a --set

    parsed = load_yaml_value(" " * offset + value_text, label)
    error = _unparsed(argument, parsed, offset)
    if error is not None:
        raise error
    if len(path) + _depth(parsed.data) > MAX_DEPTH:
        raise OverrideError(f"--set {_quoted(argument)}: the value nests the config deeper "
                            f"than {MAX_DEPTH} levels")
    return path, parsed


def apply_overrides(loaded: Loaded, assignments: Sequence[str]) -> Loaded:
    """Apply assignments left to right; raises OverrideError for malformed ones.

    Every finding about what an argument set, created or removed is located in the argument,
    and removing a key that is not there is checked like setting it: a misspelt key is the
    same SCHEMA-UNKNOWN-KEY either way (a known key that is absent is simply not removed).
    """
    parsed_all = [(argument, *parse_override(argument)) for argument in assignments]
    if not parsed_all or not isinstance(loaded.data, dict):
        return loaded
    data: Any = copy.deepcopy(loaded.data)
    diagnostics = list(loaded.diagnostics)
    source = evolve(loaded.source, overlays=list(loaded.source.overlays))
    for argument, path, parsed in parsed_all:
        diagnostics.extend(
            evolve(d, span=evolve(d.span, path=format_path(
                path + parse_jsonpath(d.span.path or "$"), loaded.source.style)))
            for d in parsed.diagnostics
        )
        remove = parsed.data is None and not parsed.diagnostics
        kept = _kept_levels(data, path)
        overlay = (path[: kept + 1], _rooted(_argument_map(argument, path, parsed),
                                              path[: kept + 1]))
        if remove and not _present(data, path):
            diagnostics.extend(_unknown_keys(data, source, path, overlay))
            continue
        blocked = assign(data, path, parsed.data, remove=remove)
        if blocked is not None:
            where = ".".join(map(str, blocked))
            raise OverrideError(f"--set {_quoted(argument)}: `{_printable(where)}` is not a "
                                f"mapping, so `{_printable('.'.join(map(str, path)))}` "
                                "cannot be set")
        source.overlays.append(overlay)
    return Loaded(data, source, loaded.text, tuple(diagnostics))


def _kept_levels(data: dict[str, Any], path: Path) -> int:
    """How many mappings along the path exist already (the rest the argument creates)."""
    node, kept = data, 0
    for part in path[:-1]:
        child = node.get(str(part))
        if not isinstance(child, dict):
            break
        node, kept = child, kept + 1
    return kept


def _present(data: dict[str, Any], path: Path) -> bool:
    node: Any = data
    for part in path:
        if not isinstance(node, dict) or str(part) not in node:
            return False
        node = node[str(part)]
    return True


def _argument_map(argument: str, path: Path, parsed: Loaded) -> SourceMap:
    """Where each key of the path and each part of the value sit in `--set ARGUMENT`."""
    label = _LABEL + argument
    key = argument.partition("=")[0]
    column = len(_LABEL) + len(key) - len(key.lstrip()) + 1
    keys: dict[Path, Position] = {}
    values: dict[Path, Position] = {}
    for depth, part in enumerate(path, start=1):
        keys[path[:depth]] = Position(1, column, 1, column + len(str(part)))
        if depth > 1:  # a mapping the argument names runs from its key to the argument's end
            values[path[: depth - 1]] = Position(1, column, 1, len(label) + 1)
        column += len(str(part)) + 1
    values.update({path + sub: pos for sub, pos in parsed.source.values.items()})
    keys.update({path + sub: pos for sub, pos in parsed.source.keys.items()})
    scalars = {path + sub: text for sub, text in parsed.source.scalar_text.items()}
    return SourceMap(label, values=values, keys=keys, scalar_text=scalars)


def _rooted(full: SourceMap, prefix: Path) -> SourceMap:
    """The part of a map at or below `prefix`, with paths relative to it (an overlay)."""
    def below(table: dict[Path, Any]) -> dict[Path, Any]:
        return {p[len(prefix):]: v for p, v in table.items() if p[: len(prefix)] == prefix}

    return SourceMap(full.file, values=below(full.values), keys=below(full.keys),
                     scalar_text=below(full.scalar_text))


def _unknown_keys(data: dict[str, Any], source: SourceMap, path: Path,
                  overlay: tuple[Path, SourceMap]) -> list[Diagnostic]:
    """The findings a value at `path` would get for a key that is unknown or does not apply
    there: what removing an absent key reports, at the argument."""
    from kvreplay.compiler.pipeline import looks_like_native
    from kvreplay.compiler.validate import validate

    probe = copy.deepcopy(data)
    if assign(probe, path, None) is not None:
        return []
    created = {path[:depth] for depth in range(len(overlay[0]), len(path) + 1)}
    located = evolve(source, overlays=[*source.overlays, overlay])
    found = validate(probe, located, "native" if looks_like_native(data) else "config")
    return [d for d in found.diagnostics if d.rule in _KEY_PROBLEMS
            and d.span.path is not None and parse_path(d.span.path) in created]


def assign(data: dict[str, Any], path: Path, value: Any, *, remove: bool = False) -> Path | None:
    """Set `path` to `value` in `data` in place (or remove it, as a merge-patch null does),
    creating missing mappings on the way (a removal creates none); the prefix that is not a
    mapping, if one blocks it."""
    node = data
    for i, part in enumerate(path[:-1]):
        child = node.get(str(part))
        if child is None:
            if remove:
                return None
            child = node[str(part)] = {}
        if not isinstance(child, dict):
            return path[: i + 1]
        node = child
    if remove:
        node.pop(str(path[-1]), None)
    else:
        node[str(path[-1])] = value
    return None
