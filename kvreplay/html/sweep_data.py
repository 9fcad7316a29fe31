"""The data section of a sweep's HTML page: the results table, the best point, the objective of
each point against each swept parameter and the Pareto front of TTFT against cost.

`sweep_data(results)` is a pure function of a results folder's content (`read_results`); the
page embeds it and draws every chart from it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from kvreplay.sweep.folder import SweepResults
from kvreplay.sweep.results import Row

SWEEP_DATA_VERSION = 1
COST = "gpu_hours"
TTFT = "p90_ttft_ms"  # the Pareto front's latency, unless the SLA bounds another TTFT figure
# Shown after the objective and the SLA's figures, when the rows have them.
KEY_FIGURES = ("gpu_hours", "p90_ttft_ms", "mean_ttft_ms", "p90_tpot_ms",
               "mean_e2e_latency_ms", "completed_requests", "rejected_requests",
               "prefix_cache_reused_ratio")
UNSET = "(base)"  # a parameter the point does not set: the base config's value

Candidate = tuple[int, Any, Any]  # (point, cost, latency) as the rows give them


def sweep_data(results: SweepResults) -> dict[str, Any]:
    """The data section of the page of one results folder."""
    rows, best = results.rows, results.best
    sense, goal = next(iter(best["objective"].items()))
    sla = [{"figure": figure, "op": op, "value": value}
           for figure, bounds in best["sla"].items() for op, value in sorted(bounds.items())]
    traces = _traces(results)
    figures = list(dict.fromkeys([goal, *(b["figure"] for b in sla), *KEY_FIGURES]))
    figures = [f for f in figures if any(f in r["figures"] for r in rows)]
    axes = _axes(rows)
    latency = next((b["figure"] for b in sla if "ttft" in b["figure"]), TTFT)
    chosen, runner_up = best["best"], best["runner_up"]
    return {
        "format": SWEEP_DATA_VERSION,
        "title": results.manifest["sweep"] if results.manifest else None,
        "provenance": _provenance(results, traces),
        "objective": {"figure": goal, "sense": sense},
        "sla": sla,
        "traces": traces,
        "figures": figures,
        "axes": axes,
        "rows": [_row(row, axes, traces, figures) for row in rows],
        "best": {"point": chosen["point"] if chosen else None,
                 "value": chosen["value"] if chosen else None,
                 "runner_up": runner_up["point"] if runner_up else None,
                 "complete": best["complete"], "counts": best["counts"],
                 "explanation": best["explanation"]},
        "pareto": _pareto(rows, latency, sla),
    }


def _traces(results: SweepResults) -> list[str]:
    """Trace labels in the sweep's order (sweep.json's, else the rows')."""
    if results.manifest is not None and results.manifest["traces"]:
        return [t["trace"] for t in results.manifest["traces"]]
    return list(dict.fromkeys(r["trace"] for r in results.rows if r["trace"] is not None))


def _provenance(results: SweepResults, traces: list[str]) -> dict[str, Any]:
    manifest = results.manifest
    if manifest is None:
        return {"traces": traces}
    return {"sweep": manifest["sweep"], "sweep_digest": manifest["sweep_digest"],
            "base_digest": manifest["base_digest"], "overrides": manifest["overrides"],
            "traces": [f"{t['trace']} (sha256 {t['digest']})" for t in manifest["traces"]],
            "kvreplay_version": manifest["kvreplay_version"]}


def label(value: Any) -> str:
    """A parameter value as the page shows it: strings as they are, the rest as JSON."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True,
                                                           ensure_ascii=False)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def short_names(paths: Sequence[str]) -> list[str]:
    """Each dotted path's shortest tail that no other path ends with."""
    out = []
    for path in paths:
        parts = path.split(".")
        for n in range(1, len(parts) + 1):
            tail = ".".join(parts[-n:])
            if not any(o != path and (o == tail or o.endswith("." + tail)) for o in paths):
                break
        out.append(tail)
    return out


def _axes(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """The swept paths in order of first appearance, charted over the rows that ran: numbers
    when each of them sets a number, else categories in order of first appearance (UNSET for
    a point that leaves the path to the base config)."""
    paths = list(dict.fromkeys(p for r in rows for p in r["parameters"]))
    ran = [r for r in rows if r["status"] == "ok"]
    axes = []
    for path, name in zip(paths, short_names(paths), strict=True):
        numeric = bool(ran) and all(_number(r["parameters"].get(path)) for r in ran)
        shown = list(dict.fromkeys(_shown(r, path) for r in ran))
        axes.append({"path": path, "name": name, "kind": "number" if numeric else "category",
                     "categories": None if numeric else shown, "varies": len(shown) > 1})
    return axes


def _shown(row: Row, path: str) -> str:
    return label(row["parameters"][path]) if path in row["parameters"] else UNSET


def _x(row: Row, axis: dict[str, Any]) -> Any:
    """Where a row sits on an axis's chart: its number, its category's index, or None (a row
    that did not run, with a value no row that ran has)."""
    path = axis["path"]
    if axis["categories"] is None:
        value = row["parameters"].get(path)
        return value if _number(value) else None
    shown = _shown(row, path)
    return axis["categories"].index(shown) if shown in axis["categories"] else None


def _row(row: Row, axes: Sequence[dict[str, Any]], traces: list[str],
         figures: Sequence[str]) -> dict[str, Any]:
    return {"point": row["point"],
            "trace": traces.index(row["trace"]) if row["trace"] in traces else None,
            "status": row["status"], "rules": row["rules"], "error": row["error"],
            "sla_ok": row["sla_ok"], "rejections": row["rejections"],
            "values": [_shown(row, a["path"]) for a in axes],
            "x": [_x(row, a) for a in axes],
            "figures": {f: row["figures"].get(f) for f in figures}}


def pareto_front(candidates: Sequence[Candidate]) -> tuple[list[dict[str, Any]], list[int]]:
    """Every candidate with both figures, by (cost, latency, point), each marked `front` when
    no other is at most as costly and as slow and better in one; and the points left out for
    a missing figure. Equal candidates are all on the front (none dominates the other)."""
    drawn = sorted((c for c in candidates if _number(c[1]) and _number(c[2])),
                   key=lambda c: (c[1], c[2], c[0]))
    out = []
    best: tuple[float, float] | None = None  # the front point of lowest latency so far
    for point, cost, latency in drawn:
        front = best is None or latency < best[1] or (latency, cost) == (best[1], best[0])
        if front:
            best = (cost, latency)
        out.append({"point": point, "x": cost, "y": latency, "front": front})
    left_out = sorted(c[0] for c in candidates if not (_number(c[1]) and _number(c[2])))
    return out, left_out


def _pareto(rows: Sequence[Row], latency: str, sla: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The front over points that ran on every trace, each judged on its worst trace (the
    highest cost and latency), as the best point is."""
    by_point: dict[int, list[Row]] = {}
    for row in rows:
        by_point.setdefault(row["point"], []).append(row)
    candidates: list[Candidate] = []
    met: dict[int, bool] = {}
    for point, group in by_point.items():
        if any(r["status"] != "ok" for r in group):
            continue
        costs = [r["figures"].get(COST) for r in group]
        latencies = [r["figures"].get(latency) for r in group]
        candidates.append((point, max(costs) if all(map(_number, costs)) else None,
                           max(latencies) if all(map(_number, latencies)) else None))
        met[point] = all(r["sla_ok"] for r in group)
    drawn, left_out = pareto_front(candidates)
    bound = next((b["value"] for b in sla if b["figure"] == latency and b["op"] == "max"), None)
    return {"x": COST, "y": latency, "bound": bound, "left_out": left_out,
            "points": [{**p, "sla_ok": met[p["point"]]} for p in drawn]}
