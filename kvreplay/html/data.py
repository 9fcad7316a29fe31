"""The data section of the HTML report: everything the page shows, as one JSON document.

`page_data(runs)` is a pure function of the reports; the page embeds it and draws every chart
and table from it. Runs share the time grids, so their series overlay point for point.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from kvreplay.html.columns import (
    Columns,
    ReportShapeError,
    WorkerKey,
    WorkerLoad,
    listing,
    mapping,
    read_columns,
    worker_order,
)
from kvreplay.html.host_traffic import G3_PATH, host_traffic
from kvreplay.html.scaling_data import scaling_data
from kvreplay.html.series import (
    RATIO_POINTS,
    TIMELINE_POINTS,
    Grid,
    bin_points,
    cdf,
    cumulative,
    make_grid,
    occupancy,
    ratios,
    rounded,
    summary_cdf,
    sums,
)
from kvreplay.html.speculation_data import speculation_data
from kvreplay.html.telemetry import telemetry_series

T = TypeVar("T")
DATA_VERSION = 1
# name in the data -> (column, summary stem for the fallback)
LATENCIES = (("ttft_ms", "ttft", "ttft"), ("tpot_ms", "tpot", "tpot"), ("itl_ms", None, "itl"),
             ("e2e_latency_ms", "e2e", "e2e_latency"))
NO_ROWS = ("per-request rows: absent (the run kept none: record_per_request false or a "
           "summary-only report); CDFs use the summary percentiles, and the timelines and "
           "per-worker charts cannot be drawn")
ITL_NOTE = ("ITL: the report lists no token gaps per request; its CDF goes through the "
            "summary percentiles (min, p50, p75, p90, p95, p99, max)")
G2_TIME_NOTE = ("G2: the report has no summary.g2_timeline (written by an older kvreplay): "
                "stores, copy bandwidth and pool occupancy over time are not recorded (restores "
                "over time come from first admissions)")


def page_data(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """The data section for one or more (label, report) runs, in the given order."""
    if not runs:
        raise ValueError("render_html needs at least one run")
    read = [_blame(i, _read, label, report) for i, (label, report) in enumerate(runs)]
    timeline, ratio = _grids([cols for _, _, cols in read])
    return {
        "format": DATA_VERSION,
        "timeline": timeline.to_json() if timeline else None,
        "ratio_grid": ratio.to_json() if ratio else None,
        "runs": [_blame(i, _run, label, report, cols, timeline, ratio)
                 for i, (label, report, cols) in enumerate(read)],
    }


def _blame(run: int, step: Callable[..., T], *args: Any) -> T:
    """`step(*args)`, a ReportShapeError marked with the run it is about."""
    try:
        return step(*args)
    except ReportShapeError as exc:
        exc.run = run
        raise


def data_json(data: Mapping[str, Any]) -> str:
    """The data section as the page embeds it: compact, sorted, and safe inside <script>."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _read(label: str, report: Mapping[str, Any]) -> tuple[str, Mapping[str, Any], Columns | None]:
    """The report checked for shape, and its row columns (None when it lists no row)."""
    if not isinstance(label, str):
        raise TypeError("run labels are strings")
    mapping(report, "$")
    mapping(report.get("summary"), "summary")
    if report.get("meta") is not None:
        mapping(report.get("meta"), "meta")
    rows = report.get("per_request")
    if rows is not None and (isinstance(rows, str | Mapping) or not isinstance(rows, Iterable)):
        listing(rows, "per_request")  # raises: a streamed run's rows are iterable, not a list
    cols = read_columns(rows) if rows is not None else None
    return label, report, cols if cols is not None and cols.rows else None


def _grids(columns: Sequence[Columns | None]) -> tuple[Grid | None, Grid | None]:
    present = [c for c in columns if c is not None]
    if not present:
        return None, None
    first = min(min(c.arrivals) for c in present)
    last = max(max(c.ends) for c in present)
    rows = max(c.rows for c in present)
    timeline = make_grid(first, last, bin_points(rows, TIMELINE_POINTS, 200, 4))
    ratio = make_grid(first, last, bin_points(rows // 10, RATIO_POINTS, 10, 1))
    return timeline, ratio


def _run(label: str, report: Mapping[str, Any], cols: Columns | None, timeline: Grid | None,
         ratio: Grid | None) -> dict[str, Any]:
    summary = report["summary"]
    meta = report.get("meta") or {}
    notes: list[str] = []
    if cols is None:
        notes.append(NO_ROWS)
    else:
        arrived = summary.get("num_requests")
        unlisted = arrived - cols.rows if isinstance(arrived, int) else 0
        if unlisted > 0:
            notes.append(f"{unlisted:,} request(s) never ended and are not listed per request")
    notes.append(ITL_NOTE)
    run: dict[str, Any] = {
        "label": label,
        "provenance": _provenance(meta),
        "summary": {k: v for k, v in summary.items() if _scalar(v)},
        "notes": notes,
        "cdf": _cdfs(summary, cols),
        "timeline": None, "reuse": None, "workers": None, "routing": None,
        "g2": _g2(summary, cols, ratio),
    }
    telemetry = telemetry_series(report.get("telemetry"))
    if telemetry is not None:  # only then: a page of a run without samples is unchanged
        run["telemetry"] = telemetry
    speculation = speculation_data(summary)
    if speculation is not None:  # only an MTP run carries the key (other pages are unchanged)
        run["speculation"] = speculation
    g3 = _g3(summary, cols, ratio)
    if g3 is not None:  # only a G3 run carries the key (other pages are unchanged)
        run["g3"] = g3
    scaling = scaling_data(summary)
    if scaling is not None:  # only a scaled run carries the key (static pages are unchanged)
        run["scaling"] = scaling
    if run["g2"] is not None and run["g2"]["timeline"] is None:
        notes.append(G2_TIME_NOTE)
    if cols is not None and timeline is not None and ratio is not None:
        run["timeline"] = _timeline(cols, timeline)
        run["reuse"] = _reuse(cols, ratio)
        run["workers"] = _workers(cols)
        run["routing"] = _routing(cols)
    return run


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _provenance(meta: Mapping[str, Any]) -> dict[str, Any]:
    """meta as shown: scalars as they are, anything nested as its canonical JSON text."""
    return {key: value if _scalar(value) else json.dumps(value, sort_keys=True,
                                                          ensure_ascii=False)
            for key, value in meta.items()}


def _cdfs(summary: Mapping[str, Any], cols: Columns | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, column, stem in LATENCIES:
        values = getattr(cols, column) if cols is not None and column is not None else None
        drawn = cdf(values) if values else None
        if drawn is not None:
            out[name] = {**drawn, "source": "requests"}
            continue
        fallback = summary_cdf(summary, stem)
        out[name] = {**fallback, "source": "summary"} if fallback is not None else None
    return out


def _timeline(cols: Columns, grid: Grid) -> dict[str, Any]:
    out: dict[str, Any] = {
        "arrived": cumulative(cols.arrivals, grid),
        "completed": cumulative(cols.completions, grid),
        "ended_otherwise": cumulative(cols.other_ends, grid) if cols.other_ends else None,
        "in_flight": occupancy(cols.arrivals, cols.ends, grid),
        "waiting": occupancy(cols.arrivals, cols.admitted, grid),
        "router_queue": (occupancy(cols.queue_in, cols.queue_out, grid)
                         if cols.queue_in else None),
    }
    return out


def _reuse(cols: Columns, grid: Grid) -> dict[str, Any] | None:
    if not cols.admit_at:
        return None
    total = sums(cols.admit_at, cols.admit_input, grid)
    g1 = ratios(sums(cols.admit_at, cols.admit_g1, grid), total)
    host = (ratios(sums(cols.admit_at, cols.admit_host, grid), total) if cols.host_tier
            else None)
    out: dict[str, Any] = {
        "g1": g1, "host": host,
        "admissions": [int(n) for n in sums(cols.admit_at, [1.0] * len(cols.admit_at), grid)]}
    if cols.g3_tier:  # the host share split: restored from G2, brought up from G3 first
        g2_only = [h - g for h, g in zip(cols.admit_host, cols.admit_g3, strict=True)]
        out["g2"] = ratios(sums(cols.admit_at, g2_only, grid), total)
        out["g3"] = ratios(sums(cols.admit_at, cols.admit_g3, grid), total)
    return out


def _worker_name(key: WorkerKey, ranks: bool) -> str:
    pool, worker, rank = key
    return f"{pool} {worker}" + (f".{rank}" if ranks else "")


def _workers(cols: Columns) -> list[dict[str, Any]] | None:
    if not cols.workers:
        return None
    ranks = any(key[2] for key in cols.workers)
    out = []
    for key in sorted(cols.workers, key=worker_order):
        load: WorkerLoad = cols.workers[key]
        admitted = load.admitted_input_tokens
        out.append({
            "name": _worker_name(key, ranks),
            "requests": load.requests,
            "input_tokens": load.input_tokens,
            "queued": load.queued,
            "mean_queue_wait_ms": rounded(load.queue_wait_ms / load.queued) if load.queued
            else None,
            "first_admissions": load.admissions,
            "reuse_ratio": rounded(load.reused_tokens / admitted) if admitted else None,
            "host_ratio": (rounded(load.host_tokens / admitted) if admitted and cols.host_tier
                           else None),
        })
    return out


def _routing(cols: Columns) -> dict[str, Any] | None:
    decisions = sum(w.requests for w in cols.workers.values())
    if not decisions:
        return None
    shortfall = sorted(cols.overlap_shortfall.items())
    return {
        "decisions": decisions,
        "queued": sum(w.queued for w in cols.workers.values()),
        "overlap_shortfall": [[gap, count] for gap, count in shortfall] or None,
        "overlap_bins": overlap_bins(shortfall) or None,
    }


def overlap_bins(shortfall: Sequence[tuple[int, int]]) -> list[list[Any]]:
    """The overlap given up in bins that double: `0`, `1`, `2-3`, `4-7`, `8-15`... (a few bars
    whatever the spread; a KV router gives up no overlap on most decisions, so the rest is a
    long thin tail), `[label, count]` from 0 to the largest gap's bin."""
    if not shortfall:
        return []
    counts: dict[int, int] = {}
    for gap, count in shortfall:
        k = gap.bit_length()  # 0 -> bin 0, 1 -> 1, 2..3 -> 2, 4..7 -> 3...
        counts[k] = counts.get(k, 0) + count
    bins = []
    for k in range(max(counts) + 1):
        low, high = (0, 0) if k == 0 else (1 << (k - 1), (1 << k) - 1)
        bins.append([str(low) if low == high else f"{low}\u2013{high}", counts.get(k, 0)])
    return bins


_G2_TOTALS = ("d2h_transfers", "d2h_blocks", "d2h_bytes", "h2d_transfers", "h2d_blocks",
              "h2d_bytes", "restores_deferred", "store_cohorts_retried", "host_evicted_blocks",
              "pools")


def _g2(summary: Mapping[str, Any], cols: Columns | None, grid: Grid | None,
        ) -> dict[str, Any] | None:
    transfers = summary.get("g2_transfers")
    if transfers is None:
        return None
    transfers = mapping(transfers, "summary.g2_transfers")
    domains = [mapping(d, f"summary.g2_domains[{i}]")
               for i, d in enumerate(listing(summary.get("g2_domains"), "summary.g2_domains"))]
    restored = None
    if cols is not None and grid is not None and cols.host_tier:
        restored = [rounded(v / (grid.width / 1000.0))
                    for v in sums(cols.admit_at, cols.admit_host, grid)]
    scopes = transfers.get("scopes")
    return {
        "totals": {key: transfers.get(key) for key in _G2_TOTALS if _number(transfers.get(key))},
        "scopes": [s for s in scopes if isinstance(s, str)] if isinstance(scopes, list) else [],
        "domains": [{key: d.get(key) for key in ("capacity_blocks", "resident_blocks",
                                                  "used_blocks") if _number(d.get(key))}
                    for d in domains],
        "restored_tokens_per_s": restored,
        "timeline": host_traffic(summary.get("g2_timeline")),
    }


def _g3(summary: Mapping[str, Any], cols: Columns | None, grid: Grid | None,
        ) -> dict[str, Any] | None:
    """The reference's `g3_offload` block flattened (`read.completed_jobs`...), the tokens G3
    brought up at first admissions per second, and the G3 timeline's rates and occupancy."""
    block = summary.get("g3_offload")
    if block is None:
        return None
    block = mapping(block, "summary.g3_offload")
    totals: dict[str, Any] = {}
    for key, value in block.items():
        if isinstance(value, Mapping):
            totals.update({f"{key}.{k}": v for k, v in value.items() if _number(v)})
        elif _number(value):
            totals[key] = value
    restored = None
    if cols is not None and grid is not None and cols.g3_tier:
        restored = [rounded(v / (grid.width / 1000.0))
                    for v in sums(cols.admit_at, cols.admit_g3, grid)]
    return {"totals": totals, "restored_tokens_per_s": restored,
            "timeline": host_traffic(summary.get("g3_timeline"), G3_PATH, ("write", "read"))}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


__all__ = ["ReportShapeError", "data_json", "page_data"]
