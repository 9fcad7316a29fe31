"""The summary's `speculation` block (MTP runs only): what speculative decoding did, per request
totals and per draft position (engine.md section "MTP speculative decoding", "Report").

Totals come from the completed requests' records (tokens actually emitted: a burst is capped by
the tokens a request has left); the per-position figures come from the ranks' draws (every
verification drawn, before that cap: the draft model's acceptance as sampled), so a position's
observed conditional rate estimates the configured one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from kvreplay.engine.metrics import Distribution


def merged_draws(histograms: Iterable[Sequence[int]]) -> list[int] | None:
    """The ranks' draw histograms (`[a]`: verifications that accepted a draft positions) summed
    position by position (ranks may draft different lengths); None without a speculative rank."""
    total: list[int] | None = None
    for hist in histograms:
        if total is None:
            total = []
        if len(hist) > len(total):
            total += [0] * (len(hist) - len(total))
        for accepted, count in enumerate(hist):
            total[accepted] += count
    return total


def by_position(draws: Sequence[int]) -> list[dict[str, Any]]:
    """Per draft position (1-based): verifications that reached it (every earlier position
    accepted), of which accepted; its conditional rate (accepted / reached, null when never
    reached) and its rate over every verification (accepted / all)."""
    verifications = sum(draws)
    out = []
    for position in range(1, len(draws)):
        reached = sum(draws[position - 1:])
        accepted = sum(draws[position:])
        out.append({"position": position, "verified_steps": reached, "accepted_steps": accepted,
                    "acceptance_rate": accepted / reached if reached else None,
                    "cumulative_acceptance_rate":
                        accepted / verifications if verifications else None})
    return out


def speculation_summary(counts: Sequence[int], draws: Sequence[int] | None,
                        gaps: int, burst_gaps: int, step_itl: Distribution) -> dict[str, Any]:
    """The block: `counts` = (requests, speculative steps, draft tokens, accepted draft tokens)
    over the completed requests decoded speculatively; `draws` the merged draw histogram;
    `gaps` the completed requests' token gaps, `burst_gaps` those of 0 ms (tokens of one burst),
    `step_itl` the distribution of the others (the gaps between steps)."""
    requests, steps, drafts, accepted = counts
    draws = draws or [0]
    return {
        "kind": "mtp",
        "requests": requests,
        "speculative_steps": steps,
        "draft_tokens": drafts,
        "accepted_draft_tokens": accepted,
        "draft_acceptance_rate": accepted / drafts if drafts else 0.0,
        "mean_accepted_length": accepted / steps if steps else 0.0,
        "tokens_per_step": (steps + accepted) / steps if steps else 0.0,
        "verifications": sum(draws),
        "acceptance_by_position": by_position(draws),
        "burst_itl_share": burst_gaps / gaps if gaps else 0.0,
        **step_itl.summary("step_itl"),
    }
