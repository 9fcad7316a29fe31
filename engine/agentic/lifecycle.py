"""The agentic lifecycle transcript (`aisimulate.agentic.lifecycle.v1`) and its digest.

One compact JSON object per event, in record order: `{"schema", "ordinal", "at_ms", "play_id",
"request_id", "event", "status"?}` (`request_id` absent on play_quiescent, `status` only on
causal_terminal). The digest is BLAKE3 of `aisimulate-agentic-lifecycle-v1\\0` followed by the
JSONL bytes, as the reference computes it; it is computed incrementally, and the lines go to an
optional sink (`kvreplay run --lifecycle FILE`).
"""

from __future__ import annotations

from collections.abc import Callable

import blake3
from kvreplay.engine.traces.agentic import serde

SCHEMA = "aisimulate.agentic.lifecycle.v1"
DOMAIN = b"aisimulate-agentic-lifecycle-v1\0"


class Lifecycle:
    __slots__ = ("_hash", "count", "counts", "sink")

    def __init__(self, sink: Callable[[str], None] | None = None) -> None:
        self._hash = blake3.blake3(DOMAIN)
        self.count = 0
        self.counts: dict[str, int] = {}
        self.sink = sink

    def event(self, at_ms: float, play_id: str, request_id: str | None, event: str,
              status: str | None = None) -> None:
        record: dict[str, object] = {"schema": SCHEMA, "ordinal": self.count,
                                     "at_ms": float(at_ms), "play_id": play_id}
        if request_id is not None:
            record["request_id"] = request_id
        record["event"] = event
        if status is not None:
            record["status"] = status
        line = serde.dumps(record) + "\n"
        self._hash.update(line.encode())
        self.count += 1
        self.counts[event] = self.counts.get(event, 0) + 1
        if self.sink is not None:
            self.sink(line)

    def digest(self) -> str:
        return self._hash.hexdigest()
