"""The self-contained HTML page: tables rendered here, charts drawn in the browser by the
inlined uPlot from the embedded data section. Nothing is fetched at view time (the page's
Content-Security-Policy forbids it)."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from html import escape
from importlib import resources
from typing import Any

from kvreplay.html.data import data_json, page_data
from kvreplay.html.scaling_data import lifecycle_tables
from kvreplay.html.tables import (
    g2_tables,
    g3_tables,
    provenance_table,
    summary_tables,
    workers_table,
)

# Only inline scripts and styles; no request of any kind (fonts, images, fetch, frames).
CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
       "img-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'")


@functools.cache
def asset(name: str) -> str:
    return (resources.files("kvreplay.html") / "assets" / name).read_text(encoding="utf-8")


def render_html(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """The HTML report of one or more (label, report) runs, overlaid in every plot.

    A pure function: the same runs give the same bytes. ReportShapeError (a ValueError naming
    the JSON path) when a report is not shaped as `kvreplay run` writes it."""
    data = page_data(runs)
    return page(data)


def page(data: Mapping[str, Any], *, heading: str = "kvreplay replay report",
         title: str | None = None, subtitle: str | None = None, lead: str = "") -> str:
    """The page of the data section; `lead` (HTML) comes first in the main part, under the
    notes (the comparison's verdict and deltas)."""
    runs = data["runs"]
    labels = ", ".join(r["label"] for r in runs)
    body = [
        f"<header><h1>{escape(heading)}</h1>",
        f"<p>{escape(subtitle or labels)}</p></header><main>",
        _notes(runs),
        lead,
        "<h2>Summary</h2>", summary_tables(runs),
        "<h2>Latency distributions</h2>", _cards(runs, LATENCY_CARDS),
        "<h2>Timeline</h2>", _cards(runs, TIMELINE_CARDS),
        _scaling(runs),
        "<h2>Prefix reuse, load and routing</h2>",
        _cards(runs, WORKER_CARDS_G3 if any(r.get("g3") for r in runs) else WORKER_CARDS),
        _workers(runs),
        _g2(runs),
        _speculation(runs),
        _g3(runs),
        _telemetry(runs),
        "<h2>Provenance</h2>", provenance_table(runs),
        "</main>",
    ]
    return shell(title or f"kvreplay report: {labels}", body, data, "report.js")


def shell(title: str, body: Sequence[str], data: Mapping[str, Any], script: str) -> str:
    """A page: the policy, the styles, `body`, the data section, uPlot, the shared chart code
    (plots.js) and the page's own `script` (an asset), all inline."""
    return "".join([
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title>",
        "<style>", asset("uPlot.min.css"), "</style><style>", asset("report.css"), "</style>",
        "</head><body>\n", *body, "\n",
        '<script type="application/json" id="kvreplay-data">', data_json(data), "</script>\n",
        "<script>", asset("uPlot.iife.min.js"), "</script>\n",
        "<script>", asset("plots.js"), asset(script), "</script>\n",
        "</body></html>\n",
    ])


def card(chart: str, title: str, note: str) -> str:
    """A chart's card: its title, what it shows, and the element plots.js draws it in."""
    return (f'<section class="card"><h3>{escape(title)}</h3><p class="note">{escape(note)}</p>'
            f'<div class="plot" data-chart="{escape(chart)}"></div></section>')


# (chart id, title, what it shows, the run field it needs, why it can be missing)
Card = tuple[str, str, str, str, str]
LATENCY_CARDS: tuple[Card, ...] = tuple(
    (f"cdf-{short}", f"{title}: CDF", "fraction of completed requests at or below x ms",
     f"cdf.{key}", "no sample (no completed request, or none with two output tokens)")
    for short, title, key in (("ttft", "Time to first token", "ttft_ms"),
                              ("tpot", "Time per output token", "tpot_ms"),
                              ("itl", "Inter-token latency", "itl_ms"),
                              ("e2e", "End-to-end latency", "e2e_latency_ms")))
NEEDS_ROWS = "needs per-request rows, which this report does not list"
TIMELINE_CARDS: tuple[Card, ...] = (
    ("timeline-requests", "Arrivals and completions",
     "cumulative requests arrived and completed", "timeline", NEEDS_ROWS),
    ("timeline-load", "In flight and waiting",
     "requests in flight (arrived, not ended) and waiting for their first admission; the router "
     "queue when requests queued; time-weighted mean per bin", "timeline", NEEDS_ROWS),
)
WORKER_CARDS: tuple[Card, ...] = (
    ("reuse-time", "Prefix reuse over time",
     "share of prompt tokens found in G1 (and restored from G2) at each request's first "
     "admission, per time bin", "reuse", NEEDS_ROWS),
    ("reuse-workers", "Prefix reuse per worker",
     "share of prompt tokens reused at first admission (G1 + G2), by the worker it was routed "
     "to", "workers", NEEDS_ROWS),
    ("load-workers", "Load per worker", "routing decisions (requests placed) per worker",
     "workers", NEEDS_ROWS),
    ("routing-overlap", "KV router: overlap given up",
     "best overlap among candidates minus the chosen worker's, in blocks (bins that double: 0, "
     "1, 2-3, 4-7...), as a share of decisions (0: the router took the best-cached worker)",
     "routing.overlap_shortfall",
     "the router reports no overlap credits (only the KV router does)"),
)
WORKER_CARDS_G3: tuple[Card, ...] = (
    ("reuse-time", "Prefix reuse over time",
     "share of prompt tokens found in G1, restored from G2, and brought up from G3 (through G2) "
     "at each request's first admission, per time bin", "reuse", NEEDS_ROWS),
    ("reuse-workers", "Prefix reuse per worker",
     "share of prompt tokens reused at first admission (G1 + G2, G3's tokens among G2's), by "
     "the worker it was routed to", "workers", NEEDS_ROWS),
    *WORKER_CARDS[2:],
)
SCALING_CARDS: tuple[Card, ...] = (
    ("timeline-replicas", "Replicas over time",
     "workers per pool under the scaling policy: active (routable), provisioned (active + "
     "starting) and draining, after each lifecycle operation", "scaling",
     "the run's pools are static"),
)
NO_TIMELINE = "summary.g2_timeline (the report was written by an older kvreplay)"
G2_CARDS: tuple[Card, ...] = (
    ("g2-restores", "Host restores over time",
     "prompt tokens restored from the host tier at first admissions, per second",
     "g2.restored_tokens_per_s", NEEDS_ROWS),
    ("g2-traffic-blocks", "Host copies over time",
     "blocks stored to the host tier (D2H), restored from it (H2D) and evicted from it, per "
     "simulated second, counted when the engine accounts the copy", "g2.timeline", NO_TIMELINE),
    ("g2-traffic-bytes", "Host copy bandwidth over time",
     "GB per simulated second stored (D2H) and restored (H2D)", "g2.timeline", NO_TIMELINE),
    ("g2-occupancy", "Host pool occupancy over time",
     "used blocks (resident and being stored) as a share of capacity at each bin's end: all "
     "pools together, and the fullest and emptiest pool when there are several",
     "g2.timeline", NO_TIMELINE),
    ("g2-workers", "Host reuse per worker",
     "share of prompt tokens restored from host at first admission, by worker",
     "g2.restored_tokens_per_s", NEEDS_ROWS),
)


NO_G3_TIMELINE = "summary.g3_timeline (the report was written by an older kvreplay)"
G3_CARDS: tuple[Card, ...] = (
    ("g3-restores", "Restores from G3 over time",
     "prompt tokens at first admissions that a G3 read brought up (G3 -> G2 -> G1), per second",
     "g3.restored_tokens_per_s", NEEDS_ROWS),
    ("g3-traffic-blocks", "G3 copies over time",
     "blocks written to G3 (from G2), read from it (to G2) and evicted from it, per simulated "
     "second, counted when the copy is submitted", "g3.timeline", NO_G3_TIMELINE),
    ("g3-traffic-bytes", "G3 copy bandwidth over time",
     "GB per simulated second written and read", "g3.timeline", NO_G3_TIMELINE),
    ("g3-occupancy", "G3 pool occupancy over time",
     "used blocks (resident and being written) as a share of capacity at each bin's end: all "
     "pools together, and the fullest and emptiest pool when there are several",
     "g3.timeline", NO_G3_TIMELINE),
)


def _field(run: Mapping[str, Any], path: str) -> Any:
    value: Any = run
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _cards(runs: Sequence[Mapping[str, Any]], cards: Sequence[Card]) -> str:
    out = ['<div class="grid">']
    for chart, title, what, needs, missing in cards:
        present = [r for r in runs if _field(r, needs) is not None]
        note = what
        if chart.startswith("cdf-") and any(_field(r, needs + ".source") == "summary"
                                            for r in present):
            note += "; dashed with points: drawn through the summary percentiles"
        if present:
            out.append(card(chart, title, note))
        else:
            out.append(f'<section class="card"><h3>{escape(title)}</h3>'
                       f'<p class="absent">Not in this report: {escape(missing)}.</p></section>')
    out.append("</div>")
    return "".join(out)


def _notes(runs: Sequence[Mapping[str, Any]]) -> str:
    """Approximations and what the report lacks; a note every run shares is said once."""
    shared = [n for n in runs[0]["notes"] if all(n in r["notes"] for r in runs[1:])]
    items = []
    for run in runs:
        prefix = f"{run['label']}: " if len(runs) > 1 else ""
        approximations = run["provenance"].get("approximations")
        if approximations not in (None, "[]"):
            items.append(f'<li class="warn">{escape(prefix)}approximations: '
                         f"{escape(str(approximations))}</li>")
        items.extend(f"<li>{escape(prefix + note)}</li>" for note in run["notes"]
                     if note not in shared)
    items.extend(f"<li>{escape(note)}</li>" for note in shared)
    return f'<ul class="notes">{"".join(items)}</ul>' if items else ""


def _workers(runs: Sequence[Mapping[str, Any]]) -> str:
    tables = [f"<p>{escape(r['label'])}</p>{workers_table(r)}" for r in runs if r["workers"]]
    if not tables:
        return ""
    return "<details><summary>per-worker figures</summary>" + "".join(tables) + "</details>"


def _g2(runs: Sequence[Mapping[str, Any]]) -> str:
    if all(r["g2"] is None for r in runs):
        return ""
    return "".join(["<h2>Host tier (G2)</h2>", g2_tables(runs), _cards(runs, G2_CARDS)])


def _g3(runs: Sequence[Mapping[str, Any]]) -> str:
    if all(r.get("g3") is None for r in runs):
        return ""
    return "".join(["<h2>G3 tier (below G2)</h2>", g3_tables(runs), _cards(runs, G3_CARDS)])


NO_TELEMETRY = "samples (the run was made without `report.telemetry`)"
TELEMETRY_CARDS: tuple[Card, ...] = (
    ("telemetry-usage", "KV cache usage per worker",
     "G1 blocks in use as a share of capacity (dashed: resident, cached blocks included), per "
     "rank, at each telemetry sample", "telemetry", NO_TELEMETRY),
    ("telemetry-waiting", "Queue per worker",
     "requests waiting for admission on each rank at each sample (the router's queue too when "
     "requests queued there)", "telemetry", NO_TELEMETRY),
    ("telemetry-running", "Batch size per worker",
     "requests running on each rank at each sample", "telemetry", NO_TELEMETRY),
)


SPECULATION_CARDS: tuple[Card, ...] = (
    ("spec-acceptance", "MTP: acceptance per draft position",
     "observed conditional acceptance rate of each draft position (verifications that accepted "
     "it / those that reached it), from the ranks' draws", "speculation",
     "the run does not speculate"),
    ("spec-itl", "Inter-token latency with speculation",
     "fraction of token gaps at or below x ms: all gaps (the tokens of one burst share its "
     "step's end: the jump at 0 ms) and the gaps between steps alone, through the summary "
     "percentiles", "speculation.step_itl", "no speculative step"),
)


def _speculation(runs: Sequence[Mapping[str, Any]]) -> str:
    present = [r for r in runs if r.get("speculation") is not None]
    if not present:
        return ""
    notes = []
    for r in present:
        s = r["speculation"]
        notes.append(f"{r['label']}: {s['kind']}, {s['tokens_per_step'] or 0.0:.3g} tokens per "
                     f"step, {s['draft_acceptance_rate'] or 0.0:.1%} of drafts accepted, "
                     f"{s['burst_share']:.1%} of token gaps inside a burst")
    return "".join(['<h2 id="speculation">Speculative decoding</h2>',
                    f'<p class="note">{escape("; ".join(notes))}</p>',
                    _cards(runs, SPECULATION_CARDS)])


def _telemetry(runs: Sequence[Mapping[str, Any]]) -> str:
    present = [r for r in runs if r.get("telemetry") is not None]
    if not present:
        return ""
    notes = [f"{r['label']}: {r['telemetry']['samples']:,} samples"
             + (" (more than 8 ranks: mean, largest and smallest over ranks)"
                if r["telemetry"]["summarized"] else "") for r in present]
    return "".join(['<h2 id="telemetry">Engine telemetry</h2>',
                    f'<p class="note">{escape("; ".join(notes))}</p>',
                    _cards(runs, TELEMETRY_CARDS)])


def _scaling(runs: Sequence[Mapping[str, Any]]) -> str:
    """Replicas over time under the load chart, and the lifecycle operations (scaled runs)."""
    if all(r.get("scaling") is None for r in runs):
        return ""
    return _cards(runs, SCALING_CARDS) + lifecycle_tables(runs)
