"""The `kv-groups` kind (harness.generate): hybrid models' KV cache groups on aggregated vLLM
workers (engine/kv_groups.py), and how a replay the reference aborts is compared.

A scenario draws 1-3 groups (full attention, sliding-window attention, convolution with its
window), page sizes of 1-16 tokens (divisors of the block size or not), page bytes, windows of
1-16 tokens, and one byte capacity sized against the drawn requests' largest footprint (often
enough for all, sometimes tight enough that requests wait, are preempted, are rejected or
outgrow the pool, which the reference answers by aborting the replay), with chunked prefill,
budgets, sequence caps, preemption order, timing, workers and attention DP drawn too, and
telemetry samples on 3 scenarios in 10.
"""

from __future__ import annotations

import random
import re
from typing import Any

# The reference's abort of a whole replay ("worker 0 is now poisoned ...") and kvreplay's
# GroupedKvOverflow name the same forward: its bytes, its scheduled and computed tokens.
_FORWARD = re.compile(r"needs ([\d,]+) bytes .*?for (\d+) scheduled tokens after (\d+) computed")
POISONED = "is now poisoned"


def _group(rng: random.Random, name: str) -> dict[str, Any]:
    kind = rng.choice(["full", "full", "sliding", "sliding", "convolution"])
    group: dict[str, Any] = {
        "name": name, "kind": "convolution" if kind == "convolution" else "attention",
        "num_layers": rng.choice([1, 2, 8, 24]),
        "block_size_tokens": rng.choice([1, 2, 3, 4, 4, 4, 6, 8, 16]),
        "page_size_bytes": rng.choice([10, 32, 50, 100, 100, 128, 250, 1000])}
    if kind != "full":
        group["sliding_window"] = rng.choice([1, 2, 3, 4, 5, 8, 12, 16])
    return group


def _span(group: dict[str, Any], before: int, after: int) -> int:
    """Bytes of a forward [before, after) in one group (kv_groups.py's rule)."""
    tokens = group["block_size_tokens"]
    window = group.get("sliding_window")
    lo = 0
    if window:
        start = before - window + 1
        lo = start // tokens if start > 0 else 0
    return (-(-after // tokens) - lo) * group["page_size_bytes"]


def footprint(groups: list[dict[str, Any]], length: int) -> int:
    """The bytes a request holds when its `length`-th token is computed alone (its peak
    outside a long chunk)."""
    return sum(_span(g, max(length - 1, 0), length) for g in groups)


def scenario(rng: random.Random, scn: dict[str, Any], rank: dict[str, Any],
             rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Fill `scn` (its rows drawn by the caller) with a grouped rank."""
    for key in ("num_gpu_blocks", "kv_cache_bytes_per_token"):
        rank.pop(key)  # groups replace the linear KV geometry (the default block count stays)
    rank["enable_prefix_caching"] = False
    groups = [_group(rng, f"g{k}") for k in range(rng.choice([1, 1, 2, 2, 3]))]
    rank["kv_cache_groups"] = groups
    longest = max(r["input_length"] + r["output_length"] for r in rows)
    # A request's peak: its last token, or a whole first chunk (its pages all at once).
    chunk = min(rank["max_num_batched_tokens"], max(r["input_length"] for r in rows))
    peak = max(footprint(groups, longest), sum(_span(g, 0, chunk) for g in groups))
    # Room for 1-4 of the longest requests mostly; now and then less than one (rejections and
    # aborted replays) or a few bytes short of a page boundary.
    share = rng.choice([0.6, 0.9, 1.0, 1.0, 1.5, 1.5, 2.0, 2.0, 3.0, 3.0, 4.0])
    rank["kv_cache_capacity_bytes"] = max(1, int(peak * share) - rng.choice([0, 0, 1, 7]))
    deployment(rng, scn, rank)
    scn["rows"] = rows
    # Telemetry samples on 3 scenarios in 10, from a stream of their own (the other draws
    # unchanged): a grouped rank's gauges are its pages and bytes.
    sampled = random.Random(f"kv-groups-telemetry:{scn['seed']}")
    if sampled.random() < 0.3:
        scn["telemetry_ms"] = sampled.choice([0.5, 1.0, 2.0, 2.5, 3.0, 5.0, 10.0])
    return scn


def deployment(rng: random.Random, scn: dict[str, Any], rank: dict[str, Any]) -> None:
    """The draws a hybrid model's aggregated deployment shares with kind `hybrid`: polynomial
    timing 1 in 5, `max_model_len` 15 in 100, 1-2 workers, DP 1-2, a time cap 1 in 10."""
    if rng.random() < 0.2:
        rank["timing_model"] = {"type": "polynomial"}
    if rng.random() < 0.15:
        rank["max_model_len"] = rng.choice([8, 12, 16, 20])
    scn["rank"] = rank
    scn["workers"] = rng.choice([1, 1, 2])
    scn["dp"] = rng.choice([1, 1, 1, 2])
    if rng.random() < 0.1:
        scn["max_sim_time_ms"] = float(rng.choice([20, 50, 120]))


def same_abort(reference_error: str, kvreplay_error: str) -> bool:
    """Both engines stopped at the same forward (bytes, scheduled and computed tokens)."""
    ours, theirs = _FORWARD.search(kvreplay_error), _FORWARD.search(reference_error)
    return ours is not None and theirs is not None and \
        [g.replace(",", "") for g in ours.groups()] == [g.replace(",", "") for g in theirs.groups()]
