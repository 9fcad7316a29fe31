"""The report's tables as HTML, from the data section (one column per run)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import Any

NONE = "\u2013"  # an en dash for a figure the run does not have
HEADLINE = (
    ("requests", "num_requests"),
    ("completed", "completed_requests"),
    ("simulated duration (ms)", "duration_ms"),
    ("request throughput (req/s)", "request_throughput_rps"),
    ("output throughput (tok/s)", "output_throughput_tok_s"),
    ("total throughput (tok/s)", "total_throughput_tok_s"),
    ("prefix cache reuse (share of input)", "prefix_cache_reused_ratio"),
    ("first-admission reuse", "first_admission_prefix_cache_reused_ratio"),
    ("first-admission host (G2) reuse", "first_admission_host_reused_ratio"),
    ("of which brought up from G3", "first_admission_g3_reused_ratio"),
    ("committed prefill tokens", "committed_prefill_tokens"),
    ("GPU hours", "gpu_hours"),
    ("goodput (req/s)", "goodput_request_throughput_rps"),
    ("goodput (output tok/s)", "goodput_output_throughput_tok_s"),
)
LATENCY_ROWS = (("TTFT", "ttft"), ("TTST", "ttst"), ("TPOT", "tpot"), ("ITL", "itl"),
                ("E2E", "e2e_latency"))
LATENCY_STATS = (("mean", "mean"), ("p50", "median"), ("p90", "p90"), ("p95", "p95"),
                 ("p99", "p99"), ("max", "max"))
# Provenance keys shown first, in this order, when the report's meta has them.
PROVENANCE_FIRST = ("kvreplay_version", "report_version", "generator", "config", "config_path",
                    "config_digest", "spec_digest", "trace_digests", "traces", "command",
                    "approximations", "mode", "router")


def fmt(value: Any) -> str:
    """A figure as the tables print it (the data section keeps the full value)."""
    if value is None:
        return NONE
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != 0.0 and abs(value) < 1e-3:
            return f"{value:.3e}"
        return f"{value:,.2f}" if abs(value) >= 1000 else f"{value:.6g}"
    return str(value)


def delta(base: Any, new: Any) -> str:
    """New against base, relative (absolute when base is 0), or blank when not numbers."""
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (base, new)):
        return ""
    if base == 0:
        return "" if new == 0 else f"{new - base:+.4g}"
    return f"{(new - base) / abs(base):+.1%}"


def _cell(value: Any, cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f"<td{attr}>{escape(value)}</td>"


def table(head: Sequence[str], rows: Sequence[Sequence[str]],
          text_columns: Sequence[int] = ()) -> str:
    """A table of already formatted cells (escaped here)."""
    out = ["<table><thead><tr>", *(f"<th>{escape(h)}</th>" for h in head), "</tr></thead><tbody>"]
    for row in rows:
        out.append("<tr>" + "".join(_cell(c, "text" if i in text_columns else "")
                                    for i, c in enumerate(row)) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def figures(runs: Sequence[Mapping[str, Any]], keys: Sequence[tuple[str, str]],
            get: Callable[[Mapping[str, Any], str], Any]) -> str:
    """Rows of figures, a column per run, and "vs <first run>" deltas when there are several."""
    head = ["figure", *(r["label"] for r in runs)]
    if len(runs) > 1:
        head += [f"{r['label']} vs {runs[0]['label']}" for r in runs[1:]]
    rows = []
    for name, key in keys:
        values = [get(r, key) for r in runs]
        if all(v is None for v in values):
            continue
        rows.append([name, *(fmt(v) for v in values),
                     *(delta(values[0], v) for v in values[1:])])
    return table(head, rows)


def summary_tables(runs: Sequence[Mapping[str, Any]]) -> str:
    """The headline figures, the latency percentiles, and every scalar summary figure."""
    def summary(run: Mapping[str, Any], key: str) -> Any:
        return run["summary"].get(key)

    latency_head = ["latency (ms)", *(name for name, _ in LATENCY_STATS)]
    latency_rows = []
    for label, stem in LATENCY_ROWS:
        for run in runs:
            values = [run["summary"].get(f"{stat}_{stem}_ms") for _, stat in LATENCY_STATS]
            if any(v is not None for v in values):
                name = label if len(runs) == 1 else f"{label} · {run['label']}"
                latency_rows.append([name, *(fmt(v) for v in values)])
    every = sorted({k for run in runs for k in run["summary"]})
    return "".join([
        '<div class="tables">', figures(runs, HEADLINE, summary),
        table(latency_head, latency_rows), "</div>",
        "<details><summary>every summary figure</summary>",
        figures(runs, [(k, k) for k in every], summary), "</details>",
    ])


def provenance_table(runs: Sequence[Mapping[str, Any]]) -> str:
    keys = {k for run in runs for k in run["provenance"]}
    first = [k for k in PROVENANCE_FIRST if k in keys]
    order = first + sorted(keys - set(first))
    rows = [[key, *(_text(run["provenance"].get(key)) for run in runs)] for key in order]
    return table(["meta", *(r["label"] for r in runs)], rows,
                 text_columns=range(1, len(runs) + 1))


def _text(value: Any) -> str:
    if value is None or isinstance(value, str):
        return NONE if value is None else value
    return json.dumps(value)


def workers_table(run: Mapping[str, Any]) -> str:
    head = ["worker", "requests", "prompt tokens", "queued", "mean queue wait (ms)",
            "first admissions", "reuse", "host reuse"]
    rows = [[w["name"], fmt(w["requests"]), fmt(w["input_tokens"]), fmt(w["queued"]),
             fmt(w["mean_queue_wait_ms"]), fmt(w["first_admissions"]), fmt(w["reuse_ratio"]),
             fmt(w["host_ratio"])] for w in run["workers"] or []]
    return table(head, rows)


G2_LABELS = (("stores (device to host)", "d2h_transfers"), ("blocks stored", "d2h_blocks"),
             ("bytes stored", "d2h_bytes"), ("restores (host to device)", "h2d_transfers"),
             ("blocks restored", "h2d_blocks"), ("bytes restored", "h2d_bytes"),
             ("restores deferred", "restores_deferred"),
             ("store cohorts retried", "store_cohorts_retried"),
             ("host blocks evicted", "host_evicted_blocks"), ("host pools", "pools"))


def g2_tables(runs: Sequence[Mapping[str, Any]]) -> str:
    """Host traffic totals and the shared pool's end-of-run occupancy, per run."""
    with_g2 = [r for r in runs if r["g2"] is not None]

    def total(run: Mapping[str, Any], key: str) -> Any:
        return run["g2"]["totals"].get(key)

    out = [figures(with_g2, G2_LABELS, total)]
    rows = []
    for run in with_g2:
        for i, d in enumerate(run["g2"]["domains"]):
            cap, used = d.get("capacity_blocks"), d.get("used_blocks")
            share = f"{used / cap:.1%}" if cap and used is not None else NONE
            rows.append([f"{run['label']} · pool {i}", fmt(cap), fmt(d.get("resident_blocks")),
                         fmt(used), share])
    if rows:
        out.append(table(["shared pool at the end", "capacity (blocks)", "resident", "used",
                          "occupancy"], rows))
    return '<div class="tables">' + "".join(out) + "</div>"


G3_LABELS = (("lookups probed in G3", "lookup_probes"), ("probes hit", "lookup_hits"),
             ("probes found a write pending", "lookup_pending"),
             ("writes (G2 to G3)", "write.submitted_jobs"),
             ("writes completed", "write.completed_jobs"),
             ("bytes written", "write.completed_bytes"),
             ("write time, summed (ms)", "write.transfer_ms"),
             ("reads (G3 to G2)", "read.submitted_jobs"),
             ("reads completed", "read.completed_jobs"),
             ("bytes read", "read.completed_bytes"),
             ("read time, summed (ms)", "read.transfer_ms"),
             ("G3 blocks evicted", "evictions"),
             ("blocks read across workers", "cross_worker_read_blocks"),
             ("resident blocks at the end", "resident_blocks"),
             ("pending blocks at the end", "pending_blocks"))


def g3_tables(runs: Sequence[Mapping[str, Any]]) -> str:
    """The reference's `g3_offload` figures, per run."""
    with_g3 = [r for r in runs if r.get("g3") is not None]

    def total(run: Mapping[str, Any], key: str) -> Any:
        return run["g3"]["totals"].get(key)

    return '<div class="tables">' + figures(with_g3, G3_LABELS, total) + "</div>"
