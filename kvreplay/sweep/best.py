"""The best point: among the points that ran on every trace and met every SLA bound on each,
the one with the best objective, judged on its worst trace; ties go to the earlier point."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from kvreplay.sweep.model import REJECTED, SweepPlan
from kvreplay.sweep.results import Row


def best_text(best: dict[str, Any]) -> str:
    """best.json's text (what `kvreplay sweep --format json` prints): point settings taken
    from the sweep file keep their control and bidi characters only as \\uXXXX escapes."""
    from kvreplay.compiler.emit import escape_active

    return escape_active(json.dumps(best, indent=2, ensure_ascii=False, allow_nan=False)) + "\n"


def _worst(values: list[float], sense: str) -> float:
    return max(values) if sense == "minimize" else min(values)


def choose_best(plan: SweepPlan, rows: Sequence[Row], *, complete: bool) -> dict[str, Any]:
    """best.json's content: the choice, the counts behind it and one explanatory sentence."""
    goal = plan.objective
    by_point: dict[int, list[Row]] = {}
    for row in rows:
        by_point.setdefault(row["point"], []).append(row)
    counts = {"points": len(by_point), "meet_sla": 0, "miss_sla": 0, "skipped": 0,
              "failed": 0, "pending": 0}
    ranked: list[tuple[float, int]] = []
    rejecting: dict[int, str] = {}  # points with more rejections than allowed: the first text
    for index, group in by_point.items():
        statuses = {r["status"] for r in group}
        for status in ("pending", "failed", "skipped"):
            if status in statuses:
                counts[status] += 1
                break
        else:
            values = [r["figures"].get(goal.figure) for r in group]
            if all(r["sla_ok"] for r in group) and all(_number(v) for v in values):
                counts["meet_sla"] += 1
                ranked.append((_worst(values, goal.sense), index))
            else:
                counts["miss_sla"] += 1
                over = [r for r in group if _over(r, plan.max_rejected)]
                if over:
                    rejecting[index] = over[0]["rejections"] or f"{REJECTED} over the SLA"
    sign = 1.0 if goal.sense == "minimize" else -1.0
    ranked.sort(key=lambda item: (sign * item[0], item[1]))
    best = _entry(plan, by_point, ranked[0]) if ranked else None
    runner_up = _entry(plan, by_point, ranked[1]) if len(ranked) > 1 else None
    return {"complete": complete, "objective": goal.as_dict(),
            "sla": {b.figure: {b.op: b.value} for b in plan.bounds()},
            "best": best, "runner_up": runner_up, "counts": counts,
            "explanation": _explain(plan, best, runner_up, counts, complete)
            + _rejecting(rejecting)}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _over(row: Row, allowed: int) -> bool:
    """A row with more rejected requests than the SLA allows (or no count of them)."""
    count = row["figures"].get(REJECTED)
    return not _number(count) or count > allowed


def _rejecting(points: dict[int, str]) -> str:
    """The sentence saying which points miss the SLA by rejecting requests, and why."""
    if not points:
        return ""
    first = min(points)
    n = len(points)
    return (f" {n} point{'s' if n != 1 else ''} {'miss' if n != 1 else 'misses'} the SLA by "
            f"rejecting requests, e.g. point {first}: {points[first]}.")


def _entry(plan: SweepPlan, by_point: dict[int, list[Row]],
           item: tuple[float, int]) -> dict[str, Any]:
    value, index = item
    shown = {plan.objective.figure, *(b.figure for b in plan.bounds())}
    return {"point": index, "value": value, "parameters": plan.points[index].parameters(),
            "runs": [{"trace": r["trace"], "report": r["report"],
                      "figures": {k: r["figures"].get(k) for k in sorted(shown)}}
                     for r in by_point[index]]}


def _explain(plan: SweepPlan, best: dict[str, Any] | None, runner_up: dict[str, Any] | None,
             counts: dict[str, int], complete: bool) -> str:
    goal = plan.objective
    word = "lowest" if goal.sense == "minimize" else "highest"
    several = len(plan.traces) > 1
    sla = " and ".join(b.text() for b in plan.bounds())
    n = counts["meet_sla"]
    points = f"the {n} points that" if n != 1 else "the 1 point that"
    among = (f"of {points} {'meet' if n != 1 else 'meets'} the SLA ({sla})"
             + (" on every trace" if several else "")) if sla else f"of {points} ran"
    others = [f"{counts[k]} {label}" for k, label in (
        ("miss_sla", "miss the SLA"), ("skipped", "skipped (support matrix)"),
        ("failed", "failed"), ("pending", "not run yet")) if counts[k]]
    tail = ("; " + ", ".join(others)) if others else ""
    partial = "" if complete else " (interrupted: a partial sweep)"
    if best is None:
        return f"no point qualifies{partial}: {counts['points']} points{tail}."
    params = ", ".join(f"{k}={json.dumps(v, sort_keys=True)}"
                       for k, v in best["parameters"].items()) or "the base config"
    worst = " on its worst trace" if several else ""
    text = (f"point {best['point']} ({params}) has the {word} {goal.figure}{worst}, "
            f"{best['value']:g}, {among}{tail}{partial}.")
    if runner_up is not None:
        text += f" Next best: point {runner_up['point']} at {runner_up['value']:g}."
    return text
