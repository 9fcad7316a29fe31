"""Simulated time: integer nanoseconds inside the engine, float milliseconds at its edges.

Integer time makes a compressed stretch of k equal passes end at exactly start + k * duration,
the same instant k single passes reach, so the compressed and step-by-step paths agree bit for bit.
Every duration is rounded to the nearest nanosecond once, as the reference engine's `Duration`s are.
"""

from __future__ import annotations

import math

NS_PER_MS = 1_000_000


def ms_to_ns(ms: float) -> int:
    """Nearest nanosecond of a duration or instant given in milliseconds (half rounds up)."""
    if not math.isfinite(ms):
        raise ValueError(f"simulated time must be finite, got {ms!r}")
    return math.floor(ms * NS_PER_MS + 0.5)


def ns_to_ms(ns: int) -> float:
    return ns / NS_PER_MS
