"""The self-contained HTML page of a sweep's results folder: the best point and why, the objective
against each swept parameter, the Pareto front of TTFT against cost, the results table (sorted by
clicking a header) and the provenance. The same page shell, styles and chart code as the replay
report (page.py, plots.js); its own charts are drawn by sweep.js."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from kvreplay.html.page import card, shell
from kvreplay.html.sweep_data import sweep_data
from kvreplay.html.tables import NONE, fmt, table
from kvreplay.sweep.folder import SweepResults

SENSE = {"minimize": "lowest", "maximize": "highest"}


def render_sweep_html(results: SweepResults) -> str:
    """The page of a results folder read by `kvreplay.sweep.folder.read_results`; a pure
    function: the same folder gives the same bytes."""
    data = sweep_data(results)
    title = data["title"] or "a sweep"
    body = [
        "<header><h1>kvreplay sweep</h1>", f"<p>{escape(_subtitle(data, title))}</p></header>",
        "<main>", _notes(data),
        "<h2>Best point</h2>", _best(data),
        "<h2>Objective against each swept parameter</h2>", _axis_cards(data),
        "<h2>Pareto front: TTFT against cost</h2>", _pareto_card(data),
        "<h2>Results</h2>",
        '<p class="note">One row per point and trace; click a header to sort.</p>',
        _results(data),
        "<h2>Provenance</h2>", _provenance(data), "</main>",
    ]
    return shell(f"kvreplay sweep: {title}", body, data, "sweep.js")


def _goal(data: Mapping[str, Any]) -> str:
    objective = data["objective"]
    return f"{objective['sense']} {objective['figure']}"


def _sla(data: Mapping[str, Any]) -> str:
    return " and ".join(f"{b['figure']} {'<=' if b['op'] == 'max' else '>='} {b['value']:g}"
                        for b in data["sla"]) or "none"


def _subtitle(data: Mapping[str, Any], title: str) -> str:
    points = len({r["point"] for r in data["rows"]})
    traces = len(data["traces"])
    runs = f" x {traces} traces" if traces > 1 else ""
    return f"{title}: {points} points{runs}; objective: {_goal(data)}; SLA: {_sla(data)}"


def _notes(data: Mapping[str, Any]) -> str:
    best = data["best"]
    items = []
    if not best["complete"]:
        items.append('<li class="warn">An interrupted sweep: rows still pending did not run; '
                     "rerun the sweep to finish it.</li>")
    if best["counts"].get("failed"):
        items.append(f'<li class="warn">{best["counts"]["failed"]} point(s) failed; their '
                     "error is in the table (hover the status).</li>")
    rejecting = [r for r in data["rows"] if r["rejections"]]
    if rejecting:
        points = sorted({r["point"] for r in rejecting})
        allowed = next((b["value"] for b in data["sla"]
                        if b["figure"] == "rejected_requests" and b["op"] == "max"), None)
        bound = f" (the SLA allows {allowed:g})" if allowed is not None else ""
        items.append(f'<li class="warn">{len(points)} point(s) rejected requests{bound}, e.g. '
                     f'point {points[0]}: {escape(rejecting[0]["rejections"])}; the SLA '
                     "column says why on hover.</li>")
    left_out = data["pareto"]["left_out"]
    if left_out:
        items.append(f"<li>Not on the Pareto chart (a figure the run could not measure): "
                     f"point(s) {', '.join(map(str, left_out))}.</li>")
    return f'<ul class="notes">{"".join(items)}</ul>' if items else ""


def _best(data: Mapping[str, Any]) -> str:
    best = data["best"]
    out = [f'<div class="bestbox"><p>{escape(best["explanation"])}</p>']
    rows = [r for r in data["rows"] if r["point"] == best["point"]]
    if rows:
        head = ["parameter", "value"]
        cells = [[axis["path"], value] for axis, value in zip(data["axes"], rows[0]["values"],
                                                                strict=True)]
        out.append('<div class="tables">' + table(head, cells, text_columns=(1,)))
        traces = data["traces"]
        names = [traces[r["trace"]] if r["trace"] is not None else "figure" for r in rows]
        figures = [[f, *(fmt(r["figures"].get(f)) for r in rows)] for f in data["figures"]]
        out.append(table(["figure", *names] if traces else ["figure", "value"], figures)
                   + "</div>")
    out.append("</div>")
    return "".join(out)


def _axis_cards(data: Mapping[str, Any]) -> str:
    objective = data["objective"]["figure"]
    sla = "filled: meets the SLA, hollow: misses it" if data["sla"] else "no SLA"
    best = SENSE[data["objective"]["sense"]] + (" that meets the SLA" if data["sla"] else "")
    out = ['<div class="grid">']
    for i, axis in enumerate(data["axes"]):
        if not axis["varies"]:
            continue
        out.append(card(f"param-{i}", axis["path"],
                        f"{objective} of each point that ran, against its {axis['name']} "
                        f"({sla}); dashed: the {best} at each value; ringed: "
                        "the best point"))
    out.append("</div>")
    flat = [a["path"] for a in data["axes"] if not a["varies"]]
    if not any(r["status"] == "ok" for r in data["rows"]):
        out.append('<p class="absent">No point ran: nothing to chart.</p>')
    elif flat:
        out.append(f'<p class="note">Not charted, every point that ran has the same value: '
                   f'{escape(", ".join(flat))}.</p>')
    return "".join(out)


def _pareto_card(data: Mapping[str, Any]) -> str:
    pareto = data["pareto"]
    title = f"{pareto['y']} against {pareto['x']}"
    if not pareto["points"]:
        return (f'<section class="card"><h3>{escape(title)}</h3><p class="absent">No point ran '
                "with both figures.</p></section>")
    bound = f"; grey: the SLA bound ({pareto['bound']:g} ms)" if pareto["bound"] is not None \
        else ""
    note = (f"each point that ran (on its worst trace), filled when it meets the SLA; the line "
            f"joins the non-dominated points: none is both cheaper and faster{bound}")
    return f'<div class="grid">{card("pareto", title, note)}</div>'


def _status(row: Mapping[str, Any]) -> tuple[str, str]:
    """(the status cell's text, its title: the error)."""
    if row["status"] == "skipped" and row["rules"]:
        return f"skipped ({', '.join(row['rules'])})", row["error"] or ""
    return row["status"], row["error"] or ""


def _results(data: Mapping[str, Any]) -> str:
    traces = data["traces"]
    several = len(traces) > 1
    head = ["point", *(["trace"] if several else []), *(a["name"] for a in data["axes"]),
            "status", "SLA", *data["figures"]]
    titles = ["", *([""] if several else []), *(a["path"] for a in data["axes"]),
              "", _sla(data), *["" for _ in data["figures"]]]
    out = ['<div class="wide"><table class="sortable"><thead><tr>']
    for name, title in zip(head, titles, strict=True):
        attr = f' title="{escape(title)}"' if title else ""
        out.append(f"<th{attr}>{escape(name)}</th>")
    out.append("</tr></thead><tbody>")
    best = data["best"]["point"]
    for row in data["rows"]:
        status, error = _status(row)
        cells: list[tuple[str, Any, str]] = [(str(row["point"]), row["point"], "")]
        if several:
            cells.append((traces[row["trace"]], traces[row["trace"]], ""))
        cells += [(shown, x if a["categories"] is None and x is not None else shown, "")
                  for a, shown, x in zip(data["axes"], row["values"], row["x"], strict=True)]
        cells.append((status, status, error))
        verdict = {True: "meets", False: "misses", None: NONE}[row["sla_ok"]]
        cells.append((verdict, verdict, row["rejections"] or ""))
        cells += [(fmt(v), v, "") for v in (row["figures"][f] for f in data["figures"])]
        cls = f' class="{"best " if row["point"] == best else ""}{row["status"]}"'
        out.append(f"<tr{cls}>" + "".join(_cell(*c) for c in cells) + "</tr>")
    out.append("</tbody></table></div>")
    out.append('<p class="scroll-note" hidden>The table is wider than the page: scroll it '
               "sideways for the other figures (the point column stays).</p>")
    return "".join(out)


def _cell(text: str, key: Any, title: str) -> str:
    """A cell with its sort key (numbers sort as numbers, empty last)."""
    sort = "" if key is None else repr(key) if isinstance(key, int | float) else str(key)
    attr = f' title="{escape(title)}"' if title else ""
    return f'<td data-v="{escape(sort)}"{attr}>{escape(text)}</td>'


def _provenance(data: Mapping[str, Any]) -> str:
    shown: Sequence[tuple[str, str]] = (
        ("sweep", "sweep file"), ("sweep_digest", "sweep file digest (sha256, 16 hex)"),
        ("base_digest", "base config spec digest (after --set)"), ("overrides", "--set"),
        ("traces", "traces"), ("kvreplay_version", "kvreplay version"))
    provenance = data["provenance"]
    rows = [[name, _text(provenance.get(key))] for key, name in shown if key in provenance]
    if "sweep" not in provenance:
        rows.append(["sweep.json", "absent: a results folder from before kvreplay wrote it"])
    return table(["", ""], rows, text_columns=(1,))


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "; ".join(map(str, value)) or NONE
    return NONE if value is None else str(value)
