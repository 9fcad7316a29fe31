"""The comparison of two reports: every summary figure side by side, and the per-request join."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import attrs

from kvreplay.compare.join import RequestJoin, join_requests
from kvreplay.compare.speedup import Speedup, speedup
from kvreplay.report_file import check_comparable

Scalar = int | float | str | bool | None


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@attrs.frozen
class FigureDelta:
    """One summary figure of both reports (a nested figure is named by its dotted path, e.g.
    `g2_transfers.h2d_blocks`); `in_base` / `in_new` tell a figure only one report has."""

    name: str
    base: Scalar
    new: Scalar
    in_base: bool = True
    in_new: bool = True

    @property
    def numeric(self) -> bool:
        return self.in_base and self.in_new and is_number(self.base) and is_number(self.new)

    @property
    def delta(self) -> float | int | None:
        """new - base (numbers in both reports only)."""
        if not self.numeric:
            return None
        return self.new - self.base  # type: ignore[operator]

    @property
    def relative(self) -> float | None:
        """(new - base) / |base|: 0 when both are 0, None when only the base is 0 (or the
        ratio overflows a double)."""
        delta = self.delta
        if delta is None:
            return None
        base = float(self.base)  # type: ignore[arg-type]  # numeric: checked by delta
        if base == 0:
            return 0.0 if delta == 0 else None
        relative = delta / abs(base)
        # From a tiny base (or across a delta that overflowed) the ratio is as undefined as
        # from 0.
        return relative if math.isfinite(relative) else None

    @property
    def changed(self) -> bool:
        return self.in_base != self.in_new or self.base != self.new


@attrs.frozen
class Comparison:
    """What `compare` found: figures in name order and the per-request join."""

    figures: tuple[FigureDelta, ...]
    requests: RequestJoin
    base_meta: Mapping[str, Any] = attrs.field(factory=dict)
    new_meta: Mapping[str, Any] = attrs.field(factory=dict)
    # What makes the comparison itself doubtful (the reports ran different traces).
    warnings: tuple[str, ...] = ()
    # When either report speculated: which one, and the speedup factors (compare/speedup.py).
    speedup: Speedup | None = None

    def figure(self, name: str) -> FigureDelta | None:
        return next((f for f in self.figures if f.name == name), None)

    @property
    def changed(self) -> tuple[FigureDelta, ...]:
        return tuple(f for f in self.figures if f.changed)


def flatten(summary: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Scalar]]:
    """Scalar figures by dotted name; objects are entered, lists (per-play outcomes, domains,
    lanes) are not figures."""
    for key in sorted(summary):
        value = summary[key]
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from flatten(value, name + ".")
        elif not isinstance(value, list):
            yield name, value


def compare_reports(base: Mapping[str, Any], new: Mapping[str, Any], *,
                    top: int = 10) -> Comparison:
    """Compare two loaded reports (`kvreplay.report_file.load_report`); `top`: how many of the
    slowest per-request regressions to keep."""
    check_comparable(base, new)
    ours, theirs = dict(flatten(base["summary"])), dict(flatten(new["summary"]))
    figures = tuple(
        FigureDelta(name, ours.get(name), theirs.get(name), name in ours, name in theirs)
        for name in sorted(ours.keys() | theirs.keys()))
    join = join_requests(base, new, top=top)
    return Comparison(figures, join, base_meta=base["meta"], new_meta=new["meta"],
                      warnings=_warnings(join),
                      speedup=speedup(base["summary"], new["summary"]))


def _warnings(join: RequestJoin) -> tuple[str, ...]:
    if join.other_trace is None:
        return ()
    return (f"the two reports replayed different traces ({join.other_trace}): their figures "
            "describe different workloads, and no request is compared with itself",)
