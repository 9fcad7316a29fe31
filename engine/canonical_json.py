"""Canonical JSON text, fast: what the report writers print."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

_string = json.encoder.encode_basestring  # the C encoder json.dumps(ensure_ascii=False) uses
_INF = float("inf")


def _float(value: float) -> str:
    if value != value or value in (_INF, -_INF):
        raise ValueError(f"Out of range float values are not JSON compliant: {value!r}")
    return float.__repr__(value)


def _null(_: None) -> str:
    return "null"


def _bool(value: bool) -> str:
    return "true" if value else "false"


# Scalars by exact type: one dict lookup instead of a chain of isinstance checks (subclasses,
# such as an IntEnum, take the general path below).
_SCALARS: dict[type, Callable[[Any], str]] = {
    str: _string, int: int.__repr__, float: _float, type(None): _null, bool: _bool}
# Per key sequence (as the mapping lists its keys): the keys sorted, each with its printed head
# `"key": `. Report rows list the same few key sequences thousands of times.
_PLANS: dict[tuple[Any, ...], list[tuple[Any, str]]] = {}
_MAX_PLANS = 1024  # free-form mappings (scaling configs) must not grow it without end


def canonical_json(value: Any, indent: str = "") -> str:
    """`json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)` with
    every line after the first prefixed by `indent`: the same text, several times faster (the
    standard encoder takes its pure-Python path whenever `indent` is set)."""
    scalar = _SCALARS.get(type(value))
    if scalar is not None:
        return scalar(value)
    if isinstance(value, Mapping):
        return _mapping(value, indent)
    if isinstance(value, list | tuple):
        if not value:
            return "[]"
        inner = indent + "  "
        return ("[\n" + inner + (",\n" + inner).join([canonical_json(v, inner) for v in value])
                + "\n" + indent + "]")
    return _other(value)


def _mapping(value: Mapping[Any, Any], indent: str) -> str:
    if not value:
        return "{}"
    inner = indent + "  "
    order = tuple(value)
    plan = _PLANS.get(order)
    if plan is None:
        plan = [(key, _string(key) + ": ") for key in sorted(order)]
        if len(_PLANS) < _MAX_PLANS:
            _PLANS[order] = plan
    parts = []
    scalars, float_text = _SCALARS, float.__repr__
    for key, head in plan:
        item = value[key]
        kind = type(item)
        if kind is float and item - item == 0.0:  # finite (inf - inf and NaN are NaN)
            parts.append(head + float_text(item))
            continue
        if item is None:
            parts.append(head + "null")
            continue
        scalar = scalars.get(kind)
        parts.append(head + (scalar(item) if scalar is not None
                             else canonical_json(item, inner)))
    return "{\n" + inner + (",\n" + inner).join(parts) + "\n" + indent + "}"


def _other(value: Any) -> str:
    """Subclasses of the scalar types, as json.dumps prints them."""
    if isinstance(value, str):
        return _string(value)
    if value is True or value is False:
        return _bool(value)
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return _float(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
