"""Reports for the HTML tests: example runs (cached per session), hand-made rows, and a scanner
for URLs a page would fetch."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import kvreplay

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NO_G2 = "engine.workers.aggregated.kv_cache.host_offload=null"
NO_G3 = "engine.workers.aggregated.kv_cache.g3_offload=null"


@functools.cache
def _example_text(name: str, overrides: tuple[str, ...] = ()) -> str:
    outcome = kvreplay.run_spec(EXAMPLES / f"{name}.yaml", overrides=list(overrides))
    assert outcome.ok, (outcome.refusals, outcome.error)
    return json.dumps(outcome.report)


def example_report(name: str, *overrides: str) -> dict[str, Any]:
    """A fresh copy of an example's report (tests may change it)."""
    report: dict[str, Any] = json.loads(_example_text(name, overrides))
    return report


def embedded_data(html: str) -> Any:
    """The data section a page embeds."""
    match = re.search(r'<script type="application/json" id="kvreplay-data">(.*?)</script>',
                      html, re.S)
    assert match is not None
    return json.loads(match.group(1))


def row(uuid: int, arrival: float, end: float, *, admit: float | None = None,
        status: str = "completed", worker: int = 0, reused: int = 0, host: int | None = None,
        input_length: int = 100, **extra: Any) -> dict[str, Any]:
    """A per-request row with the fields the renderer reads."""
    admit = arrival if admit is None else admit
    admission: dict[str, Any] = {"admission_ordinal": 0, "pool": "agg",
                                 "pool_admission_ordinal": 0, "at_ms": admit,
                                 "reused_input_tokens": reused, "is_readmission": False}
    if host is not None:
        admission["g1_reused_input_tokens"] = reused - host
        admission["host_reused_input_tokens"] = host
    out: dict[str, Any] = {
        "uuid": f"00000000-0000-0000-0000-{uuid:012d}", "terminal_status": status,
        "arrival_time_ms": arrival, "first_admit_ms": admit, "terminal_time_ms": end,
        "ttft_ms": admit - arrival + 1.0 if status == "completed" else None,
        "itl_ms": 2.0 if status == "completed" else None,
        "e2e_latency_ms": end - arrival if status == "completed" else None,
        "input_length": input_length,
        "admission_history": [admission],
        "routing_history": [{"pool": "agg", "logical_worker_id": worker, "dp_rank": 0,
                             "outcome": "immediate", "queue_entered_at_ms": None,
                             "queue_wait_ms": 0.0, "reported_overlap_tokens": 0,
                             "selected_overlap_blocks": None,
                             "best_available_overlap_blocks": None}],
    }
    out.update(extra)
    return out


# Places where a page names something the browser loads: attributes, CSS, scripts.
FETCHING = [
    re.compile(r"""\b(?:src|href|srcset|action|poster|data|xlink:href)\s*=\s*["']?\s*(?:https?:)?//""",
               re.I),
    re.compile(r"""url\(\s*["']?\s*(?:https?:)?//""", re.I),
    re.compile(r"""@import\s+(?:url\()?\s*["']?\s*(?:https?:)?//""", re.I),
    re.compile(r"""\b(?:fetch|import|importScripts|EventSource|WebSocket|sendBeacon)\s*\(\s*["'`]?\s*(?:https?|wss?):""",
               re.I),
    re.compile(r"""\bimport\s[^;]*?\bfrom\s*["'](?:https?:)?//""", re.I),
    re.compile(r"""\.open\(\s*["'][A-Z]+["']\s*,\s*["'](?:https?:)?//""", re.I),
]


def fetched_urls(html: str) -> list[str]:
    return [m.group(0) for pattern in FETCHING for m in pattern.finditer(html)]
