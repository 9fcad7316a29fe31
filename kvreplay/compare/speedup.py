"""What speculative decoding bought: the speedup of two reports when either speculated (its
summary has a `speculation` block), as factors BASE -> NEW (docs/cli.md, compare)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

# (figure, True when lower is better): the factor is base / new for those, new / base else, so
# a factor above 1 is always NEW faster.
FIGURES: tuple[tuple[str, bool], ...] = (
    ("mean_tpot_ms", True), ("median_tpot_ms", True), ("mean_itl_ms", True),
    ("mean_e2e_latency_ms", True), ("duration_ms", True), ("output_throughput_tok_s", False))


@attrs.frozen
class SpeedupFactor:
    figure: str
    base: float | None
    new: float | None
    factor: float | None  # > 1: NEW is faster; None when a side lacks it or is 0


@attrs.frozen
class Speedup:
    """Which side speculated (the kind, None for a plain run) with its tokens per step, and the
    factors of the latency and throughput figures."""

    base_kind: str | None
    new_kind: str | None
    base_tokens_per_step: float | None
    new_tokens_per_step: float | None
    factors: tuple[SpeedupFactor, ...]


def _number(summary: Mapping[str, Any], key: str) -> float | None:
    value = summary.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


def _factor(figure: str, lower: bool, base: float | None, new: float | None) -> SpeedupFactor:
    top, bottom = (base, new) if lower else (new, base)
    factor = top / bottom if top is not None and bottom else None
    return SpeedupFactor(figure, base, new, factor)


def _side(summary: Mapping[str, Any]) -> tuple[str | None, float | None]:
    block = summary.get("speculation")
    if not isinstance(block, Mapping):
        return None, None
    kind = block.get("kind")
    return (str(kind) if kind is not None else "speculative"), _number(block, "tokens_per_step")


def speedup(base: Mapping[str, Any], new: Mapping[str, Any]) -> Speedup | None:
    """The speedup of NEW over BASE (their summaries), or None when neither speculated."""
    (base_kind, base_tps), (new_kind, new_tps) = _side(base), _side(new)
    if base_kind is None and new_kind is None:
        return None
    factors = tuple(_factor(figure, lower, _number(base, figure), _number(new, figure))
                    for figure, lower in FIGURES)
    return Speedup(base_kind, new_kind, base_tps, new_tps, factors)


def to_dict(s: Speedup) -> dict[str, Any]:
    """The comparison JSON's `speculation` (present only when either report speculated)."""
    return {"base": {"kind": s.base_kind, "tokens_per_step": s.base_tokens_per_step},
            "new": {"kind": s.new_kind, "tokens_per_step": s.new_tokens_per_step},
            "speedup": [{"figure": f.figure, "base": f.base, "new": f.new, "factor": f.factor}
                        for f in s.factors]}


def _describe(kind: str | None, tokens_per_step: float | None) -> str:
    if kind is None:
        return "plain"
    return kind if tokens_per_step is None else f"{kind}, {tokens_per_step:.3g} tokens per step"


def text_lines(s: Speedup) -> list[str]:
    """`speculation: BASE plain, NEW mtp (1.85 tokens per step)` and the factors (`x1.79`: NEW
    faster, `x0.9`: slower)."""
    parts = [f"{f.figure} x{f.factor:.3g}" if f.factor is not None else f"{f.figure} n/a"
             for f in s.factors]
    return [f"speculation: BASE {_describe(s.base_kind, s.base_tokens_per_step)}; NEW "
            f"{_describe(s.new_kind, s.new_tokens_per_step)}",
            "speedup of NEW over BASE (x > 1: NEW faster): " + ", ".join(parts)]
