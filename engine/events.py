"""The replay's events and their one order (engine.md section 8).

An event is (time in ns, kind, key, push number, payload). The queue pops them in that order:
by time; at one instant by kind, in EventKind's order; within a kind by its key (what each key
is, below); then in the order they were pushed. Together with the loop's phases between the
events of an instant (loop.py), this is the reference's equal-time order.
"""

from __future__ import annotations

import heapq
from enum import IntEnum
from typing import Any


class EventKind(IntEnum):
    """Event kinds in their order at one instant, each with what orders its events there."""

    # A G2 copy completes, or a shared pool takes its next bandwidth step; before the pass
    # completions at the same instant. Key: stores before loads, then pool, then transfer id
    # (a shared pool's step after all of them).
    HOST_DONE = 0
    # The G3 tier's next step: copies finish or start moving bytes (g3_runtime.py); after the
    # G2 copies, before the pass completions at the same instant. Key: 0.
    G3_DONE = 1
    # Scaling: a starting worker's start-up delay elapses; it joins its router's view before
    # the instant's pass completions place anything (the reference's ready events precede its
    # handoff placements and arrivals). Key: the worker's gid.
    WORKER_UP = 2
    # A worker's pass or fast-forwarded stretch ends. Key: the worker's order (by identity;
    # P/D: every prefill worker before every decode worker, whenever their passes started).
    PASS_DONE = 3
    # Router-visible KV events of a rank land in the router's index (kv_event_lag_ms). Key: the
    # publishing worker's gid (one rank's batches in publication order by push number).
    KV_VISIBLE = 4
    # A P/D handoff's KV arrives at its destination. Key: the request's arrival number (the
    # reference's handoff ids), not the order of reservation.
    TRANSFER_DONE = 5
    # The P/D handoff actions queued at this instant, run FIFO (handoff.py). Key: 0.
    ACTIONS = 6
    # A P/D worker restarts (before the instant's arrivals). Key: the worker's gid.
    WORKER_READY = 7
    # Scaling: a policy tick. Marks the tick due; it runs once the instant has settled (after
    # its arrivals and pass starts, loop.py). Key: 0.
    SCALING_TICK = 8


HOST_DONE = EventKind.HOST_DONE
G3_DONE = EventKind.G3_DONE
WORKER_UP = EventKind.WORKER_UP
PASS_DONE = EventKind.PASS_DONE
KV_VISIBLE = EventKind.KV_VISIBLE
TRANSFER_DONE = EventKind.TRANSFER_DONE
ACTIONS = EventKind.ACTIONS
WORKER_READY = EventKind.WORKER_READY
SCALING_TICK = EventKind.SCALING_TICK
# The kinds whose instant counts for the clock the report bills (the others may land after the
# run's last engine event: lagged router events, and scaling events once the workload is done).
BILLED = tuple(kind not in (KV_VISIBLE, WORKER_UP, SCALING_TICK) for kind in EventKind)
# (kind, key) after every event of an instant: where its arrivals and worker restarts run.
AFTER_EVENTS = (len(EventKind), 0)

# (time ns, kind, key, push number, payload); the push number is unique, so payloads are never
# compared. Payload by kind: HOST_DONE a Transfer or a shared pool's version (host_runtime.py),
# G3_DONE the tier's version (g3_runtime.py),
# PASS_DONE (worker, its version), KV_VISIBLE (pool, scheduler id, events, tier),
# TRANSFER_DONE the destination Seq, ACTIONS None, WORKER_READY the Worker, WORKER_UP (pool
# index, worker id), SCALING_TICK None.
Event = tuple[int, EventKind, int, int, Any]


class EventQueue:
    """Pending events in the order above: `heap` is a heapq heap of them, which the loop pops
    straight off (its hot path: heapq.heappop(queue.heap) is the next event)."""

    __slots__ = ("heap", "pushed")

    def __init__(self) -> None:
        self.heap: list[Event] = []
        self.pushed = 0

    def __len__(self) -> int:
        return len(self.heap)

    def push(self, at: int, kind: EventKind, key: int, payload: Any) -> None:
        self.pushed += 1
        heapq.heappush(self.heap, (at, kind, key, self.pushed, payload))
