"""G2 parity with the reference engine (ai-dynamo 1.6.1), skipped when it is not installed.

1. Hand-made scenarios (the ones tests/engine/test_engine_g2*.py pin) and random small ones:
   per-request times, reuse and its G1/host split, statuses, committed tokens, g2_domains equal.
2. The first 2,000 rows of the Mooncake conversation trace, 4 workers, 200 G1 blocks of 512
   tokens (small enough that G2 matters), fixed 20/5 ms: round robin with local and shared G2
   equal to the reference within the issue's bounds; kv_router inside the reference's spread.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from engine_support import mooncake_workload, native, record_dict
from g2_support import (
    EXAMPLE5,
    g2,
    pd_role,
    per_request_differences,
    rank,
    reference_agg,
    reference_pd,
    run_agg,
    run_pd,
    summary_differences,
)

from kvreplay.engine import run_native
from kvreplay.engine.report import report_from_run

pytestmark = pytest.mark.reference


@pytest.fixture(autouse=True)
def _reference() -> None:
    pytest.importorskip("dynamo.replay")


def row(t: float, hashes: list[int], length: int = 9, out: int = 1) -> dict[str, Any]:
    return {"timestamp": t, "hash_ids": hashes, "input_length": length, "output_length": out}


def router_config(**knobs: Any) -> Any:
    from dynamo._core import KvRouterConfig

    return KvRouterConfig(**knobs)


FENCE_ROWS = [row(0, [1, 2, 3]), row(10, [11, 12, 13], 12), row(2100, [1, 2, 3])]
CONTENTION = [row(0, [1, 2, 3]), row(0, [11, 12, 13]), row(50, [21, 22, 23]),
              row(50, [31, 32, 33])]
CAPPED = g2(scope="cluster_shared", shared_d2h_bandwidth_gbps=1.0, shared_h2d_bandwidth_gbps=1.0)
PROMPT, OTHER = list(range(100, 109)), list(range(200, 209))

AGGREGATED: dict[str, tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]] = {
    "example5": (EXAMPLE5, rank(g2()), {}),
    "example5-no-g2": (EXAMPLE5, rank(None), {}),
    "example5-first-byte": (EXAMPLE5, rank(g2(latency_to_first_byte_ms=5.0)), {}),
    "example5-slow-h2d": (EXAMPLE5, rank(g2(h2d_bandwidth_gbps=0.1)), {}),
    "example5-one-host-block": (EXAMPLE5, rank(g2(num_host_blocks=1)), {}),
    "example5-shared": (EXAMPLE5, rank(g2(scope="cluster_shared")), {}),
    "aligned-prompt": ([row(0, [1, 2], 8), row(100, [11, 12], 8), row(200, [1, 2], 8)],
                       rank(g2(), num_gpu_blocks=2), {}),
    "private-fence": (FENCE_ROWS, rank(g2(d2h_bandwidth_gbps=0.001)), {}),
    "shared-hold": (FENCE_ROWS, rank(g2(scope="cluster_shared", d2h_bandwidth_gbps=0.001,
                                        shared_d2h_bandwidth_gbps=0.0,
                                        shared_h2d_bandwidth_gbps=0.0)), {}),
    "contention-solo": ([*CONTENTION, row(100, [1, 2, 3])], rank(CAPPED), {"workers": 2}),
    "contention-pair": ([*CONTENTION, row(100, [1, 2, 3]), row(100, [1, 2, 3], out=2)],
                        rank(CAPPED), {"workers": 2}),
    "stale-entry": ([row(0, [1, 2, 3]), row(50, [41, 42, 43]), row(100, [11, 12, 13]),
                     row(100, [1, 2, 3], out=2)], rank(g2(num_host_blocks=4)),
                    {"router": "kv_router"}),
}


@pytest.mark.parametrize("name", sorted(AGGREGATED))
def test_aggregated_scenarios_match_the_reference(name: str, tmp_path: Path) -> None:
    """Per-request times, reuse split and status are equal, and so is every summary value
    (committed tokens, g2_domains, worker-seconds billed while the last stores settle...)."""
    rows, rank_args, kw = AGGREGATED[name]
    ours = run_agg(rows, rank_args, **kw)
    theirs = reference_agg(rows, rank_args, tmp_path / "trace.jsonl", **kw)
    assert per_request_differences(theirs, ours) == []
    assert summary_differences(theirs, ours) == []


@pytest.mark.parametrize("weight", [1.0, 0.75, 0.5, 0.0])
def test_host_credit_and_reported_overlap_match_the_reference(weight: float,
                                                              tmp_path: Path) -> None:
    """One worker (no placement ties): the routing report and the restore are equal."""
    rows = [row(0, PROMPT, 33), row(100, OTHER, 33), row(300, PROMPT, 33)]
    rank_args = rank(g2(num_host_blocks=16, h2d_bandwidth_gbps=0.1), num_gpu_blocks=10,
                     max_num_batched_tokens=64)
    ours = run_agg(rows, rank_args, router="kv_router",
                   router_config={"host_cache_hit_weight": weight})
    theirs = reference_agg(rows, rank_args, tmp_path / "trace.jsonl", router="kv_router",
                           router_config=router_config(host_cache_hit_weight=weight))
    assert per_request_differences(theirs, ours) == []
    ref_routes = [(p["routing_history"][0]["selected_overlap_blocks"],
                   p["routing_history"][0]["best_available_overlap_blocks"])
                  for p in sorted(theirs.per_request, key=lambda p: p["arrival_time_ms"])]
    our_routes = [(r.routing_history[0].selected_overlap_blocks,
                   r.routing_history[0].best_available_overlap_blocks) for r in ours.records]
    assert our_routes == ref_routes


@pytest.mark.parametrize(("lag", "t"), [(None, 21.999), (None, 22.0), (5.0, 26.999),
                                        (5.0, 27.0)])
def test_shared_visibility_and_event_lag_match_the_reference(lag: float | None, t: float,
                                                             tmp_path: Path) -> None:
    """Two workers in one shared pool: whether the returning prompt lands on the owner (the
    reference breaks the first placement's tie at random, so owner-ness is compared), and when
    it is admitted with how much host reuse."""
    rows = [row(0, [1, 2, 3]), row(t, [1, 2, 3])]
    rank_args = rank(g2(scope="cluster_shared", d2h_bandwidth_gbps=0.1))
    knobs: dict[str, Any] = {"overlap_score_credit": 0.5, "host_cache_hit_weight": 1.0}
    ours = run_agg(rows, rank_args, workers=2, router="kv_router",
                   router_config={**knobs, **({"kv_event_lag_ms": lag} if lag else {})})
    theirs = reference_agg(rows, rank_args, tmp_path / "trace.jsonl", workers=2,
                           router="kv_router", router_config=router_config(**knobs),
                           kv_event_lag_ms=lag)
    first, second = sorted(theirs.per_request, key=lambda p: p["arrival_time_ms"])
    ref_owner = (second["routing_history"][0]["logical_worker_id"]
                 == first["routing_history"][0]["logical_worker_id"])
    a, b = ours.records
    our_owner = b.routing_history[0].logical_worker_id == a.routing_history[0].logical_worker_id
    assert our_owner == ref_owner
    assert (b.first_admit_ms, b.first_admission_host_reused_input_tokens) == (
        second["first_admit_ms"], second["first_admission_host_reused_input_tokens"])


PD: dict[str, tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]] = {
    "both-shared": (EXAMPLE5, pd_role(g2(scope="cluster_shared")),
                    pd_role(g2(scope="cluster_shared"))),
    "both-private": (EXAMPLE5, pd_role(g2()), pd_role(g2())),
    "prefill-only": (EXAMPLE5, pd_role(g2()), pd_role(None)),
    "decode-only": (EXAMPLE5, pd_role(None), pd_role(g2())),
    "decode-waits-for-d2h": ([row(0, [1, 2, 3]), row(10, [11, 12, 13])], pd_role(None),
                             pd_role(g2(d2h_bandwidth_gbps=0.1))),
}


@pytest.mark.parametrize("name", sorted(PD))
def test_pd_scenarios_match_the_reference(name: str, tmp_path: Path) -> None:
    """1P1D with G2 on either role: lifecycle times, reuse split, every summary value."""
    rows, prefill, decode = PD[name]
    ours = run_pd(rows, prefill, decode)
    theirs = reference_pd(rows, prefill, decode, tmp_path / "trace.jsonl")
    assert per_request_differences(theirs, ours) == []
    assert summary_differences(theirs, ours) == []


# -- random small scenarios ------------------------------------------------------------------------

def random_scenario(seed: int) -> tuple[list[dict[str, Any]], dict[str, Any], int]:
    """Tiny G1, small G2, slow or instant copies, private or shared, 1 or 2 workers; prompts
    drawn from a few conversations whose prefixes grow (every request fits the G1 pool)."""
    rng = random.Random(seed)
    blocks = rng.choice([3, 4, 5, 6, 8, 12])
    scope = rng.choice(["dp_rank_local", "dp_rank_local", "cluster_shared"])
    host: dict[str, Any] = {
        "num_host_blocks": rng.choice([1, 2, 3, 4, 6, 8, 12]), "scope": scope,
        "d2h_bandwidth_gbps": rng.choice([0.0, 0.05, 0.1, 0.5, 1.0, 2.0]),
        "h2d_bandwidth_gbps": rng.choice([0.0, 0.05, 0.1, 0.5, 1.0, 2.0])}
    if rng.random() < 0.3:
        host["latency_to_first_byte_ms"] = rng.choice([0.5, 2.0])
    if scope == "cluster_shared":
        host["kv_layout_id"] = "L"
        host["shared_d2h_bandwidth_gbps"] = rng.choice([0.0, 0.5, 1.0, 4.0])
        host["shared_h2d_bandwidth_gbps"] = rng.choice([0.0, 0.5, 1.0, 4.0])
    rank_args = rank(host, num_gpu_blocks=blocks, max_num_seqs=rng.choice([1, 1, 2, 4]),
                     max_num_batched_tokens=rng.choice([8, 16, 16, 32]),
                     timing_model={"type": "fixed",
                                   "prefill_ms": rng.choice([1.0, 2.0, 2.0, 3.0]),
                                   "decode_ms": rng.choice([0.5, 1.0, 1.0])})
    conversations = [[rng.randrange(1000) for _ in range(6)] for _ in range(rng.randint(1, 4))]
    rows, t, seen = [], 0, set()
    for i in range(rng.choice([3, 4, 6, 8, 10])):
        t += rng.choice([0, 1, 3, 5, 10, 30, 100]) if i else 0
        n = rng.randint(1, max(1, min(5, blocks - 1)))
        length = rng.randint(max(1, (n - 1) * 4 + 1), n * 4)
        out = rng.choice([1, 1, 2, 3])
        while -(-(length + out) // 4) > blocks:
            out, length = 1, length - 1
        while (t, length, out) in seen:
            length = rng.randint(1, n * 4)
        seen.add((t, length, out))
        rows.append(row(t, rng.choice(conversations)[:n], length, out))
    return rows, rank_args, rng.choice([1, 1, 2])


@pytest.mark.parametrize("seed", range(48))
def test_random_round_robin_scenarios_match_the_reference(seed: int, tmp_path: Path) -> None:
    """Random G2 scenarios (round robin): every request's times and reuse, and every summary
    value, equal."""
    rows, rank_args, workers = random_scenario(seed)
    ours = run_agg(rows, rank_args, workers=workers)
    theirs = reference_agg(rows, rank_args, tmp_path / "trace.jsonl", workers=workers)
    assert per_request_differences(theirs, ours) == []
    assert summary_differences(theirs, ours) == []


@pytest.mark.parametrize("seed", range(100, 124))
def test_random_kv_router_scenarios_match_the_reference(seed: int, tmp_path: Path) -> None:
    """Random G2 scenarios through the KV router on one worker (no placement ties): requests
    and their reported overlaps equal."""
    rows, rank_args, _ = random_scenario(seed)
    ours = run_agg(rows, rank_args, router="kv_router")
    try:
        theirs = reference_agg(rows, rank_args, tmp_path / "trace.jsonl", router="kv_router")
    except Exception as exc:
        if "failed to apply replay KV event" not in str(exc):
            raise
        # Reference 1.6.1's own lower-tier index rejects a removal after a block was stored
        # again without its evicted parent (docs/engine.md); nothing to compare.
        pytest.skip("the reference aborts this replay on its own KV-event index")
    assert per_request_differences(theirs, ours) == []
    ref = sorted(theirs.per_request, key=lambda p: (p["arrival_time_ms"], p["input_length"],
                                                    p["requested_output_length"]))
    mine = sorted(ours.records, key=lambda r: (r.arrival_time_ms, r.input_length,
                                               r.requested_output_length))
    assert [p["routing_history"][0]["selected_overlap_blocks"] for p in ref] == [
        r.routing_history[0].selected_overlap_blocks for r in mine]


# -- the Mooncake conversation trace ---------------------------------------------------------------

ROWS = 2000
MOONCAKE_RANK = {"backend": "vllm", "block_size": 512, "num_gpu_blocks": 200,
                 "kv_cache_bytes_per_token": 131072,
                 "timing_model": {"type": "fixed", "prefill_ms": 20.0, "decode_ms": 5.0}}
HOST = {"dp_rank_local": {"num_host_blocks": 2000, "scope": "dp_rank_local",
                          "d2h_bandwidth_gbps": 32.0, "h2d_bandwidth_gbps": 32.0},
        "cluster_shared": {"num_host_blocks": 4000, "scope": "cluster_shared",
                           "kv_layout_id": "L", "d2h_bandwidth_gbps": 32.0,
                           "h2d_bandwidth_gbps": 32.0}}
# Reference runs of kv_router with local G2 (it breaks cost ties at random, unseeded): 36 runs
# on 2026-12-01/02 gave reuse 0.1309-0.1533 and mean TTFT 71.63-80.28 ms (30 of them 71.63-77.36).
KV_LOCAL_REUSE_SPREAD = (0.1309, 0.1533)
KV_LOCAL_TTFT_SPREAD = (71.63, 80.28)
COMPARED = ("mean_ttft_ms", "mean_tpot_ms", "duration_ms")


@pytest.fixture(scope="module")
def rows(conversation_2000: tuple[list[dict[str, Any]], Path]) -> list[dict[str, Any]]:
    return conversation_2000[0]


@pytest.fixture(scope="module")
def trace_file(conversation_2000: tuple[list[dict[str, Any]], Path]) -> Path:
    return conversation_2000[1]


def rank_with(scope: str) -> dict[str, Any]:
    return {**MOONCAKE_RANK, "native_host_offload": dict(HOST[scope])}


def ours(rows: list[dict[str, Any]], scope: str, router: str) -> tuple[dict[str, Any], Any]:
    result = run_native(native(rank_with(scope), workers=4, router=router),
                        workload=mooncake_workload(rows, 512))
    return report_from_run(result)["summary"], result


def theirs(trace_file: Path, scope: str, router: str) -> dict[str, Any]:
    from dynamo.replay import run_trace_replay

    report = run_trace_replay([str(trace_file)], extra_engine_args={"engine": rank_with(scope)},
                              num_workers=4, router_mode=router, trace_format="mooncake",
                              trace_block_size=512)
    return dict(report.summary)


@pytest.mark.parametrize("scope", ["dp_rank_local", "cluster_shared"])
def test_mooncake_round_robin_matches_the_reference(scope: str, rows: list[dict[str, Any]],
                                                    trace_file: Path) -> None:
    """Reuse within 0.005, mean TTFT / TPOT / duration within 2% (measured: equal to the last
    digit except reuse, 1e-5 lower: kvreplay caps a readmission's reuse at its input length),
    committed tokens and the shared pool's occupancy equal."""
    mine, _ = ours(rows, scope, "round_robin")
    ref = theirs(trace_file, scope, "round_robin")
    assert mine["prefix_cache_reused_ratio"] == pytest.approx(ref["prefix_cache_reused_ratio"],
                                                              abs=0.005)
    for key in COMPARED:
        assert mine[key] == pytest.approx(ref[key], rel=0.02), key
    assert mine["committed_prefill_tokens"] == ref["committed_prefill_tokens"]
    assert mine.get("g2_domains") == ref.get("g2_domains")


def test_mooncake_kv_router_local_is_inside_the_reference_spread(
        rows: list[dict[str, Any]], trace_file: Path) -> None:
    """kv_router + private G2: kvreplay's reuse within the reference's recorded spread widened
    by 0.01, its mean TTFT within it widened by 3%; a rerun is identical. The installed
    reference's own (random) run is only checked loosely (20% of TTFT, 0.03 of reuse around the
    spread): a run of an unseeded engine must never fail a landing at random."""
    first, result = ours(rows, "dp_rank_local", "kv_router")
    again, rerun = ours(rows, "dp_rank_local", "kv_router")
    assert first == again
    assert [record_dict(r) for r in result.records] == [record_dict(r) for r in rerun.records]
    (low, high), (fast, slow) = KV_LOCAL_REUSE_SPREAD, KV_LOCAL_TTFT_SPREAD
    assert low - 0.01 <= first["prefix_cache_reused_ratio"] <= high + 0.01
    assert fast * 0.97 <= first["mean_ttft_ms"] <= slow * 1.03
    ref = theirs(trace_file, "dp_rank_local", "kv_router")
    assert low - 0.03 <= ref["prefix_cache_reused_ratio"] <= high + 0.03
    assert fast * 0.8 <= ref["mean_ttft_ms"] <= slow * 1.2


def test_mooncake_kv_router_shared_runs_where_the_reference_aborts(
        rows: list[dict[str, Any]], trace_file: Path) -> None:
    """kv_router + one shared pool: reference 1.6.1 aborts this replay with its own router
    residency error (docs/engine.md); kvreplay completes it deterministically, with lower TTFT
    than round robin on the same pool."""
    first, _ = ours(rows, "cluster_shared", "kv_router")
    again, _ = ours(rows, "cluster_shared", "kv_router")
    assert first == again
    round_robin, _ = ours(rows, "cluster_shared", "round_robin")
    # 17 prompts outgrow the 200-block G1 and are rejected by either router.
    assert first["num_requests"] == ROWS
    assert first["completed_requests"] == round_robin["completed_requests"] == ROWS - 17
    assert first["first_admission_host_reused_ratio"] > 0
    assert first["mean_ttft_ms"] < round_robin["mean_ttft_ms"]
    with pytest.raises(Exception, match="failed to apply replay KV event"):
        theirs(trace_file, "cluster_shared", "kv_router")
