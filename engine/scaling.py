"""The scaling hook: a policy object ticks in simulated time and sets each pool's target
(engine.md, Scaling; the reference's `scaling_policy=` of its offline replay).

The policy (`ScalingPolicy`) is asked once for its first tick time (`initial_tick_ms`); at each
tick, once the instant has settled (after every pass completion, arrival and pass start of that
instant), it gets a snapshot (worker ids and counts per role, forward-pass metrics, the traffic
window: scaling_metrics.py) and answers {target_prefill, target_decode, next_tick_ms}: a target
is the role's desired non-draining count (None: unchanged; an aggregated deployment reads
target_decode only), next_tick_ms the absolute time of the next tick (None: no more ticks).
Ticks stop once the workload is done (no request in flight, none to come). Targets are applied
by the pools' fleets (fleet.py): workers start (ready after the role's `startup_seconds`), drain
and stop, joining and leaving their router's view.

kvreplay refuses what the reference silently ignores or aborts on: a decision that is not a
mapping with those three keys, a target that is not a non-negative integer (bool included), a
next tick that is NaN or not after the tick (the reference stops ticking), an initial tick that
is negative or NaN, an exception inside the policy. Each is a ScalingPolicyError naming the tick
and the value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from kvreplay.engine.errors import ScalingPolicyError
from kvreplay.engine.events import SCALING_TICK, WORKER_UP
from kvreplay.engine.fleet import (
    ACTIVE,
    DRAINING,
    STARTING,
    Fleet,
    LifecycleLog,
    common_origin,
    transition,
)
from kvreplay.engine.report import uuid_for
from kvreplay.engine.router import KvRouter
from kvreplay.engine.scaling_metrics import FpmBuffer, Traffic, prompted, stretch_wall
from kvreplay.engine.simtime import check_ns, ms_to_ns, ns_to_ms

if TYPE_CHECKING:
    from kvreplay.engine.deployment import Pool
    from kvreplay.engine.events import EventKind
    from kvreplay.engine.scheduler import PassOutcome
    from kvreplay.engine.worker import Worker

REPLICAS_MAX = 65536
DECISION_KEYS = ("target_prefill", "target_decode", "next_tick_ms")
NO_HORIZON = 1 << 62


@runtime_checkable
class ScalingPolicy(Protocol):
    """The reference's scaling-policy protocol (kvreplay.run_spec(..., scaling_policy=obj))."""

    def initial_tick_ms(self) -> float:
        """The first tick's simulated time (ms); +inf: never tick."""
        ...

    def on_tick(self, snapshot: dict[str, Any]) -> Mapping[str, Any]:
        """One tick: {"target_prefill": int | None, "target_decode": int | None,
        "next_tick_ms": float | None} (engine.md, Scaling, for the snapshot's keys)."""
        ...


class ScalingLoop(Protocol):
    """What the scaling runtime does through the event loop."""

    @property
    def now(self) -> int: ...

    def push(self, at: int, kind: EventKind, key: int, payload: Any) -> None: ...

    def adopt(self, worker: Worker) -> None:
        """A worker the pool just built joins the loop."""
        ...

    def drain(self, pool: Pool, placed: list[int] | None = None) -> None:
        """Route what the pool's router queue holds (the placed ordinals into `placed`)."""
        ...

    def workload_done(self) -> bool:
        """No request in flight and none to come."""
        ...

    def retire(self, worker: Worker) -> None:
        """A worker the pool removed leaves the loop's tiers."""
        ...

    def bill(self) -> None:
        """The instant counts for the clock the report bills."""
        ...


class ScalingRuntime:
    """The policy, its ticks, and the pools' fleets (one per role, in role order)."""

    __slots__ = ("aggregated", "buffers", "due", "fleets", "horizon", "last_tick", "log", "loop",
                 "policy", "pools", "replicas", "tick_ms", "ticks", "traffic")

    def __init__(self, loop: ScalingLoop, pools: list[Pool], policy: ScalingPolicy) -> None:
        self.loop = loop
        self.policy = policy
        self.pools = pools
        self.aggregated = pools[0].name == "agg"
        self.log = LifecycleLog()
        self.fleets = [Fleet(pool, ms_to_ns(pool.role.startup_seconds * 1000.0), self.log)
                       for pool in pools]
        self.buffers = [FpmBuffer(pool.role.dp_size) for pool in pools]
        self.traffic = Traffic()
        self.ticks = 0
        self.tick_ms = 0.0
        self.last_tick = 0  # the instant of the last tick run (ns): the billing runs to it
        self.due = False
        self.horizon = NO_HORIZON
        self.replicas: dict[str, list[list[float]]] = {
            pool.name: [[0.0, len(pool.workers), 0, 0]] for pool in pools}
        for pool, buffer in zip(pools, self.buffers, strict=True):
            _watch(pool, list(range(len(pool.workers))))
            for worker in pool.workers:
                buffer.activate(worker.worker_id, 0)
                worker.fpm = []

    # -- ticks -------------------------------------------------------------------------------

    def start(self) -> None:
        """Ask the policy for its first tick."""
        try:
            first = self.policy.initial_tick_ms()
        except Exception as exc:  # the policy's own failure, reported as bad input
            raise ScalingPolicyError(f"scaling policy: initial_tick_ms() raised "
                                     f"{type(exc).__name__}: {exc}") from exc
        if not _number(first) or math.isnan(first) or first < 0:
            raise ScalingPolicyError(f"scaling policy: initial_tick_ms() returned {first!r}: "
                                     "expected a number of milliseconds >= 0 (inf: no ticks)")
        if first != math.inf:
            self._arm(float(first))

    def _arm(self, at_ms: float) -> None:
        at = check_ns(ms_to_ns(at_ms))
        self.tick_ms = at_ms
        self.loop.push(at, SCALING_TICK, 0, None)
        self._set_horizon(at)

    def _set_horizon(self, at: int) -> None:
        self.horizon = at
        for pool in self.pools:
            for worker in pool.workers:
                worker.horizon = at

    def on_tick_event(self, _: None) -> None:
        """The SCALING_TICK event: the tick runs once the instant has settled (`due`)."""
        self.due = True

    def tick(self) -> None:
        """Run the due tick: snapshot, the policy's decision, its targets, the next tick."""
        self.due = False
        self._set_horizon(NO_HORIZON)
        loop = self.loop
        if loop.workload_done():
            return  # the reference drops a tick once nothing is left to do
        ordinal = self.ticks
        self.ticks += 1
        self.last_tick = loop.now
        now_ms = self.tick_ms
        snapshot = self.snapshot(ordinal, now_ms)
        try:
            decision = self.policy.on_tick(snapshot)
        except Exception as exc:
            raise ScalingPolicyError(f"scaling policy: tick {ordinal} at {now_ms:g} ms: "
                                     f"on_tick raised {type(exc).__name__}: {exc}") from exc
        targets, next_ms = _decision(decision, ordinal, now_ms)
        self._apply(targets, ordinal)
        if next_ms is not None:
            self._arm(next_ms)

    def snapshot(self, ordinal: int, now_ms: float) -> dict[str, Any]:
        """What the policy sees, in the reference's keys (an aggregated pool reports as decode)."""
        now = self.loop.now
        out: dict[str, Any] = {"tick_ordinal": ordinal, "now_ms": now_ms}
        roles = [("decode", 0)] if self.aggregated else [("prefill", 0), ("decode", 1)]
        for role in ("prefill", "decode"):
            out[f"{role}_fpm_snapshots"] = []
            for state in (ACTIVE, STARTING, DRAINING):
                out[f"{state}_{role}_ids"] = []
        for role, i in roles:
            fleet = self.fleets[i]
            active = fleet.ids(ACTIVE)
            out[f"{role}_fpm_snapshots"] = self.buffers[i].take(active, now)
            out[f"active_{role}_ids"] = active
            out[f"starting_{role}_ids"] = fleet.ids(STARTING)
            out[f"draining_{role}_ids"] = fleet.ids(DRAINING)
        for role in ("prefill", "decode"):
            for state in (ACTIVE, STARTING, DRAINING):
                out[f"{state}_{role}_count"] = len(out[f"{state}_{role}_ids"])
            out[f"non_draining_{role}_count"] = (out[f"active_{role}_count"]
                                                 + out[f"starting_{role}_count"])
            out[f"total_{role}_count"] = (out[f"non_draining_{role}_count"]
                                          + out[f"draining_{role}_count"])
        out["traffic"] = self.traffic.drain(now_ms)
        return out

    # -- applying targets --------------------------------------------------------------------

    def _apply(self, targets: tuple[int | None, int | None], tick: int) -> None:
        target_prefill, target_decode = targets
        if self.aggregated:
            if target_decode is not None:
                self._apply_pool(0, target_decode, tick)
            return
        if target_prefill is None and target_decode is None:
            return
        for i, target in enumerate((target_prefill, target_decode)):
            self._apply_pool(i, self.fleets[i].non_draining() if target is None else target,
                             tick)

    def _apply_pool(self, i: int, target: int, tick: int) -> None:
        pool = self.pools[i]
        fleet = self.fleets[i]
        loop = self.loop
        now = loop.now
        add, cancel, drain = fleet.plan(target)
        transitions = []
        started: list[int] = []
        for _ in range(add):
            worker = pool.add_worker()
            state = fleet.added(worker.worker_id, now)
            worker.horizon = self.horizon
            worker.fpm = []
            loop.adopt(worker)
            if state == STARTING:
                started.append(worker.worker_id)
                loop.push(now + fleet.startup_ns, WORKER_UP, worker.gid, (i, worker.worker_id))
                transitions.append(transition(worker.worker_id, "worker_starting", None,
                                              STARTING, None))
            else:
                self.buffers[i].activate(worker.worker_id, now)
                transitions.append(transition(worker.worker_id, "worker_ready", None, ACTIVE,
                                              None))
        for w in drain:
            fleet.drain(w)
            transitions.append(transition(w, "worker_draining", ACTIVE, DRAINING, None))
        cancelled = [fleet.start_origin.get(w) for w in cancel]
        for w in cancel:
            fleet.cancel(w, now)
            transitions.append(transition(w, "worker_removed", STARTING, "removed",
                                          fleet.start_origin.get(w), "startup_cancelled"))
        removed = [w for w in sorted(drain) if w in fleet.removable()]
        for w in removed:
            self._remove(i, w)
            transitions.append(transition(w, "worker_removed", DRAINING, "removed", None))
        if not transitions:
            return
        _watch(pool, fleet.ids(ACTIVE))
        released: list[int] = []
        loop.drain(pool, released)
        ordinal = self.log.record(now, pool.name, "planner_scale", tick,
                                  common_origin(cancelled) if cancelled else None, transitions,
                                  fleet.lifecycle_state(), [uuid_for(o) for o in released])
        for w in started:
            fleet.start_origin[w] = ordinal
        for w in drain:
            fleet.drain_origin[w] = ordinal
        self._count(i)

    def _remove(self, i: int, worker_id: int) -> None:
        pool = self.pools[i]
        self.fleets[i].remove(worker_id, self.loop.now)
        self.loop.retire(pool.workers[worker_id])
        dp = pool.role.dp_size
        pool.router.forget([worker_id * dp + r for r in range(dp)])

    def ready_event(self, payload: tuple[int, int]) -> None:
        """The WORKER_UP event: a starting worker's start-up delay elapsed."""
        i, worker_id = payload
        loop = self.loop
        if loop.workload_done():
            return  # the reference's run is over: the worker never becomes ready
        loop.bill()
        fleet = self.fleets[i]
        if not fleet.ready(worker_id):
            return  # cancelled while starting
        pool = self.pools[i]
        self.buffers[i].activate(worker_id, loop.now)
        _watch(pool, fleet.ids(ACTIVE))
        released: list[int] = []
        loop.drain(pool, released)
        origin = fleet.start_origin.get(worker_id)
        self.log.record(loop.now, pool.name, "worker_ready_event", None, origin,
                        [transition(worker_id, "worker_ready", STARTING, ACTIVE, origin)],
                        fleet.lifecycle_state(), [uuid_for(o) for o in released])
        self._count(i)

    def settle(self) -> None:
        """Remove the draining workers that hold nothing any more (end of an instant)."""
        for i, fleet in enumerate(self.fleets):
            removable = fleet.removable()
            if not removable:
                continue
            for w in removable:
                self._remove(i, w)
            origins = [fleet.drain_origin.get(w) for w in removable]
            self.log.record(self.loop.now, self.pools[i].name, "drain_settlement", None,
                            common_origin(origins),
                            [transition(w, "worker_removed", DRAINING, "removed",
                                        fleet.drain_origin.get(w)) for w in removable],
                            fleet.lifecycle_state(), [])
            self._count(i)

    def draining(self) -> bool:
        return any(DRAINING in fleet.state for fleet in self.fleets)

    def _count(self, i: int) -> None:
        fleet = self.fleets[i]
        self.replicas[self.pools[i].name].append(
            [ns_to_ms(self.loop.now), len(fleet.ids(ACTIVE)), len(fleet.ids(STARTING)),
             len(fleet.ids(DRAINING))])

    # -- what the loop reports to the policy's metrics ----------------------------------------

    def pass_ending(self, worker: Worker) -> int:
        """Before a pass (or stretch) completes: the duration of its last pass, if a stretch."""
        return stretch_wall(worker)

    def pass_done(self, pool: Pool, worker: Worker, wall: int, k: int,
                  outcome: PassOutcome | None, decoded: tuple[int, int]) -> None:
        """A pass (or a k-pass stretch) completed: its FPM, and its visible tokens (on MTP
        ranks `decoded`, its decode forwards and their tokens as telemetry counts them)."""
        i = self.pools.index(pool)
        captured = worker.fpm
        self.buffers[i].publish(worker, wall, self.loop.now)
        if pool.name == "prefill":
            return
        if worker.ranks[0].mtp is not None:
            self.traffic.tokens(decoded[1], decoded[0])
        elif outcome is not None:
            # Decode forwards only: a first token riding its prompt's last chunk is not one.
            tokens = outcome.tokens
            chunked = prompted(captured) if isinstance(captured, tuple) else set()
            if chunked:
                tokens = [seq for seq in tokens if seq not in chunked]
            self.traffic.tokens(len(tokens), len(set(tokens)))
        elif k:
            n = sum(len(rank.running) for rank in worker.ranks)
            self.traffic.tokens(k * n, k * n)

    def finish(self, end_ns: int) -> dict[str, Any]:
        """What the report carries of the run's scaling: ticks, lifecycle operations, replicas
        over time, and the provisioned worker time per pool (s), to the run's last engine event
        or its last tick, whichever is later (a run stopped at its time cap may tick past its
        last engine event: the reference bills workers to that tick, not in the duration)."""
        name = getattr(self.policy, "name", None)
        end_ns = max(end_ns, self.last_tick)
        return {
            "policy": name if isinstance(name, str) else type(self.policy).__name__,
            "ticks": self.ticks,
            "lifecycle_operations": self.log.operations,
            "replicas": self.replicas,
            "worker_seconds": {pool.name: fleet.worker_seconds(end_ns)
                               for pool, fleet in zip(self.pools, self.fleets, strict=True)},
        }


def _watch(pool: Pool, active: list[int]) -> None:
    """Point the pool's router at its active workers (the KV router at their schedulers)."""
    router = pool.router
    if isinstance(router, KvRouter):
        dp = pool.role.dp_size
        router.members = [w * dp + r for w in active for r in range(dp)]
    else:
        router.active = active


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _decision(value: Any, tick: int, now_ms: float) -> tuple[tuple[int | None, int | None],
                                                             float | None]:
    """The policy's answer, checked: ((target_prefill, target_decode), next tick or None)."""
    where = f"scaling policy: tick {tick} at {now_ms:g} ms"
    if not isinstance(value, Mapping):
        raise ScalingPolicyError(f"{where}: on_tick returned {type(value).__name__} {value!r}; "
                                 "expected a mapping with " + ", ".join(DECISION_KEYS))
    missing = [key for key in DECISION_KEYS if key not in value]
    if missing:
        raise ScalingPolicyError(f"{where}: on_tick's answer lacks {', '.join(missing)} "
                                 f"(got {dict(value)!r})")
    targets = []
    for key in DECISION_KEYS[:2]:
        target = value[key]
        if target is not None and (not isinstance(target, int) or isinstance(target, bool)
                                   or not 0 <= target <= REPLICAS_MAX):
            raise ScalingPolicyError(f"{where}: {key} {target!r} is not a replica count "
                                     f"(an integer 0..{REPLICAS_MAX}, or None: unchanged)")
        targets.append(target)
    next_ms = value["next_tick_ms"]
    if next_ms is not None:
        if not _number(next_ms) or math.isnan(next_ms):
            raise ScalingPolicyError(f"{where}: next_tick_ms {next_ms!r} is not a time in ms "
                                     "(a number, or None: no more ticks)")
        if next_ms == math.inf:
            next_ms = None
        elif next_ms <= now_ms:
            raise ScalingPolicyError(f"{where}: next_tick_ms {next_ms!r} is not after the "
                                     f"tick's own time ({now_ms!r} ms); tick times must increase")
    return (targets[0], targets[1]), (None if next_ms is None else float(next_ms))
