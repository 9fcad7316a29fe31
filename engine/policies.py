"""The scaling policies kvreplay runs from a spec (`scaling:` in YAML, schema/scaling.py), as
objects with the reference's scaling protocol (scaling.py): they read only the tick's snapshot,
so the same object gives the same decisions on the reference engine (docs/config.md, Scaling).

Every policy sees each role's pool through the snapshot: its active, starting and draining
workers, and the latest forward-pass metrics (FPM) of each active worker's ranks (kept from
tick to tick: a rank publishes only when it runs a pass, or idle once a second). Per-replica
load is the pool's sum over its active workers' latest FPMs divided by its active workers:
- queue depth: requests waiting (queued prefill + queued decode);
- in flight: requests scheduled in the last pass plus those waiting;
- KV usage: tokens the scheduled and waiting requests hold (decode lengths, prefill prefixes and
  chunks, queued decode lengths) over the replica's KV capacity (dp x num_gpu_blocks x
  block_size).
`max_gpus` lowers a decision that would provision more GPUs than it (non-draining replicas x
dp x tp x pp, summed over the roles): the roles give up replicas in turn (decode first).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from kvreplay.engine.errors import EngineConfigError, ScalingPolicyError
from kvreplay.engine.scaling import ScalingPolicy
from kvreplay.schema.scaling import KVREPLAY_POLICIES, LoadThresholds, ScalingOptions
from kvreplay.schema.spec import Role, Spec

Decision = dict[str, Any]


def scaling_for(spec: Spec, given: ScalingPolicy | None) -> ScalingPolicy | None:
    """The policy a run uses: the one given (for a spec without a scaling section), or the
    spec's own kvreplay policy, or None (static pools)."""
    name = spec.scaling.policy
    if given is not None:
        if name != "none":
            raise ScalingPolicyError(f"scaling policy: the spec has its own policy ({name!r}); "
                                     "pass scaling_policy only for a spec without `scaling`")
        for method in ("initial_tick_ms", "on_tick"):
            if not callable(getattr(given, method, None)):
                raise ScalingPolicyError(f"scaling policy: {type(given).__name__} has no "
                                         f"{method}() method (the protocol: initial_tick_ms() "
                                         "and on_tick(snapshot))")
        return given
    if name in KVREPLAY_POLICIES:
        return build_policy(spec)
    return None


def options_of(spec: Spec) -> ScalingOptions:
    """The spec's kvreplay policy options (its native config read strictly)."""
    from kvreplay.schema.convert import native_converter

    options = getattr(spec.scaling, "options", None)
    if isinstance(options, ScalingOptions):
        return options
    try:
        return native_converter().structure(spec.scaling.config or {}, ScalingOptions)
    except Exception as exc:  # cattrs' error group: the first message is enough here
        raise EngineConfigError(f"/spec/adapters/scaling/config: not a valid "
                                f"{spec.scaling.policy} policy ({exc})") from exc


def build_policy(spec: Spec) -> ScalingPolicy:
    options = options_of(spec)
    policy = spec.scaling.policy
    if policy == "schedule":
        return SchedulePolicy(spec, options)
    if policy == "load":
        return LoadPolicy(spec, options)
    return PlannerLoadPolicy(spec, options)


class _Pools:
    """What a kvreplay policy knows of the deployment: its roles as the snapshot names them."""

    def __init__(self, spec: Spec, max_gpus: int | None) -> None:
        self.aggregated = spec.mode == "aggregated"
        roles = spec.roles
        # (snapshot role, spec role): an aggregated pool reports as decode.
        self.roles: list[tuple[str, Role]] = (
            [("decode", roles[0])] if self.aggregated else
            [(r.name, r) for r in roles])
        self.max_gpus = max_gpus
        self.cache: dict[str, dict[tuple[int, int], Mapping[str, Any]]] = {
            name: {} for name, _ in self.roles}

    @staticmethod
    def gpus(role: Role) -> int:
        return role.dp_size * role.tensor_parallel_size * role.pipeline_parallel_size

    def observe(self, snapshot: Mapping[str, Any]) -> None:
        """Keep each active worker's latest FPM (the snapshot holds those since the last tick)."""
        for name, _ in self.roles:
            cache = self.cache[name]
            for fpm in snapshot[f"{name}_fpm_snapshots"]:
                cache[(int(fpm["worker_id"]), int(fpm["dp_rank"]))] = fpm
            active = set(snapshot[f"active_{name}_ids"])
            for key in [k for k in cache if k[0] not in active]:
                del cache[key]

    def load(self, name: str, role: Role, snapshot: Mapping[str, Any]) -> dict[str, float]:
        """Per-replica queue depth, in-flight requests, KV usage, queued prefill tokens."""
        active = len(snapshot[f"active_{name}_ids"])
        fpms = list(self.cache[name].values())
        queued = sum(f["num_queued_prefill"] + f["num_queued_decode"] for f in fpms)
        scheduled = sum(f["num_prefill_requests"] + f["num_decode_requests"] for f in fpms)
        held = sum(f["sum_decode_kv_tokens"] + f["sum_prefill_kv_tokens"]
                   + f["sum_prefill_tokens"] + f["sum_queued_decode_kv_tokens"] for f in fpms)
        queued_tokens = sum(f["sum_queued_prefill_tokens"] for f in fpms)
        capacity = role.dp_size * role.num_gpu_blocks * role.block_size
        n = max(active, 1)
        return {"queue_depth": queued / n, "in_flight": (queued + scheduled) / n,
                "kv_usage": held / (capacity * n), "queued_prefill_tokens": queued_tokens / n}

    def fit(self, targets: dict[str, int]) -> dict[str, int]:
        """Lower targets to the GPU budget (decode first, then prefill, one replica at a time;
        never below one replica)."""
        if self.max_gpus is None:
            return targets
        out = dict(targets)
        gpus = {name: self.gpus(role) for name, role in self.roles}
        order = [name for name in ("decode", "prefill") if name in out]
        while sum(out[n] * gpus[n] for n in out) > self.max_gpus:
            for name in order:
                if out[name] > 1:
                    out[name] -= 1
                    break
            else:
                break
        return out

    def decision(self, snapshot: Mapping[str, Any], targets: dict[str, int],
                 next_ms: float | None) -> Decision:
        """The protocol's answer: a target only where it moves the role's count."""
        out: Decision = {"target_prefill": None, "target_decode": None, "next_tick_ms": next_ms}
        for name, target in self.fit(targets).items():
            if target != snapshot[f"non_draining_{name}_count"]:
                out[f"target_{name}"] = target
        return out


class SchedulePolicy(_Pools):
    """Targets at given simulated times (a role a step leaves out keeps its count)."""

    name = "schedule"

    def __init__(self, spec: Spec, options: ScalingOptions) -> None:
        super().__init__(spec, options.max_gpus)
        self.steps = list(options.schedule or ())
        self.next = 0

    def initial_tick_ms(self) -> float:
        return self.steps[0].at_seconds * 1000.0 if self.steps else math.inf  # type: ignore[operator]

    def on_tick(self, snapshot: dict[str, Any]) -> Decision:
        step = self.steps[self.next]
        self.next += 1
        targets: dict[str, int] = {}
        for name, _ in self.roles:
            count = step.aggregated if self.aggregated else getattr(step, name)
            targets[name] = count if count is not None else snapshot[
                f"non_draining_{name}_count"]
        following = self.steps[self.next].at_seconds if self.next < len(self.steps) else None
        return self.decision(snapshot, targets,
                             None if following is None else following * 1000.0)


class LoadPolicy(_Pools):
    """kvreplay's load policy: one replica more when a scale-up threshold is reached, one less
    when every scale-down threshold is undercut, within [min_replicas, max_replicas], not
    within `cooldown_seconds` of the role's last change, not while it still has starting
    workers (their capacity is on its way)."""

    name = "load"

    def __init__(self, spec: Spec, options: ScalingOptions) -> None:
        super().__init__(spec, options.max_gpus)
        self.options = options
        self.changed: dict[str, float] = {}

    def initial_tick_ms(self) -> float:
        return self.options.interval_seconds * 1000.0

    def on_tick(self, snapshot: dict[str, Any]) -> Decision:
        self.observe(snapshot)
        o = self.options
        now = float(snapshot["now_ms"])
        targets: dict[str, int] = {}
        for name, role in self.roles:
            current = int(snapshot[f"non_draining_{name}_count"])
            target = current
            last = self.changed.get(name)
            waiting = snapshot[f"starting_{name}_count"] or (
                last is not None and now - last < o.cooldown_seconds * 1000.0)
            if not waiting:
                load = self.load(name, role, snapshot)
                if _any_reached(load, o.scale_up):
                    target = current + 1
                elif _all_under(load, o.scale_down):
                    target = current - 1
            target = min(max(target, o.min_replicas), o.max_replicas)
            targets[name] = target
        decision = self.decision(snapshot, targets, now + o.interval_seconds * 1000.0)
        for name, _ in self.roles:
            if decision[f"target_{name}"] is not None:
                self.changed[name] = now
        return decision


def _any_reached(load: Mapping[str, float], t: LoadThresholds | None) -> bool:
    return any(value is not None and load[key] >= value for key, value in _set(t))


def _all_under(load: Mapping[str, float], t: LoadThresholds | None) -> bool:
    given = list(_set(t))
    return bool(given) and all(load[key] < value for key, value in given)


def _set(t: LoadThresholds | None) -> list[tuple[str, float]]:
    if t is None:
        return []
    return [(key, value) for key in ("queue_depth", "kv_usage", "in_flight")
            if (value := getattr(t, key)) is not None]


class PlannerLoadPolicy(_Pools):
    """The upstream planner's `optimization_target: load` as its documentation describes it
    (docs/config.md says which parts are kvreplay's own reading): every
    `load_adjustment_interval_seconds`, a prefill pool gains a replica when its queued prefill
    tokens per replica reach `prefill_scale_up_queue_tokens` and loses one below
    `prefill_scale_down_queue_tokens`; a decode (or aggregated) pool likewise on its KV
    utilization in percent against `decode_scale_{up,down}_kv_rate`; one replica per interval,
    no new action while the last one is in progress (starting or draining workers), none
    before `load_min_observations` ticks with metrics, within the min endpoints and
    `max_gpu_budget`."""

    name = "planner_load"

    def __init__(self, spec: Spec, options: ScalingOptions) -> None:
        super().__init__(spec, options.max_gpu_budget)
        self.options = options
        self.observations = 0

    def initial_tick_ms(self) -> float:
        return self.options.load_adjustment_interval_seconds * 1000.0

    def _minimum(self, name: str) -> int:
        o = self.options
        if name == "prefill" and o.prefill_min_endpoint is not None:
            return o.prefill_min_endpoint
        if name == "decode" and not self.aggregated and o.decode_min_endpoint is not None:
            return o.decode_min_endpoint
        return o.min_endpoint

    def on_tick(self, snapshot: dict[str, Any]) -> Decision:
        o = self.options
        self.observe(snapshot)
        if any(snapshot[f"{name}_fpm_snapshots"] for name, _ in self.roles):
            self.observations += 1
        now = float(snapshot["now_ms"])
        targets: dict[str, int] = {}
        busy = any(snapshot[f"starting_{name}_count"] or snapshot[f"draining_{name}_count"]
                   for name, _ in self.roles)
        for name, role in self.roles:
            current = int(snapshot[f"non_draining_{name}_count"])
            target = current
            if not busy and self.observations >= o.load_min_observations:
                load = self.load(name, role, snapshot)
                up: float | None
                down: float | None
                if name == "prefill":
                    value, up, down = (load["queued_prefill_tokens"],
                                       o.prefill_scale_up_queue_tokens,
                                       o.prefill_scale_down_queue_tokens)
                else:
                    value, up, down = (load["kv_usage"] * 100.0, o.decode_scale_up_kv_rate,
                                       o.decode_scale_down_kv_rate)
                if up is not None and value >= up:
                    target = current + 1
                elif down is not None and value < down:
                    target = current - 1
            targets[name] = max(target, self._minimum(name))
        return self.decision(snapshot, targets, now + o.load_adjustment_interval_seconds * 1000.0)
