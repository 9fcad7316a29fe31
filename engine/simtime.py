"""Simulated time: integer nanoseconds inside the engine, float milliseconds at its edges.

Integer time makes a compressed stretch of k equal passes end at exactly start + k * duration,
the same instant k single passes reach, so the compressed and step-by-step paths agree bit for bit.
Every duration is rounded to the nearest nanosecond once, as the reference engine's `Duration`s are.
"""

from __future__ import annotations

import math

from kvreplay.engine.errors import EngineError

NS_PER_MS = 1_000_000
# About 146 years of simulated time. The engine keeps instants and durations in signed 64-bit
# slots (array('q'): token gaps, stretch durations), where the difference of two instants
# within +-2**62 ns always fits; a replay that would pass it is refused, not approximated.
HORIZON_NS = 2**62
HORIZON_MS = HORIZON_NS / NS_PER_MS
HORIZON_TEXT = "2**62 ns (about 146 years)"


class ClockOverflow(EngineError):
    """A time or duration past the horizon: a tiny speedup, rate, bandwidth or speedup_ratio."""

    def __init__(self, ms: float) -> None:
        super().__init__(
            f"simulated time would reach {ms:.3g} ms, past the engine's horizon of "
            f"{HORIZON_TEXT}: a trace whose arrivals span more than that, or a very small "
            "speedup, request rate, bandwidth or speedup_ratio, stretches the replay that far")


def ms_to_ns(ms: float) -> int:
    """Nearest nanosecond of a duration or instant given in milliseconds (half rounds up)."""
    if not -HORIZON_MS <= ms <= HORIZON_MS:  # also NaN
        raise ClockOverflow(ms)
    return math.floor(ms * NS_PER_MS + 0.5)


def float_ns(ns: float) -> int:
    """Nearest nanosecond of a time computed in float nanoseconds (copy durations)."""
    if not -HORIZON_NS <= ns <= HORIZON_NS:
        raise ClockOverflow(ns / NS_PER_MS)
    return math.floor(ns + 0.5)


def check_ns(ns: int) -> int:
    """The instant itself, when the clock may reach it."""
    if ns > HORIZON_NS:
        raise ClockOverflow(ns / NS_PER_MS)
    return ns


def limit_to_ns(ms: float) -> int:
    """A limit (a time cap, a deadline) in nanoseconds; one past the horizon is never reached."""
    return ms_to_ns(min(ms, HORIZON_MS))


def ns_to_ms(ns: int) -> float:
    return ns / NS_PER_MS
