"""The page of `kvreplay compare BASE NEW --html`: the report page of both runs overlaid, titled
as a comparison and led by its verdict (each gate), the latency figures side by side with their
deltas, and the per-request deltas of the join."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from kvreplay.compare.formats import gate_line, num, percent, signed
from kvreplay.compare.gates import GateResult
from kvreplay.compare.join import PERCENTILES, RANKED_BY
from kvreplay.compare.model import Comparison, FigureDelta
from kvreplay.compare.speedup import Speedup
from kvreplay.html.data import page_data
from kvreplay.html.page import page
from kvreplay.html.tables import table

# (row label, summary stem) of the latency figures compared, and the statistics shown.
LATENCIES = (("TTFT", "ttft"), ("TPOT", "tpot"), ("ITL", "itl"), ("E2E", "e2e_latency"))
STATS = ("mean", "median", "p90", "p99", "max")


def render_comparison_html(runs: Sequence[tuple[str, Mapping[str, Any]]],
                           comparison: Comparison, results: Sequence[GateResult]) -> str:
    """The comparison page of the two (label, report) runs, BASE first; a pure function.
    ReportShapeError as for render_html."""
    data = page_data(runs)
    base, new = (label for label, _ in runs)
    return page(data, heading="kvreplay comparison", title=f"kvreplay comparison: {base} vs {new}",
                subtitle=f"BASE {base} against NEW {new}",
                lead=comparison_section(comparison, results, (base, new)))


def comparison_section(comparison: Comparison, results: Sequence[GateResult],
                       labels: tuple[str, str]) -> str:
    out = ["<h2>Comparison</h2>"]
    out.extend(f'<p class="warn">warning: {escape(w)}</p>' for w in comparison.warnings)
    out.append(_verdict(results))
    out.append('<div class="tables">')
    out.append(_latencies(comparison, labels))
    if comparison.speedup is not None:
        out.append(_speedup(comparison.speedup, labels))
    out.append(_per_request(comparison))
    out.append("</div>")
    return "".join(out)


def _verdict(results: Sequence[GateResult]) -> str:
    tripped = sum(r.tripped for r in results)
    if not results:
        head, cls = "No gate: nothing was checked (add --fail-on GATE)", "verdict"
    elif tripped:
        head, cls = f"FAILED: {tripped} of {len(results)} gate(s) tripped", "verdict failed"
    else:
        head, cls = f"Passed: {len(results)} gate(s) held", "verdict passed"
    items = "".join(f'<li class="{"failed" if r.tripped else "passed"}">{escape(gate_line(r))}'
                    "</li>" for r in results)
    return (f'<div class="{cls}"><h3>{escape(head)}</h3>'
            + (f"<ul>{items}</ul>" if items else "") + "</div>")


def _latencies(comparison: Comparison, labels: tuple[str, str]) -> str:
    rows = []
    for name, stem in LATENCIES:
        for stat in STATS:
            figure = comparison.figure(f"{stat}_{stem}_ms")
            if figure is None or not (figure.in_base or figure.in_new):
                continue
            rows.append([f"{name} {'p50' if stat == 'median' else stat}",
                         *_cells(figure)])
    head = ["latency (ms)", f"{labels[0]} (BASE)", f"{labels[1]} (NEW)", "delta", "relative"]
    return table(head, rows)


def _speedup(s: Speedup, labels: tuple[str, str]) -> str:
    """Which run speculated, and the speedup of NEW over BASE (factors above 1: NEW faster)."""
    sides = [f"{label} ({which}): " + ("plain decoding" if kind is None else
                                        f"{kind}" + (f", {tps:.3g} tokens per step"
                                                     if tps is not None else ""))
             for label, which, kind, tps in ((labels[0], "BASE", s.base_kind,
                                              s.base_tokens_per_step),
                                             (labels[1], "NEW", s.new_kind,
                                              s.new_tokens_per_step))]
    rows = [[f.figure, num(f.base), num(f.new), "n/a" if f.factor is None else f"x{f.factor:.3g}"]
            for f in s.factors]
    return (f'<div><p class="note">speculation: {escape("; ".join(sides))}</p>'
            + table(["speedup of NEW (x > 1: NEW faster)", "BASE", "NEW", "factor"], rows,
                    text_columns=(0,))
            + "</div>")


def _cells(figure: FigureDelta) -> list[str]:
    base = num(figure.base) if figure.in_base else "(absent)"
    new = num(figure.new) if figure.in_new else "(absent)"
    if not figure.numeric:
        return [base, new, "", ""]
    relative = None if figure.relative is None else figure.relative * 100.0
    return [base, new, signed(figure.delta), percent(relative)]


def _per_request(comparison: Comparison) -> str:
    join = comparison.requests
    if join.skipped is not None:
        return f'<p class="note">per-request join skipped: {escape(join.skipped)}</p>'
    head = ["per-request delta (ms)", "slower", "faster", "same", "mean",
            *(f"p{p}" for p in PERCENTILES), "max"]
    rows = [[metric, f"{s.slower:,}", f"{s.faster:,}", f"{s.unchanged:,}",
             *(signed(v) for v in (s.mean, *(v for _, v in s.percentiles), s.max))]
            for metric, s in join.stats.items()]
    top = [[m.uuid, "" if m.request_id is None else str(m.request_id),
            *(f"{num(m.base[metric])} \u2192 {num(m.new[metric])} ({signed(m.delta(metric))})"
              for metric in ("ttft_ms", RANKED_BY))] for m in join.top]
    out = [f'<div><p class="note">{join.matched:,} requests in both runs ({join.only_base:,} '
           f"only in BASE, {join.only_new:,} only in NEW, {join.not_completed:,} not completed "
           "in both)</p>", table(head, rows)]
    if top:
        out.append(f'<p class="note">slowest regressions (by {RANKED_BY})</p>')
        out.append(table(["uuid", "request id", "TTFT (ms)", "E2E (ms)"], top,
                         text_columns=(0, 1)))
    else:
        out.append('<p class="note">no request got slower</p>')
    out.append("</div>")
    return "".join(out)
