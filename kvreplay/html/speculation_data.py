"""The speculative-decoding part of the HTML report, from the report's `summary.speculation`
(traces-and-reports.md): the observed acceptance rate per draft position, and the token-gap
distribution with speculation (the gaps inside a burst are 0 ms: the CDF jumps there by their
share, then rises through the percentiles of the gaps between steps).

A run without `summary.speculation` has none of it: its data section and page are unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvreplay.html.columns import listing, mapping, number
from kvreplay.html.series import rounded, summary_cdf

PATH = "summary.speculation"


def speculation_data(summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """{"kind", "tokens_per_step", "draft_acceptance_rate", "burst_share", "positions",
    "acceptance_rate", "cumulative_acceptance_rate", "itl", "step_itl"}; None without MTP."""
    value = summary.get("speculation")
    if value is None:
        return None
    block = mapping(value, PATH)
    positions = [mapping(p, f"{PATH}.acceptance_by_position[{i}]") for i, p in
                 enumerate(listing(block.get("acceptance_by_position"), PATH,
                                   "acceptance_by_position"))]
    where = f"{PATH}.acceptance_by_position"
    burst = number(block.get("burst_itl_share"), PATH, "burst_itl_share") or 0.0
    steps = summary_cdf(block, "step_itl") if block.get("speculative_steps") else None
    itl = None
    if steps is not None:  # all gaps: the bursts' share at 0 ms, then the steps' gaps
        itl = {"x": [0.0, 0.0, *steps["x"]],
               "p": [0.0, rounded(burst), *(rounded(burst + (1.0 - burst) * p)
                                            for p in steps["p"])]}
    return {
        "kind": str(block.get("kind")),
        "tokens_per_step": number(block.get("tokens_per_step"), PATH, "tokens_per_step"),
        "draft_acceptance_rate": number(block.get("draft_acceptance_rate"), PATH,
                                        "draft_acceptance_rate"),
        "burst_share": rounded(burst),
        "positions": [str(p.get("position")) for p in positions],
        "acceptance_rate": [number(p.get("acceptance_rate"), where, "acceptance_rate")
                            for p in positions],
        "cumulative_acceptance_rate": [
            number(p.get("cumulative_acceptance_rate"), where, "cumulative_acceptance_rate")
            for p in positions],
        "itl": itl,
        "step_itl": steps,
    }
