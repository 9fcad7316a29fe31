"""The agentic lifecycle transcript (`aisimulate.agentic.lifecycle.v1`) and its digest.

One compact JSON object per event, in record order: `{"schema", "ordinal", "at_ms", "play_id",
"request_id", "event", "status"?}` (`request_id` absent on play_quiescent, `status` only on
causal_terminal). The digest is BLAKE3 of `aisimulate-agentic-lifecycle-v1\\0` followed by the
JSONL bytes, as the reference computes it; it is computed incrementally (the lines hashed in
chunks of CHUNK: one update per chunk, not per line), and the lines go to an optional sink
(`kvreplay run --lifecycle FILE`) as they are written.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import blake3

from kvreplay.engine.traces.agentic import serde

SCHEMA = "aisimulate.agentic.lifecycle.v1"
DOMAIN = b"aisimulate-agentic-lifecycle-v1\0"
_HEAD = f'{{"schema":"{SCHEMA}","ordinal":'
CHUNK = 256  # lines hashed per update


class Lifecycle:
    __slots__ = ("_hash", "_pending", "_quoted", "count", "counts", "sink")

    def __init__(self, sink: Callable[[str], None] | None = None) -> None:
        self._hash = blake3.blake3(DOMAIN)
        self.count = 0
        self.counts: dict[str, int] = {}
        self.sink = sink
        self._quoted: dict[str, str] = {}  # id -> its JSON string
        self._pending: list[str] = []  # lines not hashed yet (fewer than CHUNK)

    def event(self, at_ms: float, play_id: str, request_id: str | None, event: str,
              status: str | None = None) -> None:
        # The serde JSON of {schema, ordinal, at_ms, play_id, request_id?, event, status?},
        # written directly (a replay writes several lines per request).
        quoted = self._quoted
        play = quoted.get(play_id)
        if play is None:
            play = quoted[play_id] = json.dumps(play_id, ensure_ascii=False)
        line = f'{_HEAD}{self.count},"at_ms":{serde.f64(float(at_ms))},"play_id":{play}'
        if request_id is not None:
            rid = quoted.get(request_id)
            if rid is None:
                rid = quoted[request_id] = json.dumps(request_id, ensure_ascii=False)
            line += f',"request_id":{rid}'
        line += f',"event":"{event}"'
        if status is not None:
            line += f',"status":"{status}"'
        line += "}\n"
        pending = self._pending
        pending.append(line)
        if len(pending) >= CHUNK:
            self._hash.update("".join(pending).encode())
            pending.clear()
        self.count += 1
        self.counts[event] = self.counts.get(event, 0) + 1
        if self.sink is not None:
            self.sink(line)

    def forget(self, play_id: str) -> None:
        """A settled play writes no more events: its quoted id can go."""
        self._quoted.pop(play_id, None)

    def digest(self) -> str:
        if self._pending:
            self._hash.update("".join(self._pending).encode())
            self._pending.clear()
        return self._hash.hexdigest()
