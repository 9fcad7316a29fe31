"""`--set path.to.key=YAML_VALUE`: change a loaded document before validation.

The value is parsed as YAML and its diagnostics point at the `--set` argument, not the file.
A null value removes the key, as in a JSON Merge Patch (RFC 7386): `--set
engine.workers.aggregated.kv_cache.host_offload=null` replays the same config without G2. (The
one config key whose value may be null, `kv_transfer.bandwidth_gb_per_second`, defaults to null,
so removing it and setting it to null mean the same.)
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import attrs
from kvreplay.compiler.source import Loaded, Path, format_path, parse_jsonpath
from kvreplay.compiler.yaml_loader import load_yaml_value


class OverrideError(ValueError):
    """A --set argument that cannot be applied (a usage error)."""


def parse_assignment(argument: str) -> tuple[Path, str]:
    key, sep, value = argument.partition("=")
    if not sep:
        raise OverrideError(f"--set {argument!r}: expected PATH=VALUE, e.g. engine.backend=vllm")
    parts = key.strip().split(".")
    if not key.strip() or any(not p for p in parts):
        raise OverrideError(f"--set {argument!r}: the path must be dotted keys like a.b.c")
    return tuple(parts), value


def apply_overrides(loaded: Loaded, assignments: Sequence[str]) -> Loaded:
    """Apply assignments left to right; raises OverrideError for malformed ones."""
    if not assignments:
        return loaded
    if not isinstance(loaded.data, dict):
        return loaded
    data: Any = copy.deepcopy(loaded.data)
    diagnostics = list(loaded.diagnostics)
    source = attrs.evolve(loaded.source, overlays=list(loaded.source.overlays))
    for argument in assignments:
        path, value_text = parse_assignment(argument)
        label = f"--set {argument}"
        offset = len(label) - len(value_text)  # columns index into the label as printed
        parsed = load_yaml_value(" " * offset + value_text, label)
        diagnostics.extend(
            attrs.evolve(d, span=attrs.evolve(d.span, path=format_path(
                path + parse_jsonpath(d.span.path or "$"), loaded.source.style)))
            for d in parsed.diagnostics
        )
        node = data
        for i, part in enumerate(path[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                where = ".".join(map(str, path[: i + 1]))
                raise OverrideError(f"--set {argument!r}: `{where}` is not a mapping, so "
                                    f"`{'.'.join(map(str, path))}` cannot be set")
            node = child
        if parsed.data is None and not parsed.diagnostics:
            node.pop(path[-1], None)
            continue
        node[path[-1]] = parsed.data
        source.overlays.append((path, parsed.source))
    return Loaded(data, source, loaded.text, tuple(diagnostics))

