"""A planned sweep as values: its points (compiled or skipped), traces, SLA and objective."""

from __future__ import annotations

import json
from typing import Any, Literal

import attrs

from kvreplay.schema.diagnostics import Diagnostic, has_errors

# A point's state after planning: compiled and runnable, or never to run.
PlanStatus = Literal["ok", "skipped", "invalid"]

# The summary figure `sla.max_rejected` bounds.
REJECTED = "rejected_requests"


@attrs.frozen
class Setting:
    """One dotted config path set to one value, and where the value sits in the sweep file."""

    path: str
    value: Any
    where: tuple[str | int, ...]


@attrs.frozen
class Point:
    """One point: its settings over the base config and what compiling it gave."""

    index: int
    settings: tuple[Setting, ...]
    status: PlanStatus
    rules: tuple[str, ...] = ()  # support-matrix rule IDs of a skipped point
    message: str | None = None  # why a point is skipped or invalid, one line
    native: str | None = None  # canonical native JSON of a runnable point
    spec_digest: str | None = None

    def parameters(self) -> dict[str, Any]:
        """Dotted path -> value, later settings of the same path winning."""
        return {s.path: s.value for s in self.settings}

    def label(self) -> str:
        shown = ", ".join(f"{p}={json.dumps(v, sort_keys=True)}"
                          for p, v in self.parameters().items())
        return f"point {self.index}" + (f" ({shown})" if shown else " (the base config)")


@attrs.frozen
class Trace:
    """A trace every point runs on: as written (the table shows it) and resolved."""

    label: str
    path: str


@attrs.frozen
class Bound:
    figure: str
    op: Literal["max", "min"]
    value: float

    def met(self, figures: dict[str, Any]) -> bool:
        got = figures.get(self.figure)
        if not isinstance(got, int | float) or isinstance(got, bool):
            return False  # a figure the run could not measure meets no bound
        return got <= self.value if self.op == "max" else got >= self.value

    def text(self) -> str:
        if self.figure == REJECTED and self.op == "max":
            return "no request rejected" if self.value == 0 else \
                f"at most {self.value:g} request{'s' if self.value != 1 else ''} rejected"
        return f"{self.figure} {'<=' if self.op == 'max' else '>='} {self.value:g}"


@attrs.frozen
class Objective:
    figure: str
    sense: Literal["minimize", "maximize"]

    def as_dict(self) -> dict[str, str]:
        return {self.sense: self.figure}


@attrs.frozen
class SweepPlan:
    """Everything `kvreplay sweep` needs before running, and every finding about the file."""

    file: str
    text: str | None
    diagnostics: tuple[Diagnostic, ...]
    points: tuple[Point, ...] = ()
    axes: tuple[str, ...] = ()  # parameter columns, in order of first appearance
    traces: tuple[Trace, ...] = ()  # empty: synthetic traffic, no trace
    sla: tuple[Bound, ...] = ()  # the file's bounds on figures
    objective: Objective = Objective("gpu_hours", "minimize")
    max_rejected: int = 0  # sla.max_rejected: the rejected requests a point may have
    base_digest: str | None = None  # the base config's spec digest (after --set)
    overrides: tuple[str, ...] = ()  # the command's --set, applied to the base

    @property
    def ok(self) -> bool:
        return not has_errors(self.diagnostics)

    def bounds(self) -> tuple[Bound, ...]:
        """Every bound a point must meet: the file's, then the rejections it allows."""
        return (*self.sla, Bound(REJECTED, "max", self.max_rejected))
