"""What ai-dynamo 1.6.1 does with KV cache groups (`kv_cache_groups`), probed on the installed
wheel and pinned in figures, with kvreplay's run of each scenario beside it (skipped without
the reference). Six requests of 8 prompt tokens and 5 outputs, 4-token pages of 100 bytes,
1,000 bytes per rank, budget 16 tokens, fixed 1 ms passes, unless said otherwise."""

from __future__ import annotations

from typing import Any

import harness
import pytest

pytestmark = pytest.mark.reference

FULL = {"name": "full", "kind": "attention", "num_layers": 1, "block_size_tokens": 4,
        "page_size_bytes": 100}
WINDOW = {**FULL, "name": "swa", "sliding_window": 4}
RANK = {"backend": "vllm", "block_size": 4, "enable_prefix_caching": False, "max_num_seqs": 8,
        "max_num_batched_tokens": 16, "enable_chunked_prefill": True, "preemption_mode": "lifo",
        "timing_model": {"type": "fixed", "prefill_ms": 1.0, "decode_ms": 1.0}}


def _row(session: int, prompt: int, output: int) -> dict[str, Any]:
    return {"session_id": f"s{session}", "timestamp": 0, "input_length": prompt,
            "output_length": output,
            "hash_ids": list(range(100 * session, 100 * session - (-prompt // 4)))}


def _scenario(groups: list[dict[str, Any]], capacity: int, rows: list[dict[str, Any]],
              **rank: Any) -> dict[str, Any]:
    return {"kind": "kv-groups", "seed": 0, "block_size": 4, "trace_format": "mooncake",
            "workers": 1, "dp": 1, "rows": rows,
            "rank": {**RANK, **rank, "kv_cache_groups": groups,
                     "kv_cache_capacity_bytes": capacity}}


def _both(scn: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The reference's (first admission, end, admissions, status) per request, sorted, after
    checking that kvreplay gives the same figures."""
    pytest.importorskip("dynamo.replay")
    assert harness.check(scn) == ("match", [])
    rows = harness.run_reference(scn)["per_request"]
    return sorted(((r["first_admit_ms"], r["terminal_time_ms"], r["admission_count"],
                    r["terminal_status"]) for r in rows), key=lambda t: (t[0] is not None, t))


SIX = [_row(k, 8, 5) for k in range(1, 7)]


def test_a_sliding_window_runs_more_at_once_than_a_full_history_group() -> None:
    """Same bytes: the full-history group preempts one request and ends at 14 ms; the 4-token
    window frees expired pages, never preempts and ends at 12 ms. `num_layers` charges
    nothing (the page bytes are the whole group's)."""
    full = [(0.0, 6.0, 1, "completed"), (0.0, 6.0, 1, "completed"), (1.0, 8.0, 1, "completed"),
            (1.0, 13.0, 2, "completed"), (6.0, 14.0, 1, "completed"),
            (8.0, 14.0, 1, "completed")]
    assert _both(_scenario([FULL], 1000, SIX)) == full
    assert _both(_scenario([{**FULL, "num_layers": 24}], 1000, SIX)) == full
    assert _both(_scenario([WINDOW], 1000, SIX)) == [
        (0.0, 8.0, 1, "completed"), (0.0, 8.0, 1, "completed"), (1.0, 9.0, 1, "completed"),
        (1.0, 10.0, 1, "completed"), (3.0, 10.0, 1, "completed"), (6.0, 12.0, 1, "completed")]


def test_a_prompt_whose_last_token_needs_more_than_the_pool_is_rejected() -> None:
    """350 bytes: 13 tokens need a 4th page and are rejected (at 1 ms, when the other prompt's
    pass ends); 12 tokens run. Under a window only the last token's pages count: 16 tokens in
    4-token chunks run in 350."""
    assert _both(_scenario([FULL], 350, [_row(1, 13, 3), _row(2, 12, 1)])) == [
        (None, 1.0, 0, "rejected"), (0.0, 1.0, 1, "completed")]
    assert _both(_scenario([WINDOW], 350, [_row(1, 16, 3)], max_num_batched_tokens=4)) == [
        (0.0, 6.0, 1, "completed")]


def test_a_forward_larger_than_the_pool_aborts_both_replays() -> None:
    """A 12-token prompt in 350 bytes: its second token needs 400 bytes; one 16-token chunk
    under a window needs 4 pages at once. The reference aborts the whole replay, kvreplay
    stops at the same forward (GroupedKvOverflow)."""
    pytest.importorskip("dynamo.replay")
    for scn, forward in ((_scenario([FULL], 350, [_row(1, 12, 2)]),
                          "needs 400 bytes for 1 scheduled tokens after 12 computed tokens, "
                          "exceeding the entire 350-byte cache pool"),
                         (_scenario([WINDOW], 350, [_row(1, 16, 3)]),
                          "needs 400 bytes for 16 scheduled tokens after 0 computed tokens")):
        with pytest.raises(Exception, match="is now poisoned") as raised:
            harness.run_reference(scn)
        assert forward in str(raised.value)
        status, details = harness.check(scn)
        assert status == "reference-error" and details[0].startswith("both abort"), details


def test_a_waiting_request_is_admitted_when_its_chunk_fits() -> None:
    """600 bytes, budget 8: a 16-token prompt arriving at 1 ms is admitted beside a decoding
    request with its first chunk's pages (not its whole prompt's) and preempts itself on
    growth until that request ends (4 admissions)."""
    rows = [_row(1, 8, 8), {**_row(2, 16, 1), "timestamp": 1}]
    assert _both(_scenario([FULL], 600, rows, max_num_batched_tokens=8)) == [
        (0.0, 12.0, 1, "completed"), (1.0, 14.0, 4, "completed")]


@pytest.mark.parametrize("capacity", [10**4, 10**12])
def test_polynomial_decode_runs_at_full_use_beside_groups(capacity: int) -> None:
    """Polynomial timing: every decode pass takes the polynomial's u = 1 value, 34.01 ms,
    whatever the pool; the prefill polynomial is unchanged."""
    pytest.importorskip("dynamo.replay")
    scn = _scenario([FULL], capacity, [_row(1, 8, 4)], timing_model={"type": "polynomial"})
    (row,) = harness.run_reference(scn)["per_request"]
    assert row["itl_ms"] == pytest.approx(34.01) and row["ttft_ms"] == pytest.approx(16.622914)
    assert harness.check(scn) == ("match", [])
