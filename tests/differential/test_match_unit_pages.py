"""Hits ending inside a block: a prefix match unit below the block with prefix caching, as
ai-dynamo 1.6.1 runs it (probed 2026-12-02) and kvreplay executes it (engine/unit_pages.py).

The figures here were read off the reference and are pinned on kvreplay (always) and on the
reference (skipped without it): a later prompt's reuse for prefixes of 10, 12, 18, 20, 26, 32
and 33 tokens on 16-token blocks, whatever the trace's hash-id granularity (hash ids cover
trace blocks of 1, 2, 4 or 16 tokens: reuse is counted on tokens); the page of the prompt's
last unit boundary cached (telemetry's inactive blocks); the restore's page copy and its pin
charged at admission; a unit refused without a state cache.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import harness
import pytest
from test_match_unit_reference import expected_hit

os.environ.setdefault("DYN_LOG", "error")
# Both engines are compared where the reference is installed; kvreplay's figures always.
REFERENCE = importlib.util.find_spec("dynamo") is not None and importlib.util.find_spec(
    "dynamo.replay") is not None


def _scenario(bs: int, unit: int, rows: list[dict[str, Any]], trace_block: int,
              blocks: int = 64, telemetry: float | None = None) -> dict[str, Any]:
    rank = {"backend": "vllm", "block_size": bs, "num_gpu_blocks": blocks,
            "kv_cache_bytes_per_token": 1000, "max_num_seqs": 8, "max_num_batched_tokens": 64,
            "enable_chunked_prefill": True, "preemption_mode": "lifo",
            "timing_model": {"type": "fixed", "prefill_ms": 1.0, "decode_ms": 1.0},
            "enable_prefix_caching": True, "state_cache": {"bytes_per_request": bs * 1000},
            "prefix_match_unit": unit}
    scn = {"kind": "match-unit", "seed": 0, "block_size": trace_block,
           "trace_format": "mooncake", "rank": rank, "workers": 1, "dp": 1, "rows": rows}
    if telemetry is not None:
        scn["telemetry_ms"] = telemetry
    return scn


def _row(name: str, ids: list[int], length: int, at: float, out: int = 1) -> dict[str, Any]:
    return {"session_id": name, "hash_ids": ids, "input_length": length, "output_length": out,
            "timestamp": at}


def _prefix_pair(bs: int, unit: int, shared: int, trace_block: int) -> dict[str, Any]:
    """A prompt of `shared` tokens, then one of 40 whose first `shared` tokens are the same."""
    first = list(range(1, -(-shared // trace_block) + 1))
    second = list(range(1, -(-40 // trace_block) + 1))
    return _scenario(bs, unit, [_row("a", first, shared, 0), _row("b", second, 40, 500)],
                     trace_block)


def _gauges(report: dict[str, Any]) -> dict[float, tuple[int, int]]:
    out = {}
    for sample in report["telemetry"]["samples"]:
        rank = sample["decode_scheduler_metrics"][0]
        out[sample["sampled_at_ms"]] = (rank["active_blocks"], rank["inactive_blocks"])
    return out


SHARED = (10, 12, 18, 20, 26, 32, 33)
# The reference's reuse of the second prompt on 16-token blocks, by unit (read off 1.6.1 at
# trace blocks of 1, 2 and 4 tokens: the same at each; the rules' expected_hit gives them).
REUSE = {1: [10, 12, 18, 20, 26, 0, 33], 2: [10, 12, 18, 20, 26, 0, 32],
         4: [8, 12, 16, 20, 24, 0, 32], 8: [8, 8, 16, 16, 24, 0, 32],
         16: [0, 0, 16, 16, 16, 0, 32]}


def test_the_rules_give_the_probed_reuse() -> None:
    """The derived rules (test_match_unit_reference.expected_hit) give the reuse read off the
    reference: a kept state at the prompt's last unit boundary inside its last block."""
    for unit, reuse in REUSE.items():
        assert [expected_hit(k, 40, 16, unit, 64) for k in SHARED] == reuse


@pytest.mark.parametrize("trace_block", [1, 2, 4, 16])
@pytest.mark.parametrize("unit", sorted(REUSE))
def test_reuse_ends_at_unit_boundaries_whatever_the_hash_granularity(
        unit: int, trace_block: int) -> None:
    """kvreplay reuses what the reference does for prefixes ending inside a block, with hash
    ids per 1, 2, 4 or 16 tokens (a 16-token trace block cannot cut a 40-token prompt's ids
    shorter, so the second prompt's ids are the first's extended), and the second prompt's
    passes and times are the reference's too (when installed)."""
    got = []
    for shared in SHARED:
        scn = _prefix_pair(16, unit, shared, trace_block)
        got.append(harness.run_kvreplay(scn)["per_request"][1]["reused_input_tokens"])
        if REFERENCE:
            status, details = harness.check(scn)
            assert status == "match", details
    assert got == REUSE[unit]


def test_a_diverging_prompt_finds_no_state_before_the_last_block() -> None:
    """A 40-token prompt keeps states in its last block only (32 and its last unit boundary),
    so a prompt sharing its first 10-20 tokens and then diverging reuses nothing, though those
    tokens are cached (the reference: 16 tokens reused without a state cache)."""
    for shared in (10, 12, 18, 20):
        first = list(range(1, 21))
        second = first[:shared // 2] + list(range(100, 120 - shared // 2))
        scn = _scenario(16, 4, [_row("a", first, 40, 0), _row("b", second, 40, 500)], 2)
        assert harness.run_kvreplay(scn)["per_request"][1]["reused_input_tokens"] == 0
        if REFERENCE:
            assert harness.check(scn)[0] == "match"


# An 11-token prompt on 4-token blocks with a unit of 2 (states of one block), then one of 15
# sharing its first 10 tokens: the first keeps states at 8 and 10, the block of tokens 8-10 is
# cached under the alias of tokens 8-9; the second restores at 10 into a page copy of its own.
PAGE_ROWS = [_row("a", list(range(1, 12)), 11, 0),
             _row("b", [*range(1, 11), 50, 51, 52, 53, 54], 15, 20)]
# (active, inactive) blocks sampled every 1 ms, read off the reference.
PAGE_GAUGES = {1.0: (3, 0), 2.0: (5, 0), 3.0: (0, 5), 21.0: (6, 1), 22.0: (6, 3), 23.0: (0, 9)}


def test_the_page_of_the_last_unit_boundary_is_cached_and_copied() -> None:
    """After the first prompt, 5 blocks are cached (2 full token blocks, the partial page, the
    states at 8 and 10); the second's first pass holds its blocks, its state, the restored
    checkpoint and the page it copies (6 in use, 1 cached); it reuses 10 tokens."""
    scn = _scenario(4, 2, PAGE_ROWS, 1, telemetry=1.0)
    mine = harness.run_kvreplay(scn)
    assert [r["reused_input_tokens"] for r in mine["per_request"]] == [0, 10]
    gauges = _gauges(mine)
    assert {t: gauges[t] for t in PAGE_GAUGES} == PAGE_GAUGES
    if REFERENCE:
        assert harness.check(scn)[0] == "match"


@pytest.mark.parametrize("outputs", [2, 3, 6])
def test_the_alias_stays_when_the_page_fills(outputs: int) -> None:
    """With outputs filling the first prompt's block of tokens 8-10 (and the next), the second
    prompt still restores 10 tokens through the alias, as in the reference."""
    rows = [{**PAGE_ROWS[0], "output_length": outputs}, PAGE_ROWS[1]]
    scn = _scenario(4, 2, rows, 1, telemetry=1.0)
    assert harness.run_kvreplay(scn)["per_request"][1]["reused_input_tokens"] == 10
    if REFERENCE:
        assert harness.check(scn)[0] == "match"


@pytest.mark.parametrize(("blocks", "status"), [(6, "rejected"), (7, "completed")])
def test_admission_charges_the_page_a_restore_copies(blocks: int, status: str) -> None:
    """The second prompt (4 blocks, a 1-block state, the restored state and the page it
    copies: 7 blocks) is rejected by a 6-block pool, as in the reference, and runs in 7."""
    scn = _scenario(4, 2, PAGE_ROWS, 1, blocks=blocks)
    mine = harness.run_kvreplay(scn)
    assert mine["per_request"][1]["terminal_status"] == status
    if REFERENCE:
        assert harness.check(scn)[0] == "match"


@pytest.mark.reference
def test_the_reference_refuses_a_unit_without_a_state_cache() -> None:
    """1.6.1 refuses a prefix match unit on a rank without a state cache (HYBRID-MATCH-UNIT
    refuses it before the engine, so kvreplay never runs one)."""
    pytest.importorskip("dynamo.replay")
    scn = _prefix_pair(16, 4, 10, 4)
    del scn["rank"]["state_cache"]
    with pytest.raises(Exception, match="prefix_match_unit currently requires state_cache"):
        harness.run_reference(scn)
