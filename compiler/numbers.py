"""Integers as written in YAML and JSON, bounded to a float's range.

Python refuses to convert integers of more than 4,300 digits to and from text, and a float field
cannot hold one beyond 1.8e308. Both loaders reject such integers like NaN (a located
YAML-NON-FINITE / JSON-NON-FINITE), so every later stage can take any number as a number.
"""

from __future__ import annotations

MAX_INT_BITS = 1024  # 2**1024 is the first integer a float cannot hold
MAX_INT_DIGITS = 309  # more decimal digits than this is beyond 2**1024


def bounded_int(digits: str, base: int = 10) -> int | None:
    """The non-negative integer `digits` in `base`, or None when a float cannot hold it."""
    if base == 10 and len(digits.lstrip("0")) > MAX_INT_DIGITS:
        return None
    value = int(digits, base)
    return None if value.bit_length() > MAX_INT_BITS else value


def number_text(text: str) -> str:
    """A number as written, in backticks, abridged when it is long."""
    if len(text) <= 40:
        return f"`{text}`"
    return f"`{text[:16]}...{text[-8:]}` ({len(text):,} characters)"
