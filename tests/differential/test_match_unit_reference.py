"""What a prefix match unit does with prefix caching on in ai-dynamo 1.6.1 (skipped without it):
the rules docs/engine.md ("Hybrid KV", "Match units with prefix caching") derives, checked on
the reference pass by pass; kvreplay executes them (engine/scheduler.py `_aligned_end`, with
units below the block engine/unit_pages.py: test_match_unit_pages.py, difftest kind match-unit).

One request computes a prompt of P tokens alone (fixed 1 ms passes: its first token's time
counts its prefill passes), then a later one sharing its first min(P, Q) tokens of Q reports
the prefix it reused.
"""

from __future__ import annotations

from typing import Any

import harness
import pytest

pytestmark = pytest.mark.reference

# (block size, unit): units below the block, the block itself, and units that are not powers.
GEOMETRIES = [(4, 1), (4, 2), (4, 4), (8, 2), (8, 4), (6, 2), (6, 3)]


def chunk_ends(prompt: int, bs: int, unit: int, budget: int) -> list[int]:
    """Where the prefill passes of a lone prompt end: a chunk that stops short of the prompt's
    last whole block ends on a block boundary (absolute; when that computes nothing and the
    whole budget is below a block it stays as the budget leaves it, unaligned; with a larger
    budget the request waits for a pass with more of it left, which a lone prompt never
    meets); the chunk crossing the last block boundary ends on it, and the one crossing the
    prompt's last unit boundary ends on that."""
    last_block, last_unit = prompt - prompt % bs, prompt - prompt % unit
    done, ends = 0, []
    while done < prompt:
        after = min(done + budget, prompt)
        end = after
        if after < last_block:
            end = after // bs * bs
            if end <= done:
                end = after
        elif done < last_block < after:
            end = last_block
        elif done < last_unit < after:
            end = last_unit
        done = end
        ends.append(end)
    return ends


def checkpoints(prompt: int, bs: int, unit: int, ends: list[int]) -> set[int]:
    """The states kept for later prompts: those of the passes ending in the block holding the
    prompt's last token, at its start (a block boundary) or at the prompt's last unit
    boundary. None of the earlier ones, and none at the prompt's end when that is a block
    boundary."""
    last_unit = prompt - prompt % unit
    block = (prompt - 1) // bs
    return {e for e in ends if e // bs == block and (e % bs == 0 or e == last_unit)}


def expected_hit(prompt: int, query: int, bs: int, unit: int, budget: int) -> int:
    """The later query's hit: the longest kept state it shares (its last token recomputed)."""
    kept = checkpoints(prompt, bs, unit, chunk_ends(prompt, bs, unit, budget))
    return max((e for e in kept if e <= min(query - 1, prompt)), default=0)


def _scenario(bs: int, unit: int, budget: int, rows: list[dict[str, Any]]) -> dict[str, Any]:
    rank = {"backend": "vllm", "block_size": bs, "num_gpu_blocks": 64,
            "kv_cache_bytes_per_token": 1000, "max_num_seqs": 8,
            "max_num_batched_tokens": budget, "enable_chunked_prefill": True,
            "preemption_mode": "fifo",
            "timing_model": {"type": "fixed", "prefill_ms": 1.0, "decode_ms": 1.0},
            "state_cache": {"bytes_per_request": bs * 1000}, "enable_prefix_caching": True,
            "prefix_match_unit": unit}
    return {"kind": "hybrid", "seed": 0, "block_size": bs, "trace_format": "mooncake",
            "rank": rank, "workers": 1, "dp": 1, "rows": rows}


def _row(name: str, length: int, bs: int, at: int) -> dict[str, Any]:
    return {"session_id": name, "hash_ids": list(range(1, -(-length // bs) + 1)),
            "input_length": length, "output_length": 1, "timestamp": at}


def _budgets(bs: int, unit: int) -> list[int]:
    return sorted({3, max(unit, bs - 1), bs + 1, 2 * bs + unit, 64})


@pytest.mark.parametrize(("bs", "unit"), GEOMETRIES)
def test_prefill_passes_and_kept_states_follow_the_derived_rules(bs: int, unit: int) -> None:
    """For every prompt up to two blocks and a half and budgets below, at and above a block,
    the reference's prefill pass count and a later prompt's hit (queries around the prompt's
    length and its last block) are the ones chunk_ends / checkpoints give (a wider grid,
    4,662 runs with budgets 2 to 64 and prompts to three blocks, matched too)."""
    pytest.importorskip("dynamo.replay")
    wrong = []
    for prompt in range(2, 2 * bs + bs // 2 + 1):
        for budget in _budgets(bs, unit):
            ends = chunk_ends(prompt, bs, unit, budget)
            alone = harness.run_reference(_scenario(bs, unit, budget, [_row("a", prompt, bs, 0)]))
            if alone["per_request"][0]["ttft_ms"] != float(len(ends)):
                wrong.append(("passes", prompt, budget, alone["per_request"][0]["ttft_ms"], ends))
            for query in sorted({prompt - 1, prompt + 1, prompt + bs} - {0, 1}):
                rows = [_row("a", prompt, bs, 0), _row("b", query, bs, 500)]
                got = harness.run_reference(_scenario(bs, unit, budget, rows))
                reused = got["per_request"][1]["reused_input_tokens"]
                want = expected_hit(prompt, query, bs, unit, budget)
                if reused != want:
                    wrong.append(("hit", prompt, budget, query, reused, want))
    assert wrong == []


def test_the_rules_reproduce_the_issue_probe() -> None:
    """The probe docs/engine.md quotes (4-token blocks, a 15-token prompt after one of L):
    a unit of 2 reuses 8, 10, 10 after L = 9, 10, 11 and nothing after L = 12; a 20-token
    prompt in 5-token chunks leaves 16 to one sharing its first 16 tokens, not 12."""
    assert [expected_hit(L, 15, 4, 2, 64) for L in (9, 10, 11, 12)] == [8, 10, 10, 0]
    assert [expected_hit(L, 15, 4, 1, 64) for L in (9, 10, 11, 12, 8)] == [9, 10, 11, 0, 0]
    assert chunk_ends(20, 4, 2, 5) == [4, 8, 12, 16, 20]
    assert expected_hit(20, 17, 4, 2, 5) == 16 and expected_hit(20, 13, 4, 2, 5) == 0
    assert chunk_ends(24300, 1536, 128, 7680)[-3:] == [23040, 24192, 24300]
