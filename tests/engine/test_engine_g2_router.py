"""The KV router's view of G2 (engine.md sections 5 and 8): host-pinned credit, event lag,
visibility of a shared pool, stale entries, and the residency mirror. Numbers checked against the
reference engine (tests/engine/test_engine_g2_reference.py re-runs them there)."""

from __future__ import annotations

from typing import Any

import pytest
from g2_support import by_arrival, g2, rank, run_agg

from kvreplay.engine.kv_index import HOST, KvEventError, KvIndex
from kvreplay.engine.pool import REMOVED, STORED


def row(t: float, hashes: list[int], length: int = 9, out: int = 1) -> dict[str, Any]:
    return {"timestamp": t, "hash_ids": hashes, "input_length": length, "output_length": out}


SLOW_SHARED = g2(scope="cluster_shared", d2h_bandwidth_gbps=0.1)
HOST_FIRST = {"overlap_score_credit": 0.5, "host_cache_hit_weight": 1.0}


def placed(t: float, lag: float | None = None) -> tuple[bool, Any]:
    """Two workers in one shared pool; A at 0 (its D2H runs 2 -> 22), the same prompt at t.
    Host credit (1.0 x 2 blocks) beats the owner's device credit (0.5 x 2) once the router sees
    the stored blocks. Returns (placed on A's worker, the second record)."""
    config = dict(HOST_FIRST)
    if lag is not None:
        config["kv_event_lag_ms"] = lag
    result = run_agg([row(0, [1, 2, 3]), row(t, [1, 2, 3])], rank(SLOW_SHARED), workers=2,
                     router="kv_router", router_config=config)
    a, b = by_arrival(result.records)
    return b.routing_history[0].logical_worker_id == a.routing_history[0].logical_worker_id, b


@pytest.mark.parametrize(("t", "on_owner"), [(21.999, True), (22.0, False), (50.0, False)])
def test_a_shared_pool_is_visible_to_every_replica_at_copy_completion(t: float,
                                                                      on_owner: bool) -> None:
    """The store completes at 22: from then on the other replica places on its host credit and
    restores 8 tokens (admitted 2 ms later); just before, the owner's device prefix wins."""
    owner, b = placed(t)
    assert owner is on_owner
    if on_owner:
        assert (b.first_admit_ms, b.first_admission_g1_reused_input_tokens) == (t, 8)
    else:
        assert (b.first_admit_ms, b.first_admission_host_reused_input_tokens) == (t + 2, 8)
        assert b.routing_history[0].selected_overlap_blocks == 2


@pytest.mark.parametrize(("t", "on_owner"), [(22.0, True), (26.999, True), (27.0, False)])
def test_event_lag_delays_host_events_exactly(t: float, on_owner: bool) -> None:
    """kv_event_lag_ms 5: the store emitted at 22 becomes visible at exactly 27."""
    owner, _ = placed(t, lag=5.0)
    assert owner is on_owner


@pytest.mark.parametrize(("weight", "selected"), [(1.0, 8), (0.75, 6), (0.5, 5), (0.0, 1)])
def test_host_blocks_beyond_the_device_prefix_are_credited(weight: float, selected: int) -> None:
    """33-token prompt, 1 block left in G1 and 7 more in G2: the reported overlap is
    round-half-up(1 + weight x 7); the restore (7 blocks at 0.1 GB/s) admits it at 370 with
    G1 4 and host 28 whatever the weight."""
    prompt, other = list(range(100, 109)), list(range(200, 209))
    rows = [row(0, prompt, 33), row(100, other, 33), row(300, prompt, 33)]
    host = g2(num_host_blocks=16, h2d_bandwidth_gbps=0.1)
    result = run_agg(rows, rank(host, num_gpu_blocks=10, max_num_batched_tokens=64),
                     router="kv_router", router_config={"host_cache_hit_weight": weight})
    x = by_arrival(result.records)[2]
    decision = x.routing_history[0]
    assert (decision.selected_overlap_blocks, decision.best_available_overlap_blocks) == (
        selected, selected)
    assert decision.reported_overlap_tokens == selected * 4
    assert (x.first_admit_ms, x.first_admission_g1_reused_input_tokens,
            x.first_admission_host_reused_input_tokens) == (370.0, 4, 28)


def test_a_stale_host_entry_makes_admission_recompute() -> None:
    """The router scores A's 2 host blocks when A returns at 100 (reported overlap 2), but B's
    store, admitted first, evicts them from the 4-block pool: A recomputes, nothing fails."""
    rows = [row(0, [1, 2, 3]), row(50, [41, 42, 43]), row(100, [11, 12, 13]),
            row(100, [1, 2, 3], out=2)]
    result = run_agg(rows, rank(g2(num_host_blocks=4)), router="kv_router")
    a_again = by_arrival(result.records)[3]
    assert a_again.routing_history[0].selected_overlap_blocks == 2
    assert (a_again.first_admit_ms, a_again.reused_input_tokens,
            a_again.first_admission_host_reused_input_tokens) == (102.0, 0, 0)
    assert result.facts.committed_prefill_tokens == 36


def test_private_host_blocks_route_back_to_their_owner() -> None:
    """Two workers with private pools: the returning prompt goes to the worker whose pool holds
    its prefix (the other has no credit) and restores from it."""
    rows = [row(0, [1, 2, 3]), row(0, [5, 6, 7]), row(100, [11, 12, 13]),
            row(100, [15, 16, 17]), row(200, [1, 2, 3])]
    result = run_agg(rows, rank(g2()), workers=2, router="kv_router")
    records = by_arrival(result.records)
    owner = records[0].routing_history[0].logical_worker_id
    back = records[4]
    assert back.routing_history[0].logical_worker_id == owner
    assert back.first_admission_host_reused_input_tokens == 8


# -- the residency mirror --------------------------------------------------------------------------

def test_host_events_are_mirrored_per_scheduler() -> None:
    """Stored then Removed host events move the scheduler's host extension beyond its device
    prefix; another scheduler is unaffected."""
    index = KvIndex()
    index.apply(0, [(STORED, 10)])
    index.apply(1, [(STORED, 10), (STORED, 11)], HOST)
    device = index.overlaps([10, 11, 12], 2)
    assert device == [1, 0]
    assert index.host_extensions([10, 11, 12], device) == [0, 2]
    index.apply(1, [(REMOVED, 11)], HOST)
    assert index.host_extensions([10, 11, 12], device) == [0, 1]


def test_a_duplicated_host_store_fails_naming_the_event() -> None:
    """A second Stored of a block the scheduler already holds in G2: a replay error."""
    index = KvIndex()
    index.apply(3, [(STORED, 7)], HOST)
    with pytest.raises(KvEventError, match="host_pinned stored block 7 on scheduler 3"):
        index.apply(3, [(STORED, 7)], HOST)


def test_a_removal_of_a_block_never_stored_fails_naming_the_event() -> None:
    """A Removed of a host block the scheduler never stored: a replay error."""
    index = KvIndex()
    index.apply(0, [(STORED, 7)], HOST)
    with pytest.raises(KvEventError, match="host_pinned removed block 9 on scheduler 1"):
        index.apply(1, [(REMOVED, 9)], HOST)


def test_clearing_resets_both_tiers_of_a_scheduler() -> None:
    """After a Cleared, the scheduler holds nothing and a fresh Stored is accepted again."""
    index = KvIndex()
    index.apply(0, [(STORED, 1)])
    index.apply(0, [(STORED, 1)], HOST)
    index.clear(0)
    assert index.overlaps([1], 1) == [0]
    index.apply(0, [(STORED, 1)], HOST)
