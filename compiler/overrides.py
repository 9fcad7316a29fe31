"""`--set path.to.key=YAML_VALUE`: change a loaded document before validation.

The value is parsed as YAML and its diagnostics point at the `--set` argument, not the file.
A null value removes the key, as in a JSON Merge Patch (RFC 7386): `--set
engine.workers.aggregated.kv_cache.host_offload=null` replays the same config without G2. (The
one config key whose value may be null, `kv_transfer.bandwidth_gb_per_second`, defaults to null,
so removing it and setting it to null mean the same.)
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from typing import Any

import attrs

from kvreplay.compiler.source import Loaded, Path, format_path, parse_jsonpath
from kvreplay.compiler.yaml_loader import load_yaml_value

# The JSON loader's nesting bound: a deeper document would overflow the recursive validators.
MAX_DEPTH = 200
# A value that does not parse is a usage error (exit 2), not a finding about the config.
_UNPARSED = frozenset({"YAML-SYNTAX", "YAML-MULTI-DOCUMENT"})
_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


class OverrideError(ValueError):
    """A --set argument that cannot be applied (a usage error)."""


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
    label = f"--set {argument}"
    offset = len(label) - len(value_text)  # columns index into the label as printed
    parsed = load_yaml_value(" " * offset + value_text, label)
    error = _unparsed(argument, parsed, offset)
    if error is not None:
        raise error
    if len(path) + _depth(parsed.data) > MAX_DEPTH:
        raise OverrideError(f"--set {_quoted(argument)}: the value nests the config deeper "
                            f"than {MAX_DEPTH} levels")
    return path, parsed


def apply_overrides(loaded: Loaded, assignments: Sequence[str]) -> Loaded:
    """Apply assignments left to right; raises OverrideError for malformed ones."""
    parsed_all = [(argument, *parse_override(argument)) for argument in assignments]
    if not parsed_all or not isinstance(loaded.data, dict):
        return loaded
    data: Any = copy.deepcopy(loaded.data)
    diagnostics = list(loaded.diagnostics)
    source = attrs.evolve(loaded.source, overlays=list(loaded.source.overlays))
    for argument, path, parsed in parsed_all:
        diagnostics.extend(
            attrs.evolve(d, span=attrs.evolve(d.span, path=format_path(
                path + parse_jsonpath(d.span.path or "$"), loaded.source.style)))
            for d in parsed.diagnostics
        )
        remove = parsed.data is None and not parsed.diagnostics
        blocked = assign(data, path, parsed.data, remove=remove)
        if blocked is not None:
            where = ".".join(map(str, blocked))
            raise OverrideError(f"--set {_quoted(argument)}: `{_printable(where)}` is not a "
                                f"mapping, so `{_printable('.'.join(map(str, path)))}` "
                                "cannot be set")
        if not remove:
            source.overlays.append((path, parsed.source))
    return Loaded(data, source, loaded.text, tuple(diagnostics))


def assign(data: dict[str, Any], path: Path, value: Any, *, remove: bool = False) -> Path | None:
    """Set `path` to `value` in `data` in place (or remove it, as a merge-patch null does),
    creating missing mappings on the way; the prefix that is not a mapping, if one blocks it."""
    node = data
    for i, part in enumerate(path[:-1]):
        child = node.get(str(part))
        if child is None:
            child = node[str(part)] = {}
        if not isinstance(child, dict):
            return path[: i + 1]
        node = child
    if remove:
        node.pop(str(path[-1]), None)
    else:
        node[str(path[-1])] = value
    return None
