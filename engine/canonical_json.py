"""Canonical JSON text, fast: what the report writers print."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

_string = json.encoder.encode_basestring  # the C encoder json.dumps(ensure_ascii=False) uses
_float = float.__repr__
_int = int.__repr__


def canonical_json(value: Any, indent: str = "") -> str:
    """`json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)` with
    every line after the first prefixed by `indent`: the same text, several times faster (the
    standard encoder takes its pure-Python path whenever `indent` is set)."""
    if isinstance(value, str):
        return _string(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return _int(value)
    if isinstance(value, float):
        if value != value or value in (_INF, -_INF):
            raise ValueError(f"Out of range float values are not JSON compliant: {value!r}")
        return _float(value)
    inner = indent + "  "
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        items = [f"{inner}{_string(key)}: {canonical_json(value[key], inner)}"
                 for key in sorted(value)]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, list | tuple):
        if not value:
            return "[]"
        return ("[\n" + ",\n".join(inner + canonical_json(item, inner) for item in value)
                + "\n" + indent + "]")
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_INF = float("inf")
