"""The scaling policies kvreplay runs from a spec (engine/policies.py): their decisions on
snapshots, and the same object driving the reference (the policies read only the snapshot, so
both engines give one report)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import kvreplay
from kvreplay.engine.policies import build_policy
from kvreplay.schema.spec import Spec

AGG = {"engine": {"model": "m", "workers": {"aggregated": {
    "parallelism": {"replicas": 1}, "kv_cache": {"block_size": 16,
                                                 "capacity": {"type": "fixed", "blocks": 100}},
    "timing": {"type": "fixed", "prefill_ms": 2, "decode_ms": 1}}}}}
PD = {"engine": {"mode": "disaggregated", "model": "m", "workers": {
    role: {"parallelism": {"replicas": 1, "tensor": 2},
           "kv_cache": {"block_size": 16, "capacity": {"type": "fixed", "blocks": 100}},
           "timing": {"type": "fixed", "prefill_ms": 2, "decode_ms": 1}}
    for role in ("prefill", "decode")}}}


def spec(base: dict[str, Any], scaling: dict[str, Any]) -> Spec:
    compiled = kvreplay.compile_config({**base, "scaling": scaling})
    assert compiled.spec is not None and compiled.ok, compiled.diagnostics
    return compiled.spec


def fpm(worker: int, **figures: int) -> dict[str, Any]:
    out: dict[str, Any] = {key: 0 for key in (
        "num_prefill_requests", "sum_prefill_tokens", "sum_prefill_kv_tokens",
        "num_decode_requests", "sum_decode_kv_tokens", "num_queued_prefill",
        "sum_queued_prefill_tokens", "num_queued_decode", "sum_queued_decode_kv_tokens")}
    return {**out, "worker_id": worker, "dp_rank": 0, **figures}


def snapshot(now: float, active: dict[str, list[int]], fpms: dict[str, list[dict[str, Any]]],
             starting: dict[str, int] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"now_ms": now}
    for role in ("prefill", "decode"):
        ids = active.get(role, [])
        up = (starting or {}).get(role, 0)
        out |= {f"active_{role}_ids": ids, f"{role}_fpm_snapshots": fpms.get(role, []),
                f"starting_{role}_count": up, f"draining_{role}_count": 0,
                f"non_draining_{role}_count": len(ids) + up}
    return out


def test_schedule_sets_each_step_and_its_next_time() -> None:
    """A schedule answers its step's targets (only those that move the count) and the next
    step's time; the last step stops the ticks."""
    policy = build_policy(spec(AGG, {"policy": "schedule", "schedule": [
        {"at_seconds": 5, "aggregated": 4}, {"at_seconds": 30, "aggregated": 1}]}))
    assert policy.initial_tick_ms() == 5000.0
    first = policy.on_tick(snapshot(5000.0, {"decode": [0]}, {}))
    assert first == {"target_prefill": None, "target_decode": 4, "next_tick_ms": 30000.0}
    second = policy.on_tick(snapshot(30000.0, {"decode": [0, 1, 2, 3]}, {}))
    assert second == {"target_prefill": None, "target_decode": 1, "next_tick_ms": None}


def test_schedule_is_lowered_to_the_gpu_budget() -> None:
    """max_gpus 8 with TP 2 per replica: 4 prefill + 3 decode asks 14 GPUs; decode gives up
    replicas first (down to 1), then prefill (to 3): 3 x 2 + 1 x 2 = 8."""
    policy = build_policy(spec(PD, {"policy": "schedule", "max_gpus": 8, "schedule": [
        {"at_seconds": 1, "prefill": 4, "decode": 3}]}))
    answer = policy.on_tick(snapshot(1000.0, {"prefill": [0], "decode": [0]}, {}))
    assert (answer["target_prefill"], answer["target_decode"]) == (3, None)


LOAD = {"policy": "load", "interval_seconds": 2, "cooldown_seconds": 5, "min_replicas": 1,
        "max_replicas": 3, "scale_up": {"queue_depth": 4}, "scale_down": {"queue_depth": 1}}


def test_load_policy_steps_by_one_within_bounds_and_cooldown() -> None:
    """8 waiting on one replica (>= 4 per replica): +1; 5 s cooldown holds the next tick;
    an empty queue (< 1) then removes one; never above max_replicas."""
    policy = build_policy(spec(AGG, LOAD))
    assert policy.initial_tick_ms() == 2000.0
    busy = {"decode": [fpm(0, num_queued_prefill=8)]}
    up = policy.on_tick(snapshot(2000.0, {"decode": [0]}, busy))
    assert up == {"target_prefill": None, "target_decode": 2, "next_tick_ms": 4000.0}
    held = policy.on_tick(snapshot(4000.0, {"decode": [0, 1]},
                                   {"decode": [fpm(1, num_queued_prefill=20)]}))
    assert held["target_decode"] is None  # within the cooldown
    idle = {"decode": [fpm(0), fpm(1)]}
    down = policy.on_tick(snapshot(8000.0, {"decode": [0, 1]}, idle))
    assert down["target_decode"] == 1
    capped = build_policy(spec(AGG, {**LOAD, "cooldown_seconds": 0}))
    capped.on_tick(snapshot(2000.0, {"decode": [0, 1, 2]},
                            {"decode": [fpm(w, num_queued_prefill=9) for w in range(3)]}))
    again = capped.on_tick(snapshot(4000.0, {"decode": [0, 1, 2]}, {}))
    assert again["target_decode"] is None  # 3 is max_replicas; the cached FPMs still say busy


def test_load_policy_waits_while_workers_start() -> None:
    """A role with starting workers is not changed again (their capacity is on its way)."""
    policy = build_policy(spec(AGG, {**LOAD, "cooldown_seconds": 0}))
    answer = policy.on_tick(snapshot(2000.0, {"decode": [0]},
                                     {"decode": [fpm(0, num_queued_prefill=9)]},
                                     starting={"decode": 1}))
    assert answer["target_decode"] is None


def test_load_policy_reads_kv_usage_per_replica() -> None:
    """KV usage: tokens held by the scheduled and queued work over the replica's 1,600-token
    capacity: 1,200 held is 0.75, above a 0.7 scale-up threshold."""
    policy = build_policy(spec(AGG, {"policy": "load", "scale_up": {"kv_usage": 0.7},
                                     "scale_down": {"kv_usage": 0.1}}))
    answer = policy.on_tick(snapshot(1000.0, {"decode": [0]}, {"decode": [
        fpm(0, sum_decode_kv_tokens=1000, sum_queued_decode_kv_tokens=200)]}))
    assert answer["target_decode"] == 2


PLANNER = {"policy": "planner_load", "load_adjustment_interval_seconds": 1,
           "load_min_observations": 2, "prefill_scale_up_queue_tokens": 1000,
           "prefill_scale_down_queue_tokens": 100, "decode_scale_up_kv_rate": 80,
           "decode_scale_down_kv_rate": 20}


def test_planner_load_follows_its_documented_thresholds() -> None:
    """Two ticks with metrics before a decision; then prefill +1 at >= 1,000 queued tokens per
    replica, decode -1 below 20% KV utilization (but not below min_endpoint 1)."""
    policy = build_policy(spec(PD, PLANNER))
    fpms = {"prefill": [fpm(0, sum_queued_prefill_tokens=1500)],
            "decode": [fpm(0, sum_decode_kv_tokens=100)]}
    active = {"prefill": [0], "decode": [0]}
    first = policy.on_tick(snapshot(1000.0, active, fpms))
    assert first == {"target_prefill": None, "target_decode": None, "next_tick_ms": 2000.0}
    second = policy.on_tick(snapshot(2000.0, active, fpms))
    assert (second["target_prefill"], second["target_decode"]) == (2, None)


def test_planner_load_holds_while_a_change_is_in_progress() -> None:
    """No new action while any role still has starting (or draining) workers."""
    policy = build_policy(spec(PD, {**PLANNER, "load_min_observations": 0}))
    fpms = {"prefill": [fpm(0, sum_queued_prefill_tokens=5000)]}
    answer = policy.on_tick(snapshot(1000.0, {"prefill": [0], "decode": [0]}, fpms,
                                     starting={"decode": 1}))
    assert answer["target_prefill"] is None


# -- the same object on the reference -------------------------------------------------------------

SYNTH = {"source": {"type": "synthetic", "input_tokens": 256, "output_tokens": 32},
         "load": {"type": "poisson", "requests_per_second": 400, "seed": 3},
         "stop": {"requests": 300}}
POLICIES = [
    {"policy": "schedule", "schedule": [{"at_seconds": 0.05, "aggregated": 3},
                                         {"at_seconds": 0.4, "aggregated": 1}]},
    {"policy": "load", "interval_seconds": 0.02, "cooldown_seconds": 0.05, "max_replicas": 4,
     "scale_up": {"queue_depth": 2}, "scale_down": {"queue_depth": 0.5}},
    {"policy": "planner_load", "load_adjustment_interval_seconds": 0.02,
     "load_min_observations": 1, "decode_scale_up_kv_rate": 30, "decode_scale_down_kv_rate": 5},
]


@pytest.mark.reference
@pytest.mark.parametrize("scaling", POLICIES, ids=lambda p: p["policy"])
def test_a_kvreplay_policy_gives_one_report_on_both_engines(scaling: dict[str, Any]) -> None:
    """The spec's policy object, passed to the reference's scaling hook, gives the same
    lifecycle operations, worker time and latencies as kvreplay's run of the spec."""
    core = pytest.importorskip("dynamo._core")
    config = {**AGG, "traffic": SYNTH, "scaling": scaling}
    config["engine"]["workers"]["aggregated"]["startup_seconds"] = 0.01
    compiled = kvreplay.compile_config(config)
    assert compiled.spec is not None and compiled.ok, compiled.diagnostics
    role = json.loads(compiled.emitted())["spec"]["engine"]
    ref = core.run_mocker_synthetic_trace_replay(
        256, 32, 300, extra_engine_args={"engine": role["rank"], "startup_time": 0.01},
        request_rate=400.0, arrival_seed=3, scaling_policy=build_policy(compiled.spec))
    outcome = kvreplay.run_spec(compiled)
    assert outcome.report is not None, outcome.error
    mine = outcome.report["summary"]
    ops = mine["scaling"]["lifecycle_operations"]
    assert len(ops) > 1
    theirs = ref.lifecycle_operations
    assert [(op["cause"], op["transitions"]) for op in ops] == [
        (op["cause"], op["transitions"]) for op in theirs]
    assert [op["at_ms"] for op in ops] == pytest.approx([op["at_ms"] for op in theirs])
    # Poisson arrivals are float milliseconds there, whole nanoseconds here: 10 ns apart at most.
    for key in ("mean_ttft_ms", "p90_ttft_ms", "duration_ms"):
        assert mine[key] == pytest.approx(ref.summary[key], abs=1e-5), key
    assert mine["decode_worker_seconds"] == pytest.approx(ref.summary["decode_worker_seconds"],
                                                          abs=1e-8)


# -- a policy object through the Python API --------------------------------------------------------


class Steps:
    """A hand-written policy (the reference's protocol): 3 workers at 50 ms, 1 at 400 ms."""

    def __init__(self) -> None:
        self.plan = [(50.0, 3), (400.0, 1)]

    def initial_tick_ms(self) -> float:
        return self.plan[0][0]

    def on_tick(self, snapshot: dict[str, Any]) -> dict[str, Any]:
        _, target = self.plan.pop(0)
        return {"target_prefill": None, "target_decode": target,
                "next_tick_ms": self.plan[0][0] if self.plan else None}


def _agg_config() -> dict[str, Any]:
    config = json.loads(json.dumps({**AGG, "traffic": SYNTH}))
    config["engine"]["workers"]["aggregated"]["startup_seconds"] = 0.01
    return config


def test_run_spec_takes_a_policy_object() -> None:
    """kvreplay.run_spec(..., scaling_policy=obj) drives a spec without `scaling`: the same run
    as the spec's own schedule policy (the report names the object's class)."""
    static = kvreplay.run_spec(kvreplay.compile_config(_agg_config()))
    assert static.report is not None and "scaling" not in static.report["summary"]
    scaled = kvreplay.run_spec(kvreplay.compile_config(_agg_config()), scaling_policy=Steps())
    assert scaled.report is not None, scaled.error
    own = kvreplay.run_spec(kvreplay.compile_config({**_agg_config(), "scaling": POLICIES[0]}))
    assert own.report is not None
    mine, theirs = scaled.report["summary"], own.report["summary"]
    assert mine["scaling"]["policy"] == "Steps" and theirs["scaling"]["policy"] == "schedule"
    assert mine["scaling"]["lifecycle_operations"] == theirs["scaling"]["lifecycle_operations"]
    assert {k: v for k, v in mine.items() if k != "scaling"} == {
        k: v for k, v in theirs.items() if k != "scaling"}
    assert scaled.report["per_request"] == own.report["per_request"]
    assert isinstance(Steps(), kvreplay.ScalingPolicy)


class Negative(Steps):
    def on_tick(self, snapshot: dict[str, Any]) -> dict[str, Any]:
        return {"target_prefill": None, "target_decode": -1, "next_tick_ms": None}


def test_run_spec_reports_a_bad_policy_by_its_tick() -> None:
    """A nonsense answer is the outcome's error (no report), naming the tick and the value;
    a policy object for a spec that has its own is refused."""
    bad = kvreplay.run_spec(kvreplay.compile_config(_agg_config()), scaling_policy=Negative())
    assert bad.report is None
    assert bad.error is not None and "tick 0 at 50 ms" in bad.error and "-1" in bad.error
    both = kvreplay.run_spec(kvreplay.compile_config({**_agg_config(), "scaling": POLICIES[0]}),
                             scaling_policy=Steps())
    assert both.report is None and "has its own policy" in (both.error or "")


@pytest.mark.reference
def test_a_policy_object_gives_one_report_on_both_engines() -> None:
    """The same hand-written object on the reference's hook and through kvreplay.run_spec."""
    core = pytest.importorskip("dynamo._core")
    compiled = kvreplay.compile_config(_agg_config())
    role = json.loads(compiled.emitted())["spec"]["engine"]
    ref = core.run_mocker_synthetic_trace_replay(
        256, 32, 300, extra_engine_args={"engine": role["rank"], "startup_time": 0.01},
        request_rate=400.0, arrival_seed=3, scaling_policy=Steps())
    outcome = kvreplay.run_spec(compiled, scaling_policy=Steps())
    assert outcome.report is not None, outcome.error
    mine = outcome.report["summary"]
    assert [(op["cause"], op["transitions"]) for op in mine["scaling"]["lifecycle_operations"]] \
        == [(op["cause"], op["transitions"]) for op in ref.lifecycle_operations]
    for key in ("mean_ttft_ms", "p90_ttft_ms", "duration_ms"):
        assert mine[key] == pytest.approx(ref.summary[key], abs=1e-5), key
