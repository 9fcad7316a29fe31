"""The scaling hook (engine.md, Scaling): ticks, targets, the workers' lifecycle, the report.

Every expected value below was read off the reference (ai-dynamo 1.6.1,
`run_mocker_trace_replay(..., scaling_policy=...)`) on the same scenario: block 4, 32 blocks,
max 2 sequences, budget 16, fixed timing prefill 2 ms / decode 1 ms, 16-token prompts and 4
output tokens unless a test says otherwise.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from engine_support import ListWorkload, native, native_pd, rank, request

from kvreplay.engine import ScalingPolicyError, run_native
from kvreplay.engine.report import report_from_run
from kvreplay.engine.result import RunResult

RANK = rank(num_gpu_blocks=32, max_num_seqs=2, max_num_batched_tokens=16,
            timing_model={"type": "fixed", "prefill_ms": 2.0, "decode_ms": 1.0})


class Plan:
    """A policy playing fixed decisions: (target_prefill, target_decode, next tick)."""

    def __init__(self, first: float, steps: list[tuple[int | None, int | None, float | None]]):
        self.first = first
        self.steps = list(steps)
        self.snapshots: list[dict[str, Any]] = []

    def initial_tick_ms(self) -> float:
        return self.first

    def on_tick(self, snapshot: dict[str, Any]) -> dict[str, Any]:
        self.snapshots.append(snapshot)
        prefill, decode, nxt = self.steps[len(self.snapshots) - 1]
        return {"target_prefill": prefill, "target_decode": decode, "next_tick_ms": nxt}


def requests(times: list[float], out: int = 4) -> ListWorkload:
    return ListWorkload([request(i, t, 16, out, [1000 * i + j for j in range(4)])
                         for i, t in enumerate(times)])


def run(times: list[float], policy: Any, *, startup: float = 0.0, workers: int = 1,
        dp_size: int = 1, out: int = 4, stepwise: bool = False) -> RunResult:
    doc = native(RANK, workers=workers, dp_size=dp_size)
    doc["spec"]["engine"]["startup_seconds"] = startup
    return run_native(doc, workload=requests(times, out), scaling_policy=policy,
                      stepwise=stepwise)


def placements(result: RunResult) -> list[int]:
    return [r.routing_history[-1].scheduler_id for r in result.records]


def operations(result: RunResult) -> list[tuple[Any, ...]]:
    assert result.facts.scaling is not None
    return [(op["at_ms"], op["cause"], [(t["worker_id"], t["transition"])
                                        for t in op["transitions"]])
            for op in result.facts.scaling["lifecycle_operations"]]


TIMES = [0, 0, 1, 2, 5, 10, 20, 30, 31, 32, 40, 60]
STEPS: list[tuple[int | None, int | None, float | None]] = [
    (None, 3, 10.0), (None, None, 17.0), (None, 1, 24.0), (None, 2, 31.0), (None, None, 38.0),
    (None, None, 45.0), (None, None, 52.0), (None, None, 59.0), (None, None, None)]


def test_round_robin_follows_the_active_workers() -> None:
    """Workers 1 and 2 start at 3 ms and are ready at 8; drained idle at 17 they are removed at
    once; worker 3 (ids are never reused) starts at 24, ready at 29. Round robin keeps one cursor
    into the current list of active workers: 10 ms -> worker 1, then 0, 3, 0, 3, 0, 3."""
    result = run(TIMES, Plan(3.0, STEPS), startup=0.005)
    assert placements(result) == [0, 0, 0, 0, 0, 1, 0, 3, 0, 3, 0, 3]
    assert operations(result) == [
        (3.0, "planner_scale", [(1, "worker_starting"), (2, "worker_starting")]),
        (8.0, "worker_ready_event", [(1, "worker_ready")]),
        (8.0, "worker_ready_event", [(2, "worker_ready")]),
        (17.0, "planner_scale", [(2, "worker_draining"), (1, "worker_draining"),
                                 (1, "worker_removed"), (2, "worker_removed")]),
        (24.0, "planner_scale", [(3, "worker_starting")]),
        (29.0, "worker_ready_event", [(3, "worker_ready")]),
    ]


def test_billing_runs_from_each_start_request_to_its_removal() -> None:
    """Worker 0 for the whole 65 ms, workers 1 and 2 from 3 to 17, worker 3 from 24 to the end:
    134 ms of provisioned worker time (not replicas x duration)."""
    result = run(TIMES, Plan(3.0, STEPS), startup=0.005)
    report = report_from_run(result)
    assert report["summary"]["duration_ms"] == 65.0
    assert report["summary"]["decode_worker_seconds"] == pytest.approx(0.134)
    assert report["summary"]["gpu_hours"] == pytest.approx(0.134 / 3600)
    replicas = report["summary"]["scaling"]["replicas"]["agg"]
    assert replicas[0] == [0.0, 1, 0, 0] and replicas[1] == [3.0, 1, 2, 0]


def test_snapshot_counts_forward_pass_metrics_and_traffic() -> None:
    """Tick 0 (3 ms) sees the pass that ended at 2 ms: one 16-token prefill, one request
    waiting; four requests offered. Tick 1 (10 ms) sees workers 0-2 active."""
    policy = Plan(3.0, STEPS)
    run(TIMES, policy, startup=0.005)
    first, second = policy.snapshots[:2]
    assert first["tick_ordinal"] == 0 and first["now_ms"] == 3.0
    assert first["active_decode_ids"] == [0] and first["non_draining_decode_count"] == 1
    (fpm,) = first["decode_fpm_snapshots"]
    assert (fpm["num_prefill_requests"], fpm["sum_prefill_tokens"], fpm["num_queued_prefill"],
            fpm["sum_queued_prefill_tokens"], fpm["wall_time"]) == (1, 16, 1, 16, 0.002)
    assert first["traffic"]["num_req"] == 4 and first["traffic"]["duration_s"] == 0.003
    assert second["active_decode_ids"] == [0, 1, 2]
    (fpm,) = second["decode_fpm_snapshots"]
    assert (fpm["num_decode_requests"], fpm["sum_decode_kv_tokens"],
            fpm["num_queued_prefill"]) == (2, 36, 3)
    traffic = second["traffic"]
    assert (traffic["num_req"], traffic["shape_count"], traffic["avg_ttft_ms"],
            traffic["accept_length_forward_count"]) == (2, 1, 2.0, 4)


def test_a_draining_worker_finishes_its_requests_then_stops() -> None:
    """Drained at 4 ms holding two requests, worker 1 takes no new one and is removed at 29 ms,
    when its last request ends; the new workers (2, 3) cancel nothing of it."""
    steps: list[tuple[int | None, int | None, float | None]] = [
        (None, 2, 4.0), (None, 1, 30.0), (None, 3, 40.0), (None, 1, None)]
    result = run([0, 2, 2.5, 3, 5, 6, 7, 8], Plan(1.0, steps), startup=0.001, out=20)
    assert placements(result) == [0, 1, 0, 1, 0, 0, 0, 0]
    ops = operations(result)
    assert ops[2] == (4.0, "planner_scale", [(1, "worker_draining")])
    assert ops[3] == (29.0, "drain_settlement", [(1, "worker_removed")])
    assert result.facts.scaling is not None
    assert result.facts.scaling["worker_seconds"]["agg"] == pytest.approx(0.134)


def test_scale_down_cancels_the_newest_starting_workers_first() -> None:
    """From 1 active + 3 starting to 2: workers 3 and 2 are cancelled (startup_cancelled, their
    start operation as origin); a later scale-up takes id 4."""
    steps: list[tuple[int | None, int | None, float | None]] = [
        (None, 4, 2.0), (None, 2, 20.0), (None, 3, None)]
    result = run([0, 2, 3, 25, 26], Plan(1.0, steps), startup=0.005)
    assert result.facts.scaling is not None
    cancel = result.facts.scaling["lifecycle_operations"][1]
    assert cancel["origin_operation_ordinal"] == 0
    assert [(t["worker_id"], t["prior_state"], t.get("reason"), t["origin_operation_ordinal"])
            for t in cancel["transitions"]] == [(3, "starting", "startup_cancelled", 0),
                                                (2, "starting", "startup_cancelled", 0)]
    assert operations(result)[3] == (20.0, "planner_scale", [(4, "worker_starting")])
    assert placements(result) == [0, 0, 0, 1, 4]
    assert result.facts.scaling["worker_seconds"]["agg"] == pytest.approx(0.074)


def test_attention_dp_workers_keep_their_own_rank_cursor() -> None:
    """DP 2: round robin picks a worker from the active list and that worker's next rank
    (scheduler ids worker x 2 + rank): 0, 2, 1, 3, 0, 2; after the drain at 10 ms, 1, 0, 1."""
    steps: list[tuple[int | None, int | None, float | None]] = [(None, 2, 10.0), (None, 1, None)]
    result = run([0, 2, 3, 4, 5, 6, 11, 12, 13], Plan(1.0, steps), dp_size=2)
    assert placements(result) == [0, 2, 1, 3, 0, 2, 1, 0, 1]


def test_ticks_stop_when_the_workload_is_done() -> None:
    """A tick due after the last request ended is never run, and bills nothing: 11 ms of worker
    0 and 10 of worker 1."""
    steps: list[tuple[int | None, int | None, float | None]] = [(None, 2, 100.0), (None, 1, None)]
    policy = Plan(1.0, steps)
    result = run([0, 2], policy, startup=0.005)
    assert len(policy.snapshots) == 1
    assert result.facts.scaling is not None
    assert result.facts.scaling["worker_seconds"]["agg"] == pytest.approx(0.021)


def test_fast_forward_gives_the_step_by_step_records() -> None:
    """Decode stretches stop at the next tick: records and snapshots equal step by step."""
    steps: list[tuple[int | None, int | None, float | None]] = [
        (None, 2, 9.5), (None, 1, 33.0), (None, 3, None)]
    a, b = Plan(2.5, steps), Plan(2.5, steps)
    fast = run([0, 1, 2, 15, 16, 40], a, out=30)
    slow = run([0, 1, 2, 15, 16, 40], b, out=30, stepwise=True)
    assert fast.facts.fast_forwarded_passes > 0
    assert [r.last_token_ms for r in fast.records] == [r.last_token_ms for r in slow.records]
    assert a.snapshots == b.snapshots


def test_pd_tick_comes_before_the_instant_placements() -> None:
    """P/D: a tick scaling prefill to 2 at 5 ms sees the arrivals at 5 offered but routes them
    after the change (prefill worker 1, then 0); at time 0 the arrivals are placed first."""
    doc = native_pd(RANK, RANK)
    policy = Plan(5.0, [(2, None, None)])
    result = run_native(doc, workload=requests([0, 5, 5]), scaling_policy=policy)
    assert [r.routing_history[0].scheduler_id for r in result.records] == [0, 1, 0]
    assert policy.snapshots[0]["traffic"]["num_req"] == 3
    policy = Plan(0.0, [(2, None, None)])
    result = run_native(doc, workload=requests([0, 0]), scaling_policy=policy)
    assert [r.routing_history[0].scheduler_id for r in result.records] == [0, 0]


class Bad:
    def __init__(self, answer: Any, first: Any = 1.0) -> None:
        self.answer = answer
        self.first = first

    def initial_tick_ms(self) -> Any:
        return self.first

    def on_tick(self, snapshot: dict[str, Any]) -> Any:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def decision(prefill: Any = None, decode: Any = None, nxt: Any = None) -> dict[str, Any]:
    return {"target_prefill": prefill, "target_decode": decode, "next_tick_ms": nxt}


@pytest.mark.parametrize(("policy", "message"), [
    (Bad(decision(decode=-1)), "tick 0 at 1 ms: target_decode -1 is not a replica count"),
    (Bad(decision(decode=2.0)), "target_decode 2.0 is not a replica count"),
    (Bad(decision(decode=True)), "target_decode True is not a replica count"),
    (Bad(decision(nxt=math.nan)), "tick 0 at 1 ms: next_tick_ms nan is not a time"),
    (Bad(decision(nxt=0.5)), "next_tick_ms 0.5 is not after the tick's own time (1.0 ms)"),
    (Bad({"target_decode": 2}), "lacks target_prefill, next_tick_ms"),
    (Bad([1, 2]), "on_tick returned list [1, 2]"),
    (Bad(ValueError("boom")), "tick 0 at 1 ms: on_tick raised ValueError: boom"),
    (Bad(decision(), first=-1.0), "initial_tick_ms() returned -1.0"),
    (Bad(decision(), first=math.nan), "initial_tick_ms() returned nan"),
])
def test_nonsense_from_the_policy_names_the_tick_and_the_value(policy: Bad,
                                                               message: str) -> None:
    """A bad answer (or an exception in the policy) stops the run with ScalingPolicyError."""
    with pytest.raises(ScalingPolicyError) as caught:
        run([0, 2], policy)
    assert message in str(caught.value)


def test_a_policy_without_the_protocol_is_refused() -> None:
    """An object lacking on_tick is refused before the run."""
    class Half:
        def initial_tick_ms(self) -> float:
            return 1.0

    with pytest.raises(ScalingPolicyError, match="has no on_tick"):
        run([0], Half())


def test_scaling_to_zero_then_a_request_is_an_error_naming_the_pool() -> None:
    """Target 0 is allowed until a request needs a worker (the reference fails there too)."""
    from kvreplay.engine.router import NoActiveWorker

    with pytest.raises(NoActiveWorker, match="no active worker in pool agg"):
        run([0, 5], Plan(1.0, [(None, 0, None)]))


def test_infinite_first_tick_means_no_ticks() -> None:
    """initial_tick_ms() = inf: the reference's "never tick"; the pools stay static."""
    policy = Plan(math.inf, [])
    result = run([0, 2], policy)
    assert policy.snapshots == [] and result.facts.scaling is not None
    assert result.facts.scaling["ticks"] == 0


def kv_rows(rows: list[tuple[float, int, list[int]]]) -> ListWorkload:
    return ListWorkload([request(i, t, n, 3, h) for i, (t, n, h) in enumerate(rows)])


def test_kv_router_sees_workers_join_and_leave() -> None:
    """KV router: worker 1 joins at 11 ms and takes the prompt nobody caches (13 ms); shared
    prefixes stay on worker 0; drained at 20 ms it leaves the router's view, worker 2 joins at
    26 ms. The traffic window's KV hit rate is the mean of overlap / ceil(prompt / block)."""
    doc = native(RANK, router="kv_router")
    doc["spec"]["engine"]["startup_seconds"] = 0.001
    policy = Plan(10.0, [(None, 2, 20.0), (None, 1, 25.0), (None, 2, None)])
    rows = [(0, 16, [1, 2, 3, 4]), (1, 15, [1, 2, 3, 5]), (12, 16, [1, 2, 3, 6]),
            (13, 16, [7, 8, 9, 10]), (14, 14, [1, 2, 3, 4]), (30, 16, [7, 8, 9, 11]),
            (31, 16, [1, 2, 3, 12]), (32, 10, [7, 8, 9])]
    result = run_native(doc, workload=kv_rows(rows), scaling_policy=policy)
    assert placements(result) == [0, 0, 0, 1, 0, 2, 0, 2]
    assert [r.reused_input_tokens for r in result.records] == [0, 12, 12, 0, 12, 0, 12, 8]
    assert [s["traffic"]["avg_kv_hit_rate"] for s in policy.snapshots] == [0.0, 0.5, 0.0]
    assert result.facts.scaling is not None
    assert result.facts.scaling["worker_seconds"]["agg"] == pytest.approx(0.059)


def test_router_queue_releases_to_a_worker_that_becomes_ready() -> None:
    """With queue_threshold 0 every request after the first waits in the router queue; the
    worker ready at 5 ms takes the oldest (its release is listed on the ready operation)."""
    doc = native(RANK, router="kv_router", router_config={"queue_threshold": 0.0})
    doc["spec"]["engine"]["startup_seconds"] = 0.002
    rows = [(t, 16, [10 * i + 1, 10 * i + 2, 10 * i + 3, 10 * i + 4])
            for i, t in enumerate([0, 0.5, 1, 1.5, 2])]
    result = run_native(doc, workload=kv_rows(rows), scaling_policy=Plan(3.0, [(None, 2, None)]))
    assert placements(result) == [0, 0, 1, 1, 0]
    assert [r.first_admit_ms for r in result.records] == [0.0, 2.0, 5.0, 7.0, 8.0]
    assert result.facts.scaling is not None
    ready = result.facts.scaling["lifecycle_operations"][1]
    assert ready["cause"] == "worker_ready_event"
    assert ready["topology_released_request_uuids"] == ["00000000-0000-0000-0000-000000000003"]


@pytest.mark.parametrize("scope", ["dp_rank_local", "cluster_shared"])
def test_a_draining_g2_worker_stops_once_its_copies_have_landed(scope: str) -> None:
    """G2 at 0.1 GB/s (1 MB blocks): drained at 1 ms, worker 1 ends its request at 5 ms but its
    D2H store of 4 blocks copies out until 42 ms, and only then is it removed (42 ms billed); a
    tick at 30 ms still comes (a copy is in flight) and sees it draining (the reference's
    figures, both scopes)."""
    g2: dict[str, Any] = {"scope": scope, "num_host_blocks": 16, "d2h_bandwidth_gbps": 0.1,
                          "h2d_bandwidth_gbps": 0.1}
    if scope == "cluster_shared":
        g2["kv_layout_id"] = "t"
    doc = native({**RANK, "native_host_offload": g2}, workers=2)
    policy = Plan(1.0, [(None, 1, 30.0), (None, None, None)])
    result = run_native(doc, workload=requests([0, 0]), scaling_policy=policy)
    assert operations(result) == [(1.0, "planner_scale", [(1, "worker_draining")]),
                                  (42.0, "drain_settlement", [(1, "worker_removed")])]
    assert [(s["now_ms"], s["draining_decode_ids"]) for s in policy.snapshots] == [
        (1.0, []), (30.0, [1])]
    report = report_from_run(result)
    assert report["summary"]["duration_ms"] == 5.0
    assert report["summary"]["decode_worker_seconds"] == pytest.approx(0.084)


def test_a_worker_added_under_g2_gets_its_own_private_pool() -> None:
    """Scaled from 1 to 3 workers, a private G2 deployment has a pool per worker (the report's
    G2 timeline names each), every one empty before its worker joined."""
    g2 = {"num_host_blocks": 16, "d2h_bandwidth_gbps": 1.0, "h2d_bandwidth_gbps": 1.0}
    doc = native({**RANK, "native_host_offload": g2})
    result = run_native(doc, workload=requests([0, 5, 6, 7]),
                        scaling_policy=Plan(4.0, [(None, 3, None)]))
    assert placements(result) == [0, 1, 2, 0]
    report = report_from_run(result)
    assert report["summary"]["g2_transfers"]["pools"] == 3
    pools = report["summary"]["g2_timeline"]["pools"]
    assert [p["name"] for p in pools] == ["agg 0", "agg 1", "agg 2"]
    assert all(used == 0 for p in pools[1:] for used in p["used_blocks"][:4])


@pytest.mark.parametrize(("scope", "resident"), [("worker_local", 4), ("cluster_shared", 8)])
def test_a_draining_g3_worker_stops_once_its_writes_have_landed(scope: str,
                                                                resident: int) -> None:
    """G2 at 4 GB/s, G3 writes at 0.1 GB/s: drained at 1 ms, worker 1 ends its request at 5 ms,
    its G3 write of 4 blocks lands at 43.1 ms, and only then is it removed; a worker-local G3
    pool leaves with its worker (4 blocks resident at the end, worker 0's), a shared one keeps
    both workers' 8 (the reference's figures)."""
    g2 = {"num_host_blocks": 16, "d2h_bandwidth_gbps": 4.0, "h2d_bandwidth_gbps": 4.0}
    g3 = {"scope": scope, "num_g3_blocks": 16, "read_bandwidth_gbps": 0.1,
          "write_bandwidth_gbps": 0.1}
    doc = native({**RANK, "native_host_offload": g2, "g3_offload": g3}, workers=2)
    policy = Plan(1.0, [(None, 1, 30.0), (None, None, None)])
    result = run_native(doc, workload=requests([0, 0]), scaling_policy=policy)
    assert operations(result) == [(1.0, "planner_scale", [(1, "worker_draining")]),
                                  (43.1, "drain_settlement", [(1, "worker_removed")])]
    assert [s["draining_decode_ids"] for s in policy.snapshots] == [[], [1]]
    summary = report_from_run(result)["summary"]
    assert summary["decode_worker_seconds"] == pytest.approx(0.0862)
    assert summary["g3_offload"]["resident_blocks"] == resident
    assert summary["g3_offload"]["write"]["completed_jobs"] == 2


def test_telemetry_samples_follow_the_fleet() -> None:
    """Sampled every 2 ms, 2 workers: the sample at a tick's instant is taken before the tick
    (at 2 ms worker 2 is not starting yet; at 4 ms it is, and worker 1 not yet draining); a
    sample lists every worker not removed, starting and draining ones included, with the ids
    by state; worker 1, drained at 4 ms, leaves the samples once removed at 12 ms (the
    reference's samples)."""
    doc = native(RANK, workers=2)
    doc["spec"]["engine"]["startup_seconds"] = 0.003
    doc["spec"]["telemetry"] = {"sample_interval_ms": 2.0}
    result = run_native(doc, workload=requests([0, 0, 1, 3]),
                        scaling_policy=Plan(2.0, [(None, 3, 4.0), (None, 1, None)]))
    report = report_from_run(result)
    samples = [(s["sampled_at_ms"], s["active_decode_ids"], s["starting_decode_ids"],
                s["draining_decode_ids"], [g["worker_id"] for g in s["decode_scheduler_metrics"]],
                s["traffic"]["arriving_requests"]) for s in report["telemetry"]["samples"]]
    assert samples == [
        (0.0, [0, 1], [], [], [0, 1], 0), (2.0, [0, 1], [], [], [0, 1], 3),
        (4.0, [0, 1], [2], [], [0, 1, 2], 1), (6.0, [0], [], [1], [0, 1], 0),
        (8.0, [0], [], [1], [0, 1], 0), (10.0, [0], [], [1], [0, 1], 0),
        (12.0, [0], [], [], [0], 0)]


def test_sglang_ranks_publish_forward_pass_metrics() -> None:
    """SGLang ranks under a policy: the pass before tick 0 (3 ms) decoded both admitted
    requests (17 tokens each) with two prompts waiting; tick 1 (10 ms) sees two decodes of 19
    and one prompt waiting, and 10 decode forwards since tick 0 (first tokens riding a prefill
    are not forwards; the reference's figures)."""
    doc = native({**RANK, "backend": "sglang", "enable_chunked_prefill": True})
    doc["spec"]["engine"]["startup_seconds"] = 0.005
    policy = Plan(3.0, [(None, 3, 10.0), (None, None, None)])
    run_native(doc, workload=requests(TIMES), scaling_policy=policy)
    seen = [(fpm["num_decode_requests"], fpm["sum_decode_kv_tokens"], fpm["num_queued_prefill"],
             fpm["sum_queued_prefill_tokens"], fpm["wall_time"], s["traffic"][
                 "accept_length_forward_count"])
            for s in policy.snapshots for fpm in s["decode_fpm_snapshots"]]
    assert seen == [(2, 34, 2, 32, 0.001, 2), (2, 38, 1, 16, 0.001, 10)]


def test_mtp_decode_forwards_count_their_drafts_in_the_traffic() -> None:
    """With MTP (nextn 2 accepting both) a decode forward's visible tokens are its
    verification's: a 16-token prompt, 8 output tokens; its pass (prefill 2 + decode 1 ms)
    emits a burst of 3, no forward; the forwards ending at 4 and 5 ms emit 3, then the 2 left
    (3 drawn, as the reference counts). Tick 0 at 4.5 ms: 1 forward of 3; before, MTP steps
    counted none."""
    doc = native({**RANK, "aic_nextn": 2, "aic_nextn_accept_rates": "1.0,1.0",
                  "aic_mtp_seed": 3})
    policy = Plan(4.5, [(None, None, 10.0), (None, None, None)])
    run_native(doc, workload=requests([0.0], 8), scaling_policy=policy)
    assert [(s["now_ms"], s["traffic"]["accept_length_forward_count"],
             s["traffic"]["avg_accept_length"]) for s in policy.snapshots] == [(4.5, 1, 3.0)]
