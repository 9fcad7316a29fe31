"""Agentic snapshots, warmup and the continuous profile (engine.md section 6).

The reference's Python API (dynamo 1.6.1) takes no snapshot, warmup or profile parameter, so
these pin the figures of the native engine's own qualification tests (the Dynamo AgentX G2
tests, on `tests/cases/agentic/host_restore/weka.jsonl`): one play of four 9-token turns at
0/100/200/300 ms, one vLLM rank with 3 G1 blocks of 4 tokens, one sequence, 16 batched
tokens, fixed 2/1 ms, 250 kB per token (a block is 1 MB), 8 host blocks.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from agentic_support import CASES_DIR, run_trace

from kvreplay.engine.agentic.snapshot import SnapshotContext
from kvreplay.engine.report import dumps_report, report_from_run
from kvreplay.engine.traces import WorkloadError
from kvreplay.engine.traces.agentic.weka import read_weka

TRACE = CASES_DIR / "host_restore" / "weka.jsonl"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SCOPES = (None, "dp_rank_local", "cluster_shared")


def rank(scope: str | None, d2h: float = 1.0, h2d: float = 1.0) -> dict[str, Any]:
    out: dict[str, Any] = {
        "backend": "vllm", "block_size": 4, "num_gpu_blocks": 3, "max_num_seqs": 1,
        "max_num_batched_tokens": 16, "kv_cache_bytes_per_token": 250000,
        "enable_prefix_caching": True,
        "timing_model": {"type": "fixed", "prefill_ms": 2.0, "decode_ms": 1.0}}
    if scope is not None:
        out["native_host_offload"] = {
            "scope": scope, "num_host_blocks": 8, "d2h_bandwidth_gbps": d2h,
            "h2d_bandwidth_gbps": h2d, "kv_layout_id": "dynamo-agentx-g2-fixture-v1"}
    return out


def run(scope: str | None, *, d2h: float = 1.0, h2d: float = 1.0, warmup: bool = False,
        profile: dict[str, float] | None = None, lifecycle: list[str] | None = None,
        lanes: int = 1, seed: int = 5) -> dict[str, Any]:
    params: dict[str, Any] = {
        "extra_engine_args": {"engine": rank(scope, d2h, h2d)}, "router_mode": "kv_router",
        "execution_model": "target-model", "weka_nested_timestamp_basis": "absolute",
        "agentic_lanes": lanes, "agentic_snapshot_seed": seed, "agentic_warmup": warmup}
    if profile is not None:
        params["agentic_profile"] = profile
    return run_trace(TRACE, lifecycle=lifecycle, **params)


def suffix(row: dict[str, Any]) -> str:
    return str(row["request_id"]).split(":request:")[1]


def test_snapshot_cut_is_the_seeded_draw() -> None:
    """Seed 5 cuts the play at 87.389 ms (BLAKE3 of the versioned key, the middle half of the
    recorded starts): turn 0 is history and primes its conversation; 1-3 run, their delays
    counted from the cut."""
    graph, found = read_weka(str(TRACE), str(TRACE), basis="absolute", expected_block_size=None)
    assert graph is not None and not found
    ctx = SnapshotContext(graph, lanes=1, seed=5)
    inst = ctx.prepare(0, 0)
    assert inst.t_star_ms == pytest.approx(87.3892856625359, abs=1e-9)
    assert [r.historical for r in inst.requests] == [True, False, False, False]
    assert [round(r.remaining_delay_ms, 6) for r in inst.requests] == [
        0.0, 12.610714, 112.610714, 212.610714]
    assert [graph.nodes[i].request_id.split(":request:")[1] for i in inst.primers] == ["outer:0"]
    assert inst.play_id.startswith(f"agentic-v1:{graph.digest()}:5:0:0")
    assert ctx.prepare(0, 0).t_star_ms == inst.t_star_ms
    assert ctx.unit(graph.plays[0].play_id, 0, 1) != ctx.unit(graph.plays[0].play_id, 0, 0)


def test_instances_never_share_tokens_or_uuids() -> None:
    """Recycled instances (other lane or ordinal) get disjoint token ranges and uuids."""
    graph, _ = read_weka(str(TRACE), str(TRACE), basis="absolute", expected_block_size=None)
    assert graph is not None
    ctx = SnapshotContext(graph, lanes=2, seed=5)
    seen_tokens: set[int] = set()
    seen_ordinals: set[int] = set()
    for lane, ordinal in ((0, 0), (1, 0), (0, 1), (1, 1)):
        inst = ctx.prepare(lane, ordinal, from_start=True)
        tokens = {t for r in inst.requests for t in ctx.tokens(inst, r.source)}
        ordinals = {ctx.record_ordinal(inst, r.source) for r in inst.requests}
        assert not tokens & seen_tokens and not ordinals & seen_ordinals
        seen_tokens |= tokens
        seen_ordinals |= ordinals
        assert not any(r.historical for r in inst.requests)


@pytest.mark.parametrize("scope", SCOPES)
def test_warmup_barrier_waits_for_g2_and_keeps_the_cache(scope: str | None) -> None:
    """(a) seed 5, warmup, d2h 0.01 GB/s: 1 primer + 10 warmups complete; the barrier waits
    for the primer's 2 MB store (ends at 2, copy done at 202) and prep is not measured: 3
    requests, committed 19 with G2 (27 cold or HBM-only), host reuse 8, rows in phase profile;
    the host timeline starts at the barrier."""
    cold = run(scope, d2h=0.01)
    warm = run(scope, d2h=0.01, warmup=True)
    assert cold["summary"]["agentic_snapshots"] == warm["summary"]["agentic_snapshots"]
    assert cold["summary"]["completed_requests"] == warm["summary"]["completed_requests"] == 3
    assert cold["summary"]["committed_prefill_tokens"] == 27
    phases = warm["summary"]["agentic_phases"]
    assert phases["phase"] == "profile" and phases["failure_reason"] is None
    (lane,) = phases["lanes"]
    assert (lane["primers_completed"], lane["warmup_completed"], lane["requests_quiescent"]) == (
        1, 10, 11)
    last_prep = max(r["quiescent_at_ms"] for r in phases["requests"])
    host = sum(r.get("first_admission_host_reused_input_tokens") or 0
               for r in warm["per_request"])
    if scope is None:
        assert phases["profile_start_ms"] == last_prep == 22.0
        assert (warm["summary"]["committed_prefill_tokens"], host) == (27, 0)
    else:
        assert phases["profile_start_ms"] == 202.0 > last_prep
        assert (warm["summary"]["committed_prefill_tokens"], host) == (19, 8)
        # The host timeline counts from the barrier too: the primer's store is no bin, but
        # its 2 blocks are the pool's occupancy from the first bin on.
        timeline, totals = warm["summary"]["g2_timeline"], warm["summary"]["g2_transfers"]
        assert [sum(timeline[k]) for k in ("d2h_blocks", "h2d_blocks")] == [
            totals["d2h_blocks"], totals["h2d_blocks"]] == [4, 2]
        assert timeline["pools"][0]["used_blocks"][0] == 2
    assert all(r["agentic_phase"] == "profile" for r in warm["per_request"])
    assert all("agentic_phase" not in r for r in cold["per_request"])
    assert all(r["arrival_time_ms"] >= 0 for r in warm["per_request"])
    assert [r["phase"] for r in phases["requests"]] == ["primer"] + ["warmup"] * 10
    assert all(r["uuid"].startswith("80000000-") for r in phases["requests"])


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("warmup", [False, True])
def test_profile_recycles_identities_and_stops_at_the_cutoff(scope: str | None,
                                                            warmup: bool) -> None:
    """(b) duration 0.7 s, grace 0: cutoff - start = 700, finished at the cutoff, more than one
    play, nothing in flight or unsettled, every row dispatched inside the window, one cache id
    per play and distinct across plays; recycled plays start cold (no reuse on turn 0)."""
    report = run(scope, warmup=warmup, profile={"duration_seconds": 0.7,
                                                 "response_grace_seconds": 0})
    profile = report["summary"]["agentic_profile"]
    start = profile["profile_start_ms"]
    assert profile["admission_closed"]
    assert profile["admission_cutoff_ms"] - start == 700.0
    assert profile["finished_at_ms"] == profile["admission_cutoff_ms"]
    assert profile["plays_started"] > 1
    assert profile["client_in_flight_requests"] == profile["unsettled_server_requests"] == 0
    assert not profile["cancel_drain_timed_out"]
    assert all(0 <= r["arrival_time_ms"] < 700 for r in report["per_request"])
    caches: dict[str, set[str]] = defaultdict(set)
    for row in report["per_request"]:
        caches[row["play_id"]].add(row["agentic"]["cache_id"])
    assert len(caches) > 1 and all(len(c) == 1 for c in caches.values())
    assert len({c for cs in caches.values() for c in cs}) == len(caches)
    firsts = [r for r in report["per_request"] if suffix(r) == "outer:0"]
    assert len(firsts) >= 1 and all(r["reused_input_tokens"] == 0 for r in firsts)
    if warmup:
        assert start == report["summary"]["agentic_phases"]["profile_start_ms"] > 0
    else:
        assert start == 0.0 and "agentic_phases" not in report["summary"]


@pytest.mark.parametrize("scope", ["dp_rank_local", "cluster_shared"])
def test_profile_cancels_a_pending_host_restore(scope: str) -> None:
    """(c) h2d 0.001 GB/s, duration 0.25 s, grace 0: the resumed turn waits on its restore
    past the deadline and is canceled there: dispatched, never admitted, no output; it had no
    committed pass, so it settles at once (nothing unsettled)."""
    transcript: list[str] = []
    report = run(scope, h2d=0.001, warmup=True, lifecycle=transcript,
                 profile={"duration_seconds": 0.25, "response_grace_seconds": 0})
    profile = report["summary"]["agentic_profile"]
    assert profile["canceled_requests"] == 1
    assert profile["client_in_flight_requests"] == profile["unsettled_server_requests"] == 0
    assert profile["finished_at_ms"] == profile["profile_start_ms"] + 250.0
    (canceled,) = [r for r in report["per_request"] if r["terminal_status"] == "canceled"]
    assert suffix(canceled) == "outer:2"
    assert canceled["dispatched_at_ms"] is not None and canceled["first_admit_ms"] is None
    assert canceled["output_length"] == 0 and canceled["terminal_time_ms"] == 250.0
    events = [json.loads(line) for line in transcript]
    assert [e["event"] for e in events[-3:]] == ["causal_terminal", "quiescent",
                                                 "play_quiescent"]
    assert events[-3]["status"] == "canceled"
    if scope == "cluster_shared":
        (domain,) = report["summary"]["g2_domains"]
        assert domain["used_blocks"] == domain["resident_blocks"]  # the restore let go


def test_grace_lets_a_busy_request_finish_or_cancels_it_unsettled() -> None:
    """A cutoff inside a running prefill (turn 1 runs 12.61 -> 14.61): grace 0 cancels it with
    its pass committed (unsettled, its play never settles, finished at the cutoff); a 10 ms
    grace lets it complete (finished at its response, observation = its 2 ms)."""
    strict = run(None, profile={"duration_seconds": 0.0135, "response_grace_seconds": 0})
    profile = strict["summary"]["agentic_profile"]
    assert (profile["canceled_requests"], profile["unsettled_server_requests"]) == (1, 1)
    assert profile["finished_at_ms"] == 13.5
    (row,) = strict["per_request"]
    assert row["terminal_status"] == "canceled" and row["first_admit_ms"] is not None
    assert strict["summary"]["agentic_play_outcomes"][0]["status"] == "incomplete"
    assert profile["cancel_drain_deadline_ms"] == profile["response_grace_deadline_ms"] + 10000
    graced = run(None, profile={"duration_seconds": 0.0135, "response_grace_seconds": 0.01})
    profile = graced["summary"]["agentic_profile"]
    assert (profile["canceled_requests"], profile["successful_responses"]) == (0, 1)
    assert profile["finished_at_ms"] == pytest.approx(14.610714)
    assert profile["observation_duration_ms"] == pytest.approx(2.0)
    assert profile["successful_request_throughput"] == pytest.approx(500.0)
    assert graced["summary"]["duration_ms"] == pytest.approx(2.0)
    assert profile["never_issued_requests"] == 2


def test_idle_caps_pull_pending_timers_forward() -> None:
    """A play idle for the tree cap (30 ms) gets its earliest timer moved to now, spacing kept,
    each shift recorded; everything still dispatches inside the window."""
    report = run(None, profile={"duration_seconds": 0.5, "response_grace_seconds": 0,
                                "tree_idle_cap_seconds": 0.03})
    profile = report["summary"]["agentic_profile"]
    shifts = profile["idle_shifts"]
    assert shifts and all(s["play_id"] is not None and s["shifted_by_ms"] > 0 for s in shifts)
    dispatched = {r["dispatched_at_ms"] for r in report["per_request"]}
    for shift in shifts:
        assert shift["at_ms"] in dispatched  # the earliest timer fired at the shift
        assert shift["timer_count"] >= 1
    plain = run(None, profile={"duration_seconds": 0.5, "response_grace_seconds": 0})
    assert plain["summary"]["agentic_profile"]["idle_shifts"] == []
    assert profile["issued_requests"] > plain["summary"]["agentic_profile"]["issued_requests"]


def test_profile_runs_are_byte_identical() -> None:
    """Reruns of a warm profile give the same report bytes and lifecycle."""
    runs = []
    for _ in range(2):
        transcript: list[str] = []
        report = run("cluster_shared", d2h=0.01, warmup=True, lifecycle=transcript,
                     profile={"duration_seconds": 1.0, "response_grace_seconds": 0.005})
        report["meta"].pop("wall_time_ms", None)
        runs.append((dumps_report(report), transcript))
    assert runs[0] == runs[1]


@pytest.mark.parametrize(("traffic", "needle"), [
    ({"agentic_snapshot_seed": 5, "agentic_lanes": None}, "needs `agentic_lanes`"),
    ({"agentic_warmup": True}, "needs an agentic snapshot"),
    ({"agentic_profile": {}}, "needs an agentic snapshot"),
    ({"agentic_snapshot_seed": 5, "agentic_profile": {"duration_seconds": 0}}, "> 0"),
    ({"agentic_snapshot_seed": 5, "agentic_profile": {"response_grace_seconds": -1}}, ">= 0"),
    ({"agentic_snapshot_seed": 5, "agentic_profile": {"duration": 5}}, "unknown"),
    ({"agentic_snapshot_seed": -1}, "agentic_snapshot_seed"),
])
def test_bad_load_controls_are_diagnosed(traffic: dict[str, Any], needle: str) -> None:
    """Each misconfigured agentic load control is a WORKLOAD-VALUE error naming the key."""
    params: dict[str, Any] = {
        "extra_engine_args": {"engine": rank(None)}, "weka_nested_timestamp_basis": "absolute",
        "agentic_lanes": 1, **traffic}
    with pytest.raises(WorkloadError) as caught:
        run_trace(TRACE, **params)
    messages = [d.message for d in caught.value.diagnostics if d.severity == "error"]
    assert any(needle in m for m in messages), messages
    assert all(d.rule == "WORKLOAD-VALUE" for d in caught.value.diagnostics
               if d.severity == "error")


def test_progress_counts_plays_and_requests() -> None:
    """A progress display with a `counts` attribute is told requests done and plays settled
    and started; the fraction follows the profile window (1.0 at its end)."""
    from agentic_support import document

    from kvreplay.engine import run_native
    from kvreplay.engine.traces import workload_from_traffic

    class Display:
        def __init__(self) -> None:
            self.counts: dict[str, int] = {}
            self.seen: list[tuple[float | None, dict[str, int]]] = []

        def __call__(self, sim_ms: float, fraction: float | None) -> None:
            self.seen.append((fraction, dict(self.counts)))

    doc = document({"extra_engine_args": {"engine": rank("dp_rank_local")},
                    "weka_nested_timestamp_basis": "absolute", "agentic_lanes": 2,
                    "agentic_snapshot_seed": 5,
                    "agentic_profile": {"duration_seconds": 0.7, "response_grace_seconds": 0}})
    workload = workload_from_traffic(doc["traffic"], base_dir=str(CASES_DIR),
                                     trace_paths=[str(TRACE)], model="m", block_size=4)
    display = Display()
    run_native(doc, workload=workload, progress=display)
    fraction, counts = display.seen[-1]
    assert fraction == 1.0
    assert counts["requests"] > 0 and counts["plays_started"] > 2
    assert 0 < counts["plays"] <= counts["plays_started"]


def test_an_aborted_warmup_measures_nothing(tmp_path: Path) -> None:
    """A primer the engine rejects (context shorter than its prompt) aborts the warmup: phase
    aborted with the reason, no measured request, no profile; `kvreplay run` writes the report
    and exits 1 saying so."""
    from kvreplay.cli.main import main

    rank_args = {**rank("dp_rank_local"), "max_model_len": 8}
    report = run_trace(TRACE, extra_engine_args={"engine": rank_args}, agentic_lanes=1,
                       weka_nested_timestamp_basis="absolute", agentic_snapshot_seed=5,
                       agentic_warmup=True)
    phases = report["summary"]["agentic_phases"]
    assert phases["phase"] == "aborted" and phases["profile_start_ms"] is None
    assert phases["failure_reason"] == "preparation request ended with Rejected"
    assert phases["failure_request_id"] == phases["requests"][0]["uuid"]
    assert report["per_request"] == [] and report["summary"]["num_requests"] == 0
    out = tmp_path / "report.json"
    code = main(["run", str(EXAMPLES / "agentx-g2-warm-profile.yaml"), "-q", "-o", str(out),
                 "--set", "engine.context_length=8"])
    assert code == 1 and out.exists()


def _held_by_the_driver(duration_s: float) -> tuple[int, int]:
    """(bytes the agentic driver and its lifecycle hold at the end of a profile with huge idle
    caps, plays started): traced when the run asks for the report's figures."""
    import tracemalloc

    from agentic_support import document

    from kvreplay.engine import run_native
    from kvreplay.engine.traces import workload_from_traffic

    doc = document({"extra_engine_args": {"engine": rank("dp_rank_local")},
                    "weka_nested_timestamp_basis": "absolute", "agentic_lanes": 2,
                    "agentic_snapshot_seed": 5,
                    "agentic_profile": {"duration_seconds": duration_s,
                                        "response_grace_seconds": 0,
                                        "tree_idle_cap_seconds": 1e9,
                                        "global_idle_cap_seconds": 1e9}})
    workload = workload_from_traffic(doc["traffic"], base_dir=str(CASES_DIR),
                                     trace_paths=[str(TRACE)], model="m", block_size=4)
    held: list[int] = []
    summary_extra = workload.summary_extra

    def measured() -> dict[str, Any] | None:
        snapshot = tracemalloc.take_snapshot().filter_traces([
            tracemalloc.Filter(True, "*/agentic/driver.py"),
            tracemalloc.Filter(True, "*/agentic/lifecycle.py")])
        held.append(sum(stat.size for stat in snapshot.statistics("filename")))
        return summary_extra()

    workload.summary_extra = measured  # type: ignore[method-assign]
    tracemalloc.start()
    try:
        result = run_native(doc, workload=workload)
    finally:
        tracemalloc.stop()
    summary = report_from_run(result)["summary"]
    plays = summary["agentic_profile"]["plays_started"]
    assert len(summary["agentic_play_outcomes"]) == plays
    return held[0], plays


def test_a_long_profile_holds_only_its_plays_in_flight() -> None:
    """Issue 30 item 11: an agentic profile with a huge duration and idle cap. A settled play
    keeps only its outcome (its nodes, identities, edges and quoted id are let go), so four times
    the duration costs the driver at most 512 bytes per extra play (it was about 2 kB, growing
    with the simulated time); the report still lists every play's outcome."""
    short, short_plays = _held_by_the_driver(5.0)
    long, long_plays = _held_by_the_driver(20.0)
    assert long_plays > 4 * short_plays - 8 and long_plays > 100
    assert (long - short) / (long_plays - short_plays) < 512
