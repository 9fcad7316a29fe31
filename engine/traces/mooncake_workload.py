"""Replaying a checked Mooncake trace as a Workload, streamed from the file.

Semantics are the reference engine's (probed, see docs/traces-and-reports.md):

- rows sharing a `session_id` are the turns of one session, in file order; a row without one is a
  single-turn session of its own;
- a session's first turn is released at its normalized timestamp (trace_timestamps load), or when
  the closed loop gives the session a slot (concurrency load: at most N sessions active, a session
  keeps its slot across all its turns);
- every later turn is released when the previous turn ends (completed or rejected) plus its gap:
  the row's `delay`, else the difference to the previous turn's timestamp (divided by `speedup`);
- equal release times go by session order (first appearance in the file), then turn;
- `mooncake-delta`: a turn's prompt is every earlier turn's prompt and completed output plus its
  own rows' tokens.

Only first turns due at the earliest pending time are read ahead; a later turn's row is read when
its predecessor ends (taken from the rows the check kept, else re-read from the file). Pending
state is bounded by the sessions in flight and the kept rows (mooncake_scan.KEPT_HASH_IDS),
whatever the file size.
"""

from __future__ import annotations

import heapq
import io
from collections.abc import Iterator
from typing import BinaryIO

from kvreplay.engine.traces.errors import WorkloadError
from kvreplay.engine.traces.jsonl import LineError, decode_object
from kvreplay.engine.traces.mooncake_rows import MooncakeRow, check_row
from kvreplay.engine.traces.mooncake_scan import TraceIndex
from kvreplay.engine.traces.releases import HeapReleases
from kvreplay.engine.traces.request import TraceRequest, runs_from_hash_ids
from kvreplay.engine.traces.rules import diag
from kvreplay.engine.traces.values import Runs, output_runs
from kvreplay.schema.diagnostics import Diagnostic
from kvreplay.schema.files import open_regular

_ENDS_SESSION = frozenset({"canceled", "failed"})


class _Session:
    __slots__ = ("history", "key", "last_ts", "output_ids", "row", "session_id", "turn")

    def __init__(self, key: int, session_id: str | None) -> None:
        self.key = key
        self.session_id = session_id
        self.row = key
        self.turn = 0
        self.last_ts: float | None = None
        self.history: Runs = ()
        self.output_ids: tuple[int, ...] | None = None


_Entry = tuple[float, int, int, TraceRequest, _Session]


class MooncakeWorkload(HeapReleases):
    """A Workload over one checked trace file (see the module docstring for the semantics)."""

    def __init__(self, index: TraceIndex, *, block_size: int, delta: bool,
                 concurrency: int | None, speedup: float = 1.0) -> None:
        self._index = index
        self._block_size = block_size
        self._delta = delta
        self._concurrency = concurrency
        self._speedup = speedup if concurrency is None else 1.0
        self._session_metadata = index.multi_turn or concurrency is not None
        self._order = index.first_order if index.first_order is not None else index.first_rows
        self._cursor = 0
        self._peeked: tuple[MooncakeRow, float] | None = None
        self._heap: list[_Entry] = []
        self._open: dict[int, _Session] = {}
        self._active = 0
        self._stream: BinaryIO | None = None
        self.peak_pending = 0
        self.diagnostics: list[Diagnostic] = []  # warnings found while building the workload
        self.peak_open = 0
        if concurrency is not None:
            self._activate(0.0)

    @property
    def total_requests(self) -> int:
        """Rows to replay (fewer run when a canceled turn ends its session early)."""
        return self._index.rows

    # --- Workload protocol ---------------------------------------------------------------

    def on_terminal(self, request: TraceRequest, now_ms: float, *, status: str = "completed",
                    output_tokens: int | None = None) -> None:
        session = self._open.pop(request.ordinal, None)
        if session is None:
            raise ValueError(f"on_terminal for a request this workload has not released: "
                             f"{request!r}")
        following = self._index.next_turn[session.row]
        if following < 0 or status in _ENDS_SESSION:
            self._session_ended(now_ms)
            return
        if self._delta and status == "completed":
            emitted = request.output_length if output_tokens is None else output_tokens
            session.history += output_runs(session.output_ids, emitted, request.ordinal)
        row = self._read(following)
        if row.delay is not None:
            gap = row.delay
        elif row.timestamp is not None and session.last_ts is not None:
            gap = row.timestamp - session.last_ts
        else:
            gap = 0.0
        session.row = following
        session.turn += 1
        self._push(now_ms + gap / self._speedup, session, row)

    def token_order(self) -> Iterator[Runs]:
        """Each replayed row's own prompt runs, in file order (the reference numbers trace
        token values in that order, whatever order the rows arrive in)."""
        kept = self._index.kept
        with self._reopen() as stream:
            for row_index in range(self._index.rows):
                row = kept.get(row_index) or self._read(row_index, stream)
                yield runs_from_hash_ids(row.hash_ids, self._block_size, row.input_length)

    def exhausted(self) -> bool:
        done = (self._cursor >= len(self._order) and self._peeked is None and not self._heap
                and not self._open)
        if done:
            self.close()
        return done

    # --- internals -----------------------------------------------------------------------

    def close(self) -> None:
        """Close the trace file (it reopens if rows are needed again)."""
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def __del__(self) -> None:
        if getattr(self, "_stream", None) is not None:
            self.close()

    def _fill(self) -> None:
        """Trace load: queue every first turn due no later than the earliest pending release."""
        if self._concurrency is not None:
            return
        while True:
            if self._peeked is None:
                if self._cursor >= len(self._order):
                    return
                row = self._read(self._order[self._cursor])
                assert row.timestamp is not None and self._index.min_first_ts is not None
                self._peeked = (row, (row.timestamp - self._index.min_first_ts) / self._speedup)
            row, at = self._peeked
            if self._heap and at > self._heap[0][0]:
                return
            key = self._order[self._cursor]
            self._peeked = None
            self._cursor += 1
            self._push(at, self._new_session(key, row), row)

    def _activate(self, now_ms: float) -> None:
        """Concurrency load: give free slots to the next sessions in file order."""
        assert self._concurrency is not None
        while self._active < self._concurrency and self._cursor < len(self._order):
            key = self._order[self._cursor]
            self._cursor += 1
            self._active += 1
            row = self._read(key)
            self._push(now_ms, self._new_session(key, row), row)

    def _session_ended(self, now_ms: float) -> None:
        if self._concurrency is not None:
            self._active -= 1
            self._activate(now_ms)

    def _new_session(self, key: int, row: MooncakeRow) -> _Session:
        session_id = None
        if self._session_metadata:
            session_id = row.session_id if row.session_id is not None else f"request_{row.line}"
        return _Session(key, session_id)

    def _push(self, at: float, session: _Session, row: MooncakeRow) -> None:
        if row.timestamp is not None:
            session.last_ts = row.timestamp
        prompt = runs_from_hash_ids(row.hash_ids, self._block_size, row.input_length)
        if self._delta:
            session.history += prompt
            session.output_ids = row.output_token_ids
            prompt = session.history
        request = TraceRequest(
            ordinal=row.line - 1,
            request_id=row.request_id if row.request_id is not None else "",
            release_ms=at,
            input_length=sum(count for _, count in prompt),
            output_length=row.output_length,
            prompt=prompt,
            session_id=session.session_id,
            turn_index=session.turn if self._session_metadata else None,
        )
        if self._delta:
            request.output = output_runs(session.output_ids, row.output_length, request.ordinal)
        heapq.heappush(self._heap, (at, session.key, session.turn, request, session))
        self.peak_pending = max(self.peak_pending, len(self._heap))

    def _reopen(self) -> BinaryIO:
        index = self._index
        try:
            # a trace converted from another format reads from its bytes
            return open_regular(index.path) if index.data is None else io.BytesIO(index.data)
        except OSError as exc:
            raise WorkloadError([diag("TRACE-PATH", f"cannot reopen the trace file: "
                                      f"{exc.strerror or exc}", file=index.display)]) from None

    def _read(self, row_index: int, stream: BinaryIO | None = None) -> MooncakeRow:
        index = self._index
        if stream is None:
            kept = index.kept.pop(row_index, None)  # each row is replayed once
            if kept is not None:
                return kept
            if self._stream is None:
                self._stream = self._reopen()  # kept open across calls
            stream = self._stream
        stream.seek(index.offsets[row_index])
        raw = stream.readline()
        line = index.lines[row_index]
        try:
            _, obj = decode_object(raw, first_line=index.offsets[row_index] == 0)
        except LineError as exc:
            row, problems = None, [diag(exc.rule, exc.message, file=index.display, line=line)]
        else:
            row, problems = check_row(obj, raw.decode("utf-8"), file=index.display, line=line,
                                      block_size=self._block_size)
        if row is None:
            raise WorkloadError([diag("TRACE-PATH", "the trace file changed while it was being "
                                      "replayed", file=index.display, line=line), *problems])
        return row
