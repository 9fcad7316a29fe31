"""A run's request records: which are open, which are measured, and the measured window.

`open` holds the records released and not yet terminal; a terminal record is measured: kept in
`done`, or handed to the `sink` as it ends, so that memory follows the requests in flight. A
P/D record whose prefill side has not yet let go of its KV stays `unsettled` until it does (its
release time is reported). A workload with a warmup measures from its barrier
(`open_measurement`): what ended before is preparation, and reported times become relative to
the barrier (`origin_ns`).
"""

from __future__ import annotations

from collections.abc import Callable

from kvreplay.engine.records import RequestRecord, shift_times
from kvreplay.engine.simtime import ns_to_ms


class Ledger:
    __slots__ = ("done", "last_terminal", "measuring", "open", "origin_ns", "prep_records",
                 "sink", "streamed", "unsettled", "window")

    def __init__(self, sink: Callable[[RequestRecord], None] | None, measuring: bool) -> None:
        self.sink = sink
        self.measuring = measuring
        self.open: dict[int, RequestRecord] = {}
        self.done: list[RequestRecord] = []
        self.unsettled: dict[int, RequestRecord] = {}
        self.prep_records: list[RequestRecord] = []
        self.streamed = 0  # records handed to the sink
        self.last_terminal: float | None = None  # ms, measured records
        self.window: tuple[float, float] | None = None  # (first arrival, last end), completed
        self.origin_ns = 0  # start of the measured window (the warmup barrier)

    def opened(self, rec: RequestRecord) -> None:
        self.open[rec.ordinal] = rec

    def finished(self, rec: RequestRecord) -> None:
        """A record is terminal: measured (kept or streamed), unless preparation dropped it."""
        if self.open.pop(rec.ordinal, None) is None:
            return  # released before an aborted warmup: not measured
        end = rec.terminal_time_ms
        assert end is not None
        if self.last_terminal is None or end > self.last_terminal:
            self.last_terminal = end
        if rec.terminal_status == "completed" and rec.first_admit_ms is not None:
            first, last = self.window or (rec.arrival_time_ms, end)
            self.window = (min(first, rec.arrival_time_ms), max(last, end))
        if self.sink is None or not self.measuring:
            self.done.append(rec)
        elif rec.source_held_ms is not None and rec.source_released_ms is None:
            self.unsettled[rec.ordinal] = rec  # the prefill side reports its release later
        else:
            self._stream(rec)

    def settled(self, ordinal: int) -> None:
        """The prefill side let go of a request's KV: a record held back for it leaves now."""
        rec = self.unsettled.pop(ordinal, None)
        if rec is not None:
            self._stream(rec)

    def _stream(self, rec: RequestRecord) -> None:
        assert self.sink is not None
        if self.origin_ns:
            shift_times(rec, ns_to_ms(self.origin_ns))
        self.streamed += 1
        self.sink(rec)

    def open_measurement(self, origin_ns: int) -> None:
        """The warmup barrier at `origin_ns`: the records so far are preparation."""
        self.origin_ns = origin_ns
        self.measuring = True
        self.prep_records, self.done = [*self.done, *self.open.values()], []
        self.open = {}
        self.last_terminal = self.window = None

    def drop(self) -> None:
        """The warmup aborted: what ran was preparation, and nothing will be measured."""
        self.prep_records.extend([*self.done, *self.open.values()])
        self.done, self.open = [], {}
        self.last_terminal = self.window = None

    def admission(self, ordinal: int) -> tuple[float | None, int | None]:
        """(first admission time, tokens it reused) of a recent request (preparation)."""
        for rec in (self.open.get(ordinal), *reversed(self.done)):
            if rec is not None and rec.ordinal == ordinal:
                first = rec.admission_history[0] if rec.admission_history else None
                return rec.first_admit_ms, None if first is None else first.reused_input_tokens
        return None, None

    # -- the result --------------------------------------------------------------------------

    def records(self) -> list[RequestRecord]:
        """Every record not streamed, by ordinal, its times relative to the origin."""
        records = sorted([*self.done, *self.open.values(), *self.unsettled.values()],
                         key=lambda r: r.ordinal)
        if self.origin_ns:
            origin = ns_to_ms(self.origin_ns)
            for rec in records:
                shift_times(rec, origin)
        return records

    def duration_ms(self) -> float:
        """The last measured terminal time, relative to the origin (0 without one)."""
        last = self.last_terminal
        if last is None:
            return 0.0
        return last - ns_to_ms(self.origin_ns) if self.origin_ns else last

    def window_ms(self) -> float:
        """The completed requests' span: first arrival to last end (0 without one)."""
        if self.window is None:
            return 0.0
        first, end = self.window
        if self.origin_ns:
            origin = ns_to_ms(self.origin_ns)
            return max((end - origin) - (first - origin), 0.0)
        return max(end - first, 0.0)
