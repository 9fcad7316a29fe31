"""G2 host offload in the engine (engine.md sections 3, 4 and 9 example 5), exact numbers.

Every expected number here was also produced by the reference engine (ai-dynamo 1.6.1) on the
same rows; tests/engine/test_engine_g2_reference.py re-checks them against it when installed.
"""

from __future__ import annotations

from typing import Any

import pytest
from engine_support import record_dict
from g2_support import EXAMPLE5, by_arrival, g2, pd_role, rank, run_agg, run_pd

from kvreplay.engine import EngineConfigError, run_native
from kvreplay.engine.report import report_from_run


def resumed(rows: list[dict[str, Any]], host: dict[str, Any] | None, **kw: Any) -> Any:
    """The request arriving at 200 ms (example 5's resumed turn)."""
    result = run_agg(rows, rank(host), **kw)
    return next(r for r in result.records if r.arrival_time_ms == 200.0), result


def row(t: float, hashes: list[int], out: int = 1, length: int = 9) -> dict[str, Any]:
    return {"timestamp": t, "hash_ids": hashes, "input_length": length, "output_length": out}


def test_example_5_restores_eight_host_tokens() -> None:
    """The resumed prompt loads 2 blocks (2 MB at 1 GB/s) from 200 to 202, is admitted at 202,
    computes its last token in 2 ms: TTFT 4, host 8, G1 0; committed prefill 19 of 27."""
    r, result = resumed(EXAMPLE5, g2())
    assert (r.first_admit_ms, r.first_token_ms - r.arrival_time_ms) == (202.0, 4.0)
    assert (r.reused_input_tokens, r.first_admission_g1_reused_input_tokens,
            r.first_admission_host_reused_input_tokens) == (8, 0, 8)
    assert result.facts.committed_prefill_tokens == 19
    others = [x for x in result.records if x is not r]
    assert all(x.first_token_ms - x.arrival_time_ms == 2.0 for x in others)
    assert all((x.reused_input_tokens, x.first_admission_host_reused_input_tokens) == (0, 0)
               for x in others)
    assert result.facts.g2_domains is None  # a private pool is not reported as a domain


def test_example_5_without_g2_reuses_nothing() -> None:
    """Without a host tier: no reuse, 27 committed tokens, and no g1/host split at all."""
    r, result = resumed(EXAMPLE5, None)
    assert (r.first_admit_ms, r.reused_input_tokens) == (200.0, 0)
    assert r.first_admission_host_reused_input_tokens is None
    assert result.facts.committed_prefill_tokens == 27


@pytest.mark.parametrize(("overrides", "admitted"), [
    ({"latency_to_first_byte_ms": 5.0}, 207.0),   # the copy starts 5 ms after the pass start
    ({"h2d_bandwidth_gbps": 0.1}, 220.0),          # 2 MB at 0.1 GB/s take 20 ms
    ({"h2d_bandwidth_gbps": 0.0}, 200.0),          # 0 = unlimited: loaded at once
])
def test_restore_timing(overrides: dict[str, Any], admitted: float) -> None:
    """First-byte latency and H2D bandwidth set when the restored request is admitted."""
    r, _ = resumed(EXAMPLE5, g2(**overrides))
    assert r.first_admit_ms == admitted
    assert r.first_token_ms == admitted + 2.0
    assert r.first_admission_host_reused_input_tokens == 8


def test_one_host_block_gives_no_host_reuse() -> None:
    """A two-block store cohort never fits a one-block pool (cohorts are atomic)."""
    r, result = resumed(EXAMPLE5, g2(num_host_blocks=1))
    assert (r.first_admission_host_reused_input_tokens, r.reused_input_tokens) == (0, 0)
    assert result.facts.committed_prefill_tokens == 27
    assert result.facts.host_transfers is not None
    assert result.facts.host_transfers["d2h_blocks"] == 0
    assert result.facts.host_transfers["store_cohorts_retried"] > 0


def test_shared_pool_reports_one_domain() -> None:
    """cluster_shared: the same reuse, and g2_domains = [{capacity 8, resident 4, used 4}]."""
    r, result = resumed(EXAMPLE5, g2(scope="cluster_shared"))
    assert (r.first_admit_ms, r.first_admission_host_reused_input_tokens) == (202.0, 8)
    assert result.facts.g2_domains == [
        {"capacity_blocks": 8, "resident_blocks": 4, "used_blocks": 4}]


def test_scope_switch_with_one_consumer_reproduces_the_private_result() -> None:
    """A shared pool with a single participant and no competing copies gives the private
    pool's records exactly (pool caps at the link rate)."""
    private = run_agg(EXAMPLE5, rank(g2()))
    shared = run_agg(EXAMPLE5, rank(g2(scope="cluster_shared", shared_d2h_bandwidth_gbps=1.0,
                                       shared_h2d_bandwidth_gbps=1.0)))
    assert [record_dict(r) for r in private.records] == [record_dict(r) for r in shared.records]


def test_block_aligned_prompt_loads_its_last_block_but_recomputes_its_last_token() -> None:
    """An 8-token prompt restores both blocks (2 ms) yet reuses 4 tokens: the final prompt token
    is always recomputed (a 2-block G1, so the second prompt evicts the whole first one)."""
    rows = [row(0, [1, 2], length=8), row(100, [11, 12], length=8), row(200, [1, 2], length=8)]
    result = run_agg(rows, rank(g2(), num_gpu_blocks=2))
    r = by_arrival(result.records)[2]
    assert r.first_admit_ms == 202.0
    assert (r.reused_input_tokens, r.first_admission_g1_reused_input_tokens,
            r.first_admission_host_reused_input_tokens) == (4, 0, 4)


# -- shared-pool contention (equal shares) ---------------------------------------------------------

CONTENTION = [row(0, [1, 2, 3]), row(0, [11, 12, 13]), row(50, [21, 22, 23]),
              row(50, [31, 32, 33])]
CAPPED = g2(scope="cluster_shared", shared_d2h_bandwidth_gbps=1.0, shared_h2d_bandwidth_gbps=1.0)


def test_two_concurrent_restores_each_take_twice_the_solo_time() -> None:
    """Two workers restore the same prefix at once from a pool capped at 1 GB/s: each copy gets
    half, so both wait 4 ms where one alone waits 2 ms; the pool is the same either way."""
    solo = run_agg([*CONTENTION, row(100, [1, 2, 3])], rank(CAPPED), workers=2)
    pair = run_agg([*CONTENTION, row(100, [1, 2, 3]), row(100, [1, 2, 3], out=2)],
                   rank(CAPPED), workers=2)
    (alone,) = [r for r in solo.records if r.arrival_time_ms == 100.0]
    both = [r for r in pair.records if r.arrival_time_ms == 100.0]
    assert alone.first_admit_ms - 100.0 == 2.0
    assert [r.first_admit_ms - 100.0 for r in both] == [4.0, 4.0]
    assert [r.first_admission_host_reused_input_tokens for r in both] == [8, 8]
    assert solo.facts.g2_domains == pair.facts.g2_domains == [
        {"capacity_blocks": 8, "resident_blocks": 8, "used_blocks": 8}]


# -- fences ----------------------------------------------------------------------------------------

def test_private_fence_delays_compute_until_the_copy_completes() -> None:
    """d2h 0.001 GB/s: A's 2-block store runs 2 -> 2002. B (at 10) takes A's G1 capacity: it is
    admitted at 10, but its pass computes only after the copy, first token at 2004."""
    rows = [row(0, [1, 2, 3]), row(10, [11, 12, 13], length=12), row(2100, [1, 2, 3])]
    result = run_agg(rows, rank(g2(d2h_bandwidth_gbps=0.001)))
    _, b, c = by_arrival(result.records)
    assert (b.first_admit_ms, b.first_token_ms) == (10.0, 2004.0)
    assert (c.first_admit_ms, c.first_admission_host_reused_input_tokens) == (2102.0, 8)


def test_shared_hold_keeps_copied_blocks_in_use() -> None:
    """In a shared pool the copied G1 blocks stay in use until the copy completes: B waits in
    the queue until 2002 instead of computing late."""
    rows = [row(0, [1, 2, 3]), row(10, [11, 12, 13], length=12), row(2100, [1, 2, 3])]
    result = run_agg(rows, rank(g2(scope="cluster_shared", d2h_bandwidth_gbps=0.001,
                                   shared_d2h_bandwidth_gbps=0.0,
                                   shared_h2d_bandwidth_gbps=0.0)))
    _, b, c = by_arrival(result.records)
    assert (b.first_admit_ms, b.first_token_ms) == (2002.0, 2004.0)
    assert (c.first_admit_ms, c.first_token_ms) == (5006.0, 5008.0)


# -- P/D -------------------------------------------------------------------------------------------

def test_pd_shared_pool_counts_capacity_and_reuse_once() -> None:
    """1P1D in one 8-block pool: g2_domains capacity 8 (not 16); the prefill restores 8 tokens
    (admitted 202), the decode admission reuses nothing, and the request reports host 8 once."""
    shared = g2(scope="cluster_shared")
    result = run_pd(EXAMPLE5, pd_role(shared), pd_role(shared))
    assert result.facts.g2_domains == [
        {"capacity_blocks": 8, "resident_blocks": 4, "used_blocks": 4}]
    r = by_arrival(result.records)[2]
    assert (r.prefill_admit_ms, r.source_held_ms, r.destination_activated_ms,
            r.first_token_ms) == (202.0, 204.0, 206.25, 207.25)
    assert [(a.pool, a.reused_input_tokens, a.host_reused_input_tokens)
            for a in r.admission_history] == [("prefill", 8, 8), ("decode", 0, 0)]
    assert (r.reused_input_tokens, r.first_admission_host_reused_input_tokens) == (8, 8)
    assert result.facts.committed_prefill_tokens == 19


def test_pd_scopes_are_chosen_per_role() -> None:
    """Prefill-only G2 gives the same reuse (decode admissions carry no split); decode-only G2
    restores nothing (decode never restores) and the request has no first-admission split."""
    prefill_only = run_pd(EXAMPLE5, pd_role(g2()), pd_role(None))
    r = by_arrival(prefill_only.records)[2]
    assert r.first_admission_host_reused_input_tokens == 8
    assert r.admission_history[1].host_reused_input_tokens is None
    decode_only = run_pd(EXAMPLE5, pd_role(None), pd_role(g2()))
    r = by_arrival(decode_only.records)[2]
    assert (r.reused_input_tokens, r.first_admission_host_reused_input_tokens) == (0, None)
    assert r.admission_history[1].host_reused_input_tokens == 0
    assert decode_only.facts.committed_prefill_tokens == 27


def test_decode_never_receives_handoff_kv_into_blocks_being_copied() -> None:
    """The decode rank's private D2H of A's prompt (0.1 GB/s) runs 5.25 -> 25.25; B's destination
    needs that capacity, so its reservation waits for the copy: reserved 25.25, first token
    28.5 (12 and 15.25 without a decode host tier)."""
    rows = [row(0, [1, 2, 3]), row(10, [11, 12, 13])]
    result = run_pd(rows, pd_role(None), pd_role(g2(d2h_bandwidth_gbps=0.1)))
    b = by_arrival(result.records)[1]
    assert (b.destination_reserved_ms, b.destination_activated_ms, b.first_token_ms) == (
        25.25, 27.5, 28.5)
    plain = by_arrival(run_pd(rows, pd_role(None), pd_role(None)).records)[1]
    assert (plain.destination_reserved_ms, plain.first_token_ms) == (12.0, 15.25)


# -- report ----------------------------------------------------------------------------------------

def test_report_carries_the_g2_figures() -> None:
    """Summary: g2_domains (shared only) and host-transfer totals; rows: the first-admission
    split, and the g1/host split on the first admission into a pool with G2."""
    report = report_from_run(run_agg(EXAMPLE5, rank(g2(scope="cluster_shared"))))
    summary = report["summary"]
    assert summary["g2_domains"] == [
        {"capacity_blocks": 8, "resident_blocks": 4, "used_blocks": 4}]
    transfers = summary["g2_transfers"]
    assert (transfers["d2h_blocks"], transfers["h2d_blocks"]) == (4, 2)
    assert (transfers["d2h_bytes"], transfers["h2d_bytes"]) == (4_000_000, 2_000_000)
    assert summary["first_admission_host_reused_ratio"] == pytest.approx(8 / 27)
    resumed_row = next(p for p in report["per_request"] if p["arrival_time_ms"] == 200.0)
    assert resumed_row["first_admission_host_reused_input_tokens"] == 8
    assert resumed_row["admission_history"][0]["host_reused_input_tokens"] == 8
    private = report_from_run(run_agg(EXAMPLE5, rank(g2())))["summary"]
    assert "g2_domains" not in private and private["g2_transfers"]["scopes"] == [
        "dp_rank_local"]
    plain = report_from_run(run_agg(EXAMPLE5, rank(None)))
    assert "g2_transfers" not in plain["summary"]
    assert "first_admission_host_reused_input_tokens" not in plain["per_request"][0]


# -- configuration errors --------------------------------------------------------------------------

def test_mismatched_shared_participants_are_refused_by_name() -> None:
    """Shared-pool participants must agree on the pool contract (here the capacity)."""
    from engine_support import native_pd

    doc = native_pd(pd_role(g2(scope="cluster_shared")),
                    pd_role(g2(scope="cluster_shared", num_host_blocks=16)))
    with pytest.raises(EngineConfigError, match=r"cluster_shared host_offload participants are "
                                                 r"incompatible.*num_host_blocks=16"):
        run_native(doc, workload=None)  # type: ignore[arg-type]


@pytest.mark.parametrize(("host", "rank_overrides", "message"), [
    (g2(scope="cluster_shared", kv_layout_id=""), {}, "nonempty kv_layout_id"),
    (g2(), {"kv_cache_bytes_per_token": None}, "kv_cache_bytes_per_token"),
    (g2(), {"enable_prefix_caching": False}, "enable_prefix_caching"),
    (g2(scope="worker_local"), {}, "unknown host_offload.scope"),
    (g2(num_host_blocks=0), {}, "num_host_blocks"),
])
def test_bad_host_offload_values_are_refused(host: dict[str, Any],
                                             rank_overrides: dict[str, Any],
                                             message: str) -> None:
    """Each malformed native_host_offload gets a named EngineConfigError, never a crash."""
    with pytest.raises(EngineConfigError, match=message):
        run_agg(EXAMPLE5, rank(host, **rank_overrides))
