"""Workers that start, drain and stop during a run: one `Fleet` per pool (engine.md, Scaling).

A worker is starting (added with a start-up delay: provisioned, not routable), active
(routable), draining (not routable: it finishes what it holds) or removed. Worker ids are never
reused: a new worker takes the next id of its pool. Applying a target (the pool's desired
non-draining count, active + starting) *(ref)*:
- above it: add workers with new ids, starting when the role has a start-up delay (ready after
  `startup_seconds`), active at once otherwise;
- below it: cancel starting workers, highest id first, then drain active workers, highest id
  first; a draining worker is irrevocably leaving (a later scale-up adds new workers).
A draining worker is removed at the first instant it holds nothing (no request running, waiting,
pending or held as a P/D source, no pass in flight), at once when it is idle already.

Every change is a lifecycle operation, in the reference's `lifecycle_operations` shape; the
billing (provisioned worker time) runs from a worker's start request to its removal, or to the
end of the run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvreplay.engine.simtime import ns_to_ms

if TYPE_CHECKING:
    from kvreplay.engine.deployment import Pool
    from kvreplay.engine.host_client import HostClient

STARTING, ACTIVE, DRAINING, REMOVED = "starting", "active", "draining", "removed"


class LifecycleLog:
    """Every lifecycle operation of a run, numbered across pools (the reference's ordinals)."""

    __slots__ = ("operations",)

    def __init__(self) -> None:
        self.operations: list[dict[str, Any]] = []

    def record(self, at_ns: int, pool: str, cause: str, tick: int | None, origin: int | None,
               transitions: list[dict[str, Any]], state: dict[str, list[int]],
               released: list[str]) -> int:
        ordinal = len(self.operations)
        for transition in transitions:
            if transition["origin_operation_ordinal"] is None:
                transition["origin_operation_ordinal"] = ordinal
        self.operations.append({
            "operation_ordinal": ordinal, "at_ms": ns_to_ms(at_ns), "pool": pool,
            "cause": cause, "planner_tick_ordinal": tick, "origin_operation_ordinal": origin,
            "transitions": transitions, "state_after_batch": state,
            "topology_released_request_uuids": released,
        })
        return ordinal


def transition(worker_id: int, kind: str, prior: str | None, state: str,
                origin: int | None, reason: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"worker_id": worker_id, "transition": kind, "prior_state": prior,
                           "state": state}
    if reason is not None:  # as the reference, which writes a reason only when there is one
        out["reason"] = reason
    out["origin_operation_ordinal"] = origin
    return out


def common_origin(origins: list[int | None]) -> int | None:
    """The origin shared by every transition of an operation, else None."""
    found = set(origins)
    return found.pop() if len(found) == 1 else None


class Fleet:
    """One pool's workers through scaling: their states, start and stop times, origins."""

    __slots__ = ("drain_origin", "log", "pool", "start_ns", "start_origin", "startup_ns",
                 "state", "stop_ns")

    def __init__(self, pool: Pool, startup_ns: int, log: LifecycleLog) -> None:
        self.pool = pool
        self.log = log
        self.startup_ns = startup_ns  # 0: added workers are active at once (as the reference)
        n = len(pool.workers)
        self.state = [ACTIVE] * n
        self.start_ns = [0] * n
        self.stop_ns: list[int | None] = [None] * n
        self.start_origin: dict[int, int] = {}
        self.drain_origin: dict[int, int] = {}

    def ids(self, state: str) -> list[int]:
        return [w for w, s in enumerate(self.state) if s == state]

    def non_draining(self) -> int:
        return sum(1 for s in self.state if s in (ACTIVE, STARTING))

    def lifecycle_state(self) -> dict[str, list[int]]:
        return {"active": self.ids(ACTIVE), "starting": self.ids(STARTING),
                "draining": self.ids(DRAINING)}

    # -- applying a target -------------------------------------------------------------------

    def plan(self, target: int) -> tuple[int, list[int], list[int]]:
        """For a target: how many workers to add, the starting ones to cancel, the active ones
        to drain (highest ids first, as the reference)."""
        active = self.ids(ACTIVE)
        starting = self.ids(STARTING)
        effective = len(active) + len(starting)
        if target >= effective:
            return target - effective, [], []
        excess = effective - target
        cancel = starting[::-1][:excess]
        drain = active[::-1][:excess - len(cancel)]
        return 0, cancel, drain

    def added(self, worker_id: int, now: int) -> str:
        """A worker the pool just built: starting, or active at once without a start-up delay."""
        state = STARTING if self.startup_ns else ACTIVE
        self.state.append(state)
        self.start_ns.append(now)
        self.stop_ns.append(None)
        assert len(self.state) == worker_id + 1
        return state

    def cancel(self, worker_id: int, now: int) -> None:
        self.state[worker_id] = REMOVED
        self.stop_ns[worker_id] = now

    def drain(self, worker_id: int) -> None:
        self.state[worker_id] = DRAINING

    def ready(self, worker_id: int) -> bool:
        """A start-up delay elapsed: False when the start was cancelled meanwhile."""
        if self.state[worker_id] != STARTING:
            return False
        self.state[worker_id] = ACTIVE
        return True

    def removable(self) -> list[int]:
        """Draining workers that hold nothing any more."""
        pool = self.pool
        return [w for w in self.ids(DRAINING) if idle(pool, w)]

    def remove(self, worker_id: int, now: int) -> None:
        self.state[worker_id] = REMOVED
        self.stop_ns[worker_id] = now

    # -- what the run reports ----------------------------------------------------------------

    def worker_seconds(self, end_ns: int) -> float:
        """Provisioned worker time: from each start request to its removal or `end_ns`."""
        total = 0
        for start, stop in zip(self.start_ns, self.stop_ns, strict=True):
            last = end_ns if stop is None or stop > end_ns else stop
            if last > start:
                total += last - start
        return total / 1e9


def idle(pool: Pool, worker_id: int) -> bool:
    """The worker holds nothing: no pass in flight, no request on any rank (waiting, running,
    pending, reserved or in transfer as a P/D destination, or, on SGLang, activated and not yet
    running: `has_work`), no held P/D source."""
    worker = pool.workers[worker_id]
    if worker.busy or worker.deferred:
        return False
    return all(not (rank.running or rank.waiting or rank.pending or rank.connector
                    or rank.holding or rank.inbound or rank.has_work()
                    or _copying(rank.host))
               for rank in worker.ranks)


def _copying(client: HostClient | None) -> bool:
    """G2 (and G3) copies of the rank not yet delivered to it (stores still copying out
    included; a shared pool's copies in flight are the pool's, by owner)."""
    if client is None:
        return False
    if client.pending or client.prepared or client.outbox or client.delivered:
        return True
    g3 = client.g3  # G3 copies of the worker in flight, or finished and not yet consumed
    if g3 is not None and (g3.completed or any(job.owner == g3.worker
                                               for job in g3.tier.jobs.values())):
        return True
    pool = client.pool
    return pool.shared and any(t.owner is client for t in pool.transfers.values())

