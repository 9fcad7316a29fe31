"""Compact JSON written the way the reference engine's serde_json writes it.

Digests and transcripts the reference computes over serialized JSON (graph digests, the
lifecycle transcript) must match byte for byte, so floats follow ryu's shortest round-trip form
(`0.0`, `98.0`, `1e-7`, `1e16`, not Python's `1e-07` / `1e+16`) and keys keep insertion order.
"""

from __future__ import annotations

import json
import math
from typing import Any


def f64(value: float) -> str:
    """serde_json's text of a finite f64."""
    if not math.isfinite(value):
        raise ValueError(f"non-finite float {value!r} cannot be serialized")
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    text = repr(float(value))
    if "e" in text:
        mantissa, exponent = text.split("e")
        if mantissa.endswith(".0"):
            mantissa = mantissa[:-2]
        return f"{mantissa}e{int(exponent)}"
    return text if "." in text else text + ".0"


def dumps(value: Any) -> str:
    """Compact JSON (no spaces), keys in insertion order, serde float text."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f64(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ",".join(dumps(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(str(k), ensure_ascii=False) + ":" + dumps(v)
                              for k, v in value.items()) + "}"
    raise TypeError(f"cannot serialize {type(value).__name__}")


def seconds_to_ms(seconds: float) -> float:
    """The reference's seconds -> milliseconds: negatives floor to 0, 1 ns quantum, half up."""
    x = max(seconds, 0.0) * 1e9
    whole = math.floor(x)
    rounded = whole + 1.0 if x - whole >= 0.5 else float(whole)
    return rounded / 1e6


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# Strict JSON as serde reads it: a repeated key or a NaN/Infinity literal is an error.
STRICT = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
