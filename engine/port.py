"""The narrow port through which a KV tier's runtime (G2, G3) acts on the event loop.

A tier runtime lives beside the loop: the loop calls its hooks at engine boundaries (a pass
start, a pass end, an arrival, its own events), and the runtime answers only through this port:
the clock, its own events, a worker to wake (or to start now), and KV events to publish to the
router.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kvreplay.engine.events import EventKind
    from kvreplay.engine.scheduler import Rank
    from kvreplay.engine.worker import Worker


class LoopPort(Protocol):
    @property
    def now(self) -> int:
        """Simulated time, ns."""
        ...

    def push(self, at: int, kind: EventKind, key: int, payload: Any) -> None:
        """Schedule an event (events.py: the kind and key order it among its instant's)."""
        ...

    def wake(self, worker: Worker) -> None:
        """The worker has work at `now` from outside its passes (a copy completed): a busy one
        ends its fast-forwarded stretch at the next pass boundary; an idle one starts a pass
        when its pool restarts workers."""
        ...

    def publish(self, rank: Rank, events: list[tuple[int, int]], visible_ns: int,
                tier: int) -> None:
        """KV events of a rank for the router, visible from `visible_ns` (+ the event lag)."""
        ...

    def start_now(self, worker: Worker) -> bool:
        """Start an idle worker's pass now, before the instant's arrivals (the G3 tier wakes
        workers so); False when it has nothing that moves."""
        ...
