"""The results of a sweep as plain data: one row per point and trace, the table, the best point.

Rows hold only what the simulation decides (no wall time, no absolute path), in point order,
so that the same sweep gives the same bytes whichever executor ran it and in whatever order
the points finished. `table()` and `load_results()` give the table and the best point as plain
lists and dicts, for renderers (the HTML page) as much as for the CSV writer.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kvreplay.csv_cells import Cell
from kvreplay.sweep.checks import numeric_figures
from kvreplay.sweep.model import SweepPlan

Row = dict[str, Any]

# The columns every row has, before the parameters and the figures.
FIXED = ("point", "trace", "status", "rules", "error", "spec_digest", "trace_digest", "report",
         "sla_ok", "rejections")


def make_row(plan: SweepPlan, index: int, trace: str | None, *, status: str,
             rules: Sequence[str] = (), error: str | None = None, trace_digest: str | None = None,
             report: str | None = None, summary: Mapping[str, Any] | None = None) -> Row:
    """One row of the table (its JSONL form)."""
    from kvreplay.engine.report import rejection_text

    point = plan.points[index]
    figures = {name: (summary or {}).get(name) for name in numeric_figures()}
    sla_ok = None if summary is None else all(b.met(figures) for b in plan.bounds())
    return {"point": index, "trace": trace, "status": status, "rules": list(rules),
            "error": error, "spec_digest": point.spec_digest, "trace_digest": trace_digest,
            "report": report, "sla_ok": sla_ok,
            "rejections": None if summary is None else rejection_text(summary),
            "parameters": point.parameters(),
            "figures": figures}


def columns(rows: Iterable[Row]) -> list[str]:
    """FIXED, then every swept path in order of first appearance, then the figures."""
    axes: dict[str, None] = {}
    for row in rows:
        for path in row["parameters"]:
            axes.setdefault(path, None)
    return [*FIXED, *axes, *numeric_figures()]


def flat(row: Row, names: Sequence[str]) -> list[Any]:
    """A row's cells under `names` (a parameter a point does not set is None)."""
    merged = {**row["parameters"], **row["figures"],
              **{k: row[k] for k in FIXED}}
    return [merged.get(name) for name in names]


def table(rows: Sequence[Row]) -> dict[str, Any]:
    """{"columns": [...], "rows": [[...], ...]}: the results table as plain data."""
    names = columns(rows)
    return {"columns": names, "rows": [flat(r, names) for r in rows]}


def load_results(folder: str) -> dict[str, Any]:
    """The table and the best point of a finished sweep's output folder:
    {"columns", "rows", "best"} (best.json's content). Raises
    `kvreplay.sweep.folder.ResultsError` (one line) for a folder that is not one."""
    from kvreplay.sweep.folder import read_results

    results = read_results(folder)
    return {**table(results.rows), "best": results.best}


def _cell(value: Any) -> Cell:
    """A value as its CSV cell: numbers stay numbers (never taken for a formula)."""
    if value is None:
        return None
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _parameter_cell(row: Row, name: str, value: Any) -> Cell:
    """A parameter set to null shows as `null`; one the point does not set stays empty."""
    if name in row["parameters"] and value is None:
        return "null"
    return _cell(value)


def _text(cell: Cell) -> str:
    """Parquet's text of a parameter: the CSV cell before quoting."""
    return "" if cell is None else cell if isinstance(cell, str) else repr(cell)


def csv_text(rows: Sequence[Row]) -> str:
    """results.csv: quoted and formula-safe (kvreplay.csv_cells)."""
    from kvreplay.csv_cells import line

    names = columns(rows)
    params = set(names[len(FIXED):]) - set(numeric_figures())
    out = [line(names)]
    for row in rows:
        cells = flat(row, names)
        out.append(line([" ".join(c) if n == "rules" else
                         _parameter_cell(row, n, c) if n in params else _cell(c)
                         for n, c in zip(names, cells, strict=True)]))
    return "".join(out)


def jsonl_text(rows: Sequence[Row]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n" for r in rows)


def parquet_bytes(rows: Sequence[Row]) -> bytes:
    """results.parquet's bytes (pyarrow must import: exports.pyarrow_problem). Parameters are
    stored as their CSV text (a column may mix types across points); figures as numbers."""
    import importlib

    # Any: pyarrow is optional and ships no stubs
    pa: Any = importlib.import_module("pyarrow")
    pq: Any = importlib.import_module("pyarrow.parquet")
    names = columns(rows)
    figures = set(numeric_figures())
    cells = [flat(r, names) for r in rows]
    arrays = []
    for i, name in enumerate(names):
        values = [c[i] for c in cells]
        if name == "rules":
            arrays.append(pa.array([" ".join(v) for v in values], pa.string()))
        elif name == "point":
            arrays.append(pa.array(values, pa.int64()))
        elif name == "sla_ok":
            arrays.append(pa.array(values, pa.bool_()))
        elif name in figures:
            ints = all(isinstance(v, int) and not isinstance(v, bool)
                       for v in values if v is not None)
            arrays.append(pa.array(values, pa.int64() if ints else pa.float64()))
        elif name in FIXED:
            arrays.append(pa.array(values, pa.string()))
        else:
            arrays.append(pa.array([_text(_parameter_cell(r, name, v))
                                    for r, v in zip(rows, values, strict=True)], pa.string()))
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table(arrays, names=names), sink)
    data: bytes = sink.getvalue().to_pybytes()
    return data
