"""The KV router's queue: new requests wait here while every scheduler of the pool is busy.

A scheduler is busy when its booked prefill tokens exceed `queue_threshold` x its token budget.
An arriving request queues when the queue is not empty or every scheduler is busy; queued
requests are routed (with the costs of that moment) whenever a prefill completes or a request
is released, while some scheduler is not busy. Order (the reference's max-heap on a score, ties
to the earlier enqueue): `fcfs` earliest arrival first, `lcfs` latest first, `wspt` the largest
1 / max(prompt - cached, 1) first, where `cached` is the longest device prefix on any scheduler
when the request queued.
"""

from __future__ import annotations

import heapq
from typing import Generic, TypeVar

T = TypeVar("T")


class RouterQueue(Generic[T]):
    __slots__ = ("_count", "_heap", "_removed", "policy")

    def __init__(self, policy: str) -> None:
        if policy not in ("fcfs", "lcfs", "wspt"):
            raise ValueError(f"unknown queue policy {policy!r}")
        self.policy = policy
        self._heap: list[tuple[float, int, int, T]] = []
        self._count = 0
        self._removed: set[int] = set()

    def __len__(self) -> int:
        return len(self._heap) - len(self._removed)

    def push(self, key: int, item: T, arrival_ms: float, prompt: int, cached: int) -> None:
        """Queue `item` (known by `key`, unique among queued items)."""
        if self.policy == "fcfs":
            score = -arrival_ms
        elif self.policy == "lcfs":
            score = arrival_ms
        else:
            score = 1.0 / max(prompt - cached, 1)
        self._count += 1
        heapq.heappush(self._heap, (-score, self._count, key, item))

    def pop(self) -> T:
        while True:
            _, _, key, item = heapq.heappop(self._heap)
            if key in self._removed:
                self._removed.discard(key)
                continue
            return item

    def remove(self, key: int) -> bool:
        """Withdraw a queued item (a cancelled request); False when it is not queued."""
        if key in self._removed or not any(k == key for _, _, k, _ in self._heap):
            return False
        self._removed.add(key)
        return True
