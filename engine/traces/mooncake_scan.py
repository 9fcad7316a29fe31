"""The checking pass over a Mooncake trace: every row checked, and a compact index for the replay.

The pass streams the file once. It keeps a few machine integers per row (byte offset, line
number, link to the same session's next turn), a small record per *named* session, and the
checked rows themselves while they hold at most KEPT_HASH_IDS hash ids in all: the replay pass
takes a kept row as it is (each is read, decoded and checked once) and re-reads the others by
offset when they are due, so a trace past that bound is never held in memory.
"""

from __future__ import annotations

import io
from array import array
from typing import Any

from kvreplay.engine.traces.jsonl import LineError, decode_object, iter_lines, locate
from kvreplay.engine.traces.mooncake_rows import MooncakeRow, check_row, unknown_fields
from kvreplay.engine.traces.rules import diag, unreadable
from kvreplay.schema.diagnostics import Diagnostic, Related, Span
from kvreplay.schema.files import open_regular

MAX_LISTED_ERRORS = 200
# The checked rows kept for the replay (TraceIndex.kept), counted in hash ids: about 40 bytes
# each, so at most ~40 MB (the 12k-row conversation trace holds 288,500).
KEPT_HASH_IDS = 1_000_000


class TraceIndex:
    """What the replay pass needs to stream a checked trace (rows are the included rows, 0-based).

    `next_turn[i]` is the row of the same session's next turn (-1: the session ends);
    `is_first[i]` marks first turns; `first_order` lists first turns in release order when that
    differs from file order (timestamps that decrease), else None; `min_first_ts` is the earliest
    first-turn timestamp (None when no first turn has one).
    """

    def __init__(self, path: str, display: str, data: bytes | None = None) -> None:
        self.path = path
        self.display = display
        self.data = data  # the trace's bytes when it was converted from another format
        self.offsets = array("q")
        self.lines = array("q")
        self.next_turn = array("q")
        self.is_first = bytearray()
        self.first_rows = array("q")
        self.first_order: array[int] | None = None
        self.min_first_ts: float | None = None
        self.multi_turn = False
        self.kept: dict[int, MooncakeRow] = {}  # row -> its checked row (see KEPT_HASH_IDS)
        self.kept_budget = KEPT_HASH_IDS

    @property
    def rows(self) -> int:
        return len(self.offsets)


class _Session:
    __slots__ = ("first_line", "included", "last_line", "last_row", "last_ts", "turns")

    def __init__(self, line: int, included: bool) -> None:
        self.first_line = line
        self.last_line = line
        self.included = included
        self.last_row = -1
        self.last_ts: float | None = None
        self.turns = 0


class _Scan:
    def __init__(self, index: TraceIndex, *, block_size: int, timestamps: bool, speedup: float,
                 stop_requests: int | None, stop_sessions: int | None) -> None:
        self.index = index
        self.speedup = speedup
        self.block_size = block_size
        self.timestamps = timestamps
        self.stop_requests = stop_requests
        self.stop_sessions = stop_sessions
        self.sessions: dict[str, _Session] = {}
        self.session_count = 0
        self.valid_rows = 0
        self.found: list[Diagnostic] = []
        self.errors = 0
        self.unlisted = 0
        self.last_error = (0, 0)  # (line, column): where the TRUNCATED note sorts after all
        self.unknown_seen: set[str] = set()
        self.first_ts = array("d")
        self.monotone = True

    def add(self, d: Diagnostic) -> None:
        if d.severity == "error":
            self.errors += 1
            self.last_error = max(self.last_error, (d.line or 0, d.column or 0))
            if self.errors > MAX_LISTED_ERRORS:
                self.unlisted += 1
                return
        self.found.append(d)

    def row(self, number: int, offset: int, raw: bytes) -> None:
        file = self.index.display
        try:
            text, obj = decode_object(raw, first_line=offset == 0)
        except LineError as exc:
            self.add(diag(exc.rule, exc.message, file=file, line=number, column=exc.column))
            return
        for key in unknown_fields(obj):
            if key not in self.unknown_seen:
                self.unknown_seen.add(key)
                where = locate(text, key)
                self.add(diag("TRACE-UNKNOWN-FIELD",
                              f"field `{key}` is not read by the mooncake reader and is ignored",
                              file=file, path=f"$.{key}", line=number, severity="warning",
                              column=where[0] if where else None,
                              end_column=where[1] if where else None))
        row, problems = check_row(obj, text, file=file, line=number, block_size=self.block_size)
        for d in problems:
            self.add(d)
        self.turn(number, offset, obj, text, row)

    def turn(self, number: int, offset: int, obj: dict[str, Any], text: str,
             row: MooncakeRow | None) -> None:
        """Session bookkeeping; an invalid row still counts as a turn of its session."""
        named = obj.get("session_id")
        session = self.sessions.get(named) if isinstance(named, str) else None
        first = session is None
        if first:
            included = self.stop_sessions is None or self.session_count < self.stop_sessions
            self.session_count += 1
            session = _Session(number, included)
            if isinstance(named, str):
                self.sessions[named] = session
        assert session is not None
        turn_index = session.turns
        session.turns += 1
        if row is None:
            session.last_line = number
            return
        self.valid_rows += 1
        self.check_gap(number, text, row, session, turn_index)
        if row.timestamp is not None:
            session.last_ts = row.timestamp
        session.last_line = number
        if not session.included or (self.stop_requests is not None
                                     and self.index.rows >= self.stop_requests):
            return
        self.include(number, offset, row, session, turn_index == 0)

    def check_gap(self, number: int, text: str, row: MooncakeRow, session: _Session,
                  turn_index: int) -> None:
        file = self.index.display
        if turn_index == 0:
            if row.delay is not None and row.delay != 0.0:
                where = locate(text, "delay")
                self.add(diag("TRACE-SESSION",
                              f"`delay` must be 0 (or absent) on the first turn of session "
                              f"{row.session_id!r}, found {row.delay:g}",
                              file=file, path="$.delay", line=number,
                              column=where[0] if where else None,
                              end_column=where[1] if where else None))
            if self.timestamps and row.timestamp is None:
                self.add(diag("TRACE-MISSING",
                              "required field `timestamp` is missing: the first turn of a "
                              "session needs one with trace_timestamps load",
                              file=file, path="$", line=number, column=1,
                              hint="add `timestamp` (ms), or replay with concurrency load"))
            return
        if row.delay is not None or row.timestamp is None:
            return
        previous = Related("previous turn of this session",
                           Span(file=file, path="$.timestamp", line=session.last_line))
        where = locate(text, "timestamp")
        column, end = where if where is not None else (None, None)
        if session.last_ts is None:
            self.add(diag("TRACE-ORDER",
                          f"cannot infer the gap before this turn of session {row.session_id!r}: "
                          "no earlier turn of the session has a `timestamp`",
                          file=file, path="$.timestamp", line=number, column=column,
                          end_column=end, hint="give this row an explicit `delay` (ms)",
                          related=(previous,)))
        elif row.timestamp < session.last_ts:
            self.add(diag("TRACE-ORDER",
                          f"`timestamp` {row.timestamp:g} is earlier than the previous turn's "
                          f"{session.last_ts:g} in session {row.session_id!r} (gap "
                          f"{row.timestamp - session.last_ts:g} ms)",
                          file=file, path="$.timestamp", line=number, column=column,
                          end_column=end, related=(previous,)))

    def include(self, number: int, offset: int, row: MooncakeRow, session: _Session,
                first: bool) -> None:
        index = self.index
        position = index.rows
        cost = len(row.hash_ids) + len(row.output_token_ids or ()) + 1
        if cost <= index.kept_budget:
            index.kept_budget -= cost
            index.kept[position] = row
        index.offsets.append(offset)
        index.lines.append(number)
        index.next_turn.append(-1)
        index.is_first.append(1 if first else 0)
        if first:
            index.first_rows.append(position)
            ts = row.timestamp
            if ts is not None:
                if self.first_ts and ts < self.first_ts[-1]:
                    self.monotone = False
                if index.min_first_ts is None or ts < index.min_first_ts:
                    index.min_first_ts = ts
            self.first_ts.append(ts if ts is not None else 0.0)
        elif session.last_row >= 0:
            # An invalid earlier turn leaves nothing to link (and the index is dropped then).
            index.next_turn[session.last_row] = position
            index.multi_turn = True
        session.last_row = position

    def finish(self) -> None:
        index = self.index
        if self.timestamps and not self.monotone and index.min_first_ts is not None:
            # Release order is by normalized release time, then file order (a stable sort),
            # exactly as the replay computes release times.
            ts, low, speedup = self.first_ts, index.min_first_ts, self.speedup
            order = sorted(range(len(ts)), key=lambda i: (ts[i] - low) / speedup)
            index.first_order = array("q", (index.first_rows[i] for i in order))
        if self.unlisted:
            line, column = self.last_error
            self.found.append(diag("TRACE-TRUNCATED",
                                   f"{self.unlisted} more error(s) in this trace are not listed",
                                   file=index.display, line=line, column=column or None,
                                   severity="note"))
        if self.valid_rows == 0 and self.errors == 0:
            self.found.append(diag("TRACE-EMPTY", "the trace holds no request (no non-blank line)",
                                   file=index.display))


def scan_mooncake(path: str, display: str, *, block_size: int, timestamps: bool,
                  speedup: float = 1.0, stop_requests: int | None = None,
                  stop_sessions: int | None = None, data: bytes | None = None,
                  ) -> tuple[TraceIndex | None, list[Diagnostic]]:
    """Check every row of one trace file (or of `data`, Mooncake rows converted from another
    format); the index is None when any error was found."""
    index = TraceIndex(path, display, data)
    scan = _Scan(index, block_size=block_size, timestamps=timestamps, speedup=speedup,
                 stop_requests=stop_requests, stop_sessions=stop_sessions)
    try:
        with (open_regular(path) if data is None else io.BytesIO(data)) as stream:
            for number, offset, raw in iter_lines(stream):
                scan.row(number, offset, raw)
    except OSError as exc:
        return None, [unreadable(exc, display)]
    scan.finish()
    has_errors = any(d.severity == "error" for d in scan.found) or scan.unlisted > 0
    return (None if has_errors else index), scan.found
