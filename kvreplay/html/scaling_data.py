"""The autoscaling part of the HTML report, from the report's `summary.scaling` (engine.md,
Scaling): replicas per pool over time (a step series: active, and provisioned = active +
starting, with draining on top), and every lifecycle operation as a table row.

A run without `summary.scaling` (static pools) has none of it: its data section and its page
are what they were.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from kvreplay.html.columns import ReportShapeError, listing, mapping, number
from kvreplay.html.tables import fmt, table

PATH = "summary.scaling"
MAX_OPERATIONS = 2000  # table rows per run; the rest is counted


def scaling_data(summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """{"policy", "ticks", "pools": {pool: {t_s, active, provisioned, draining}},
    "operations": [[at_ms, pool, cause, transitions text]], "more_operations"}; None for a run
    without scaling."""
    value = summary.get("scaling")
    if value is None:
        return None
    scaling = mapping(value, PATH)
    end_ms = summary.get("duration_ms")
    pools: dict[str, Any] = {}
    replicas = mapping(scaling.get("replicas") or {}, f"{PATH}.replicas")
    for pool, points in replicas.items():
        where = f"{PATH}.replicas.{pool}"
        kept: dict[float, tuple[int, int, int]] = {}  # the last count at each instant
        for i, point in enumerate(listing(points, where)):
            if not isinstance(point, list) or len(point) != 4:
                raise ReportShapeError(f"{where}[{i}]: expected [at_ms, active, starting, "
                                       "draining]")
            at, active, starting, draining = (number(v, f"{where}[{i}]", optional=False) or 0.0
                                              for v in point)
            kept[at] = (int(active), int(starting), int(draining))
        times = sorted(kept)
        if times and isinstance(end_ms, int | float) and end_ms > times[-1]:
            kept[float(end_ms)] = kept[times[-1]]  # the last count holds to the end
            times.append(float(end_ms))
        pools[str(pool)] = {
            "t_s": [t / 1000.0 for t in times],
            "active": [kept[t][0] for t in times],
            "provisioned": [kept[t][0] + kept[t][1] for t in times],
            "draining": [kept[t][2] for t in times],
        }
    operations = listing(scaling.get("lifecycle_operations") or [],
                         f"{PATH}.lifecycle_operations")
    rows = []
    for i, op in enumerate(operations[:MAX_OPERATIONS]):
        op = mapping(op, f"{PATH}.lifecycle_operations[{i}]")
        rows.append([op.get("at_ms"), op.get("pool"), op.get("cause"),
                     _transitions(op.get("transitions") or [])])
    return {"policy": scaling.get("policy"), "ticks": scaling.get("ticks"), "pools": pools,
            "operations": rows, "more_operations": max(len(operations) - MAX_OPERATIONS, 0)}


def _transitions(transitions: Sequence[Any]) -> str:
    out = []
    for t in transitions:
        if isinstance(t, Mapping):
            reason = f" ({t['reason']})" if t.get("reason") else ""
            out.append(f"worker {t.get('worker_id')}: {t.get('prior_state') or 'new'} \u2192 "
                       f"{t.get('state')}{reason}")
    return "; ".join(out)


def lifecycle_tables(runs: Sequence[Mapping[str, Any]]) -> str:
    """Each scaled run's lifecycle operations, folded (one row per operation)."""
    parts = []
    for run in runs:
        scaling = run.get("scaling")
        if scaling is None:
            continue
        head = f"{run['label']}: " if len(runs) > 1 else ""
        rows = [[fmt(at), str(pool), str(cause), text]
                for at, pool, cause, text in scaling["operations"]]
        more = scaling["more_operations"]
        tail = f"<p>{more:,} more operation(s) not listed.</p>" if more else ""
        what = (f"{head}lifecycle operations ({len(rows) + more:,}; policy "
                f"{fmt(scaling['policy'])}, {fmt(scaling['ticks'])} tick(s))")
        columns = ["at (ms)", "pool", "cause", "transitions"]
        parts.append(f"<details><summary>{escape(what)}</summary>"
                     f"{table(columns, rows, (1, 2, 3))}{tail}</details>")
    return "".join(parts)
