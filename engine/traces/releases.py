"""Release bookkeeping shared by the workloads: a heap of due requests and the open sessions."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any

from kvreplay.engine.traces.request import TraceRequest, WorkloadDefaults

# (release_ms, tie-break..., request, session): the last two items are what release() uses.
Entry = tuple[Any, ...]


class HeapReleases(WorkloadDefaults):
    """The Workload protocol's release side; subclasses refill `_heap` in `_fill()`."""

    _heap: list[Entry]
    _open: dict[int, Any]
    peak_open: int = 0

    def _fill(self) -> None:
        raise NotImplementedError

    def next_release_ms(self) -> float | None:
        self._fill()
        return float(self._heap[0][0]) if self._heap else None

    def release(self, now_ms: float) -> Sequence[TraceRequest]:
        out: list[TraceRequest] = []
        self._fill()
        while self._heap and self._heap[0][0] <= now_ms:
            *_, request, session = heapq.heappop(self._heap)
            self._open[request.ordinal] = session
            out.append(request)
            self._fill()
        self.peak_open = max(self.peak_open, len(self._open))
        return out
