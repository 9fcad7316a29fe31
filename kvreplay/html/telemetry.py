"""The engine-telemetry charts' data, from the report's top-level `telemetry` samples.

Each run keeps its own sample times (runs sample on their own cadence and length). Per rank
(`pool worker`, `.rank` with attention DP): KV cache usage (blocks in use, and physically
resident, as a share of capacity), waiting requests (the queue) and running requests (the
batch), as each sample read them. Up to MAX_RANKS ranks are drawn one line each; beyond that a
series is summarized as the mean over ranks with the largest and smallest, so the page stays
the same size whatever the deployment. At most MAX_POINTS samples per run (every k-th one:
the figures are point-in-time gauges, nothing is summed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kvreplay.html.columns import ReportShapeError, listing, mapping, number
from kvreplay.html.series import rounded

MAX_POINTS = 512
MAX_RANKS = 8
PATH = "telemetry.samples"
GAUGES = (("usage", "active_cache_usage"), ("physical", "physical_cache_usage"),
          ("waiting", "waiting_requests"), ("running", "running_requests"))
ROLES = ("prefill_scheduler_metrics", "decode_scheduler_metrics")


def telemetry_series(value: Any) -> dict[str, Any] | None:
    """Per-rank gauge series at the sample times (None when the report has no telemetry)."""
    if value is None:
        return None
    samples = listing(mapping(value, "telemetry").get("samples"), "telemetry", "samples")
    if not samples:
        return None
    step = max(1, -(-len(samples) // MAX_POINTS))
    picked = [mapping(s, f"{PATH}[{i}]") for i, s in enumerate(samples)][::step]
    if step > 1 and picked[-1] is not samples[-1]:
        picked.append(mapping(samples[-1], f"{PATH}[{len(samples) - 1}]"))
    names = _rank_names(picked[0], f"{PATH}[0]")
    series: dict[str, list[list[float]]] = {key: [] for key, _ in GAUGES}
    for i, sample in enumerate(picked):
        rows = _rows(sample, f"{PATH}[{i * step}]")
        if len(rows) != len(names):
            raise ReportShapeError(f"{PATH}[{i * step}]: {len(rows)} ranks where the first "
                                   f"sample has {len(names)} (static pools do not change)")
        for key, field in GAUGES:
            series[key].append([_gauge(row, field, f"{PATH}[{i * step}]") for row in rows])
    out: dict[str, Any] = {
        "t_s": [rounded((number(s.get("sampled_at_ms"), PATH, "sampled_at_ms", optional=False)
                         or 0.0) / 1000.0) for s in picked],
        "samples": len(samples),
        "summarized": len(names) > MAX_RANKS,
        "names": names if len(names) <= MAX_RANKS else ["mean", "largest", "smallest"],
        "router_queue": _router_queue(picked),
    }
    for key, _ in GAUGES:
        out[key] = _columns(series[key], len(names) > MAX_RANKS)
    return out


def _rank_names(sample: Mapping[str, Any], path: str) -> list[str]:
    rows = [(role, row) for role in ROLES
            for row in listing(sample.get(role), path, role)]
    ranks = any(mapping(row, path).get("dp_rank") for _, row in rows)
    names = []
    for role, row in rows:
        pool = "prefill" if role.startswith("prefill") else (
            "decode" if sample.get("prefill_scheduler_metrics") else "agg")
        worker = row.get("worker_id")
        name = f"{pool} {worker}" + (f".{row.get('dp_rank')}" if ranks else "")
        names.append(name)
    return names


def _rows(sample: Mapping[str, Any], path: str) -> list[Mapping[str, Any]]:
    return [mapping(row, f"{path}.{role}[{k}]") for role in ROLES
            for k, row in enumerate(listing(sample.get(role), path, role))]


def _gauge(row: Mapping[str, Any], field: str, path: str) -> float:
    n = number(row.get(field), path, field, optional=False)
    assert n is not None
    return n


def _columns(per_sample: list[list[float]], summarized: bool) -> list[list[float]]:
    """One series per rank (per_sample is sample-major), or mean / largest / smallest."""
    if not summarized:
        return [[rounded(v) for v in column] for column in zip(*per_sample, strict=True)]
    return [[rounded(sum(values) / len(values)) for values in per_sample],
            [rounded(max(values)) for values in per_sample],
            [rounded(min(values)) for values in per_sample]]


def _router_queue(samples: Sequence[Mapping[str, Any]]) -> list[float] | None:
    queued = [(number(s.get("router_pending_prefill_requests"), PATH,
                      "router_pending_prefill_requests") or 0.0)
              + (number(s.get("router_pending_decode_requests"), PATH,
                        "router_pending_decode_requests") or 0.0) for s in samples]
    return queued if any(queued) else None
