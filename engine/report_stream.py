"""Reports whose memory follows the requests in flight, not the trace.

`ReportStream` is the engine's record sink: each measured record, as it ends, enters the
summary accumulator and (when rows are wanted) is printed at once (`row_text`) into an anonymous
spill file, so the record itself can go. `finish` gives the canonical report dict with a
`SpilledRows` in place of the per-request list; `write_report` writes the canonical text
chunk by chunk (the same bytes as `dumps_report` of the full dict), the rows in large pieces
read back in uuid order.
"""

from __future__ import annotations

import json
import tempfile
from array import array
from collections.abc import Iterator, Mapping
from itertools import pairwise
from typing import IO, Any

from kvreplay.engine.records import RequestRecord
from kvreplay.engine.report import (
    CoreResult,
    ReportError,
    Sla,
    SummaryAccumulator,
    facts_from_core,
    listed,
    non_finite,
    report_meta,
    uuid_for,
)
from kvreplay.engine.row_text import mapping_text, row_text

_BUFFER = 1 << 18  # bytes of rows gathered before each write to the spill file
_WINDOW = 1 << 20  # bytes read from the spill file at once when reading rows back
_BEHIND = _WINDOW // 4  # of which before the row asked for: rows end a little out of order
_BATCH = 256  # records gathered before they are accounted
_PIECE = 1 << 20  # bytes of rows per piece of the written report
_ROW_SEPARATOR = b",\n"  # between two rows of the report's list (canonical_json's)


class SpilledRows:
    """Per-request rows held in a temporary file (deleted on close, or by the OS if killed),
    read back in uuid (ordinal) order."""

    def __init__(self, folder: str | None = None) -> None:
        # Closed by close(); an anonymous file, so a killed run leaves nothing behind.
        self._file: IO[bytes] = tempfile.TemporaryFile(  # noqa: SIM115
            prefix=".kvreplay-rows-", dir=folder)
        self._ordinals: list[int] = []  # agentic ordinals can exceed 64 bits
        self._offsets = array("q")
        self._lengths = array("q")
        self._sorted = True
        self._end = 0  # bytes of rows given, written or pending
        self._pending: list[str] = []  # rows not written yet, _pending_size bytes
        self._pending_size = 0
        self._read = False

    def add(self, ordinal: int, row: Mapping[str, Any]) -> None:
        """A row given as a mapping."""
        self.add_text(ordinal, mapping_text(row))

    def add_text(self, ordinal: int, text: str) -> None:
        """A row's canonical text (`row_text`)."""
        if self._ordinals and ordinal <= self._ordinals[-1]:
            self._sorted = False
        size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        self._ordinals.append(ordinal)
        self._offsets.append(self._end)
        self._lengths.append(size)
        self._end += size
        self._pending.append(text)
        self._pending_size += size
        if self._pending_size >= _BUFFER:
            self._write()

    def _write(self) -> None:
        """Append the pending rows to the file, in one write."""
        if self._read:  # rows were read back since: append at the end again
            self._file.seek(self._end - self._pending_size)
            self._read = False
        self._file.write("".join(self._pending).encode("utf-8", "surrogatepass"))
        self._pending = []
        self._pending_size = 0

    def __len__(self) -> int:
        return len(self._ordinals)

    def _order(self) -> Iterator[int]:
        if self._sorted:
            return iter(range(len(self._ordinals)))
        ordinals = self._ordinals
        order = sorted(range(len(ordinals)), key=ordinals.__getitem__)
        for a, b in pairwise(order):
            if ordinals[a] == ordinals[b]:
                raise ReportError(f"two records share the uuid {uuid_for(ordinals[a])}")
        return iter(order)

    @property
    def size(self) -> int:
        """Bytes of row text held."""
        return self._end

    def _rows(self) -> Iterator[bytes]:
        """Each row's bytes in uuid order, read a window of the file at a time (rows are
        spilled as they end, roughly in uuid order)."""
        self._write()
        self._file.flush()
        self._read = True
        window, start = b"", 0
        offsets, lengths = self._offsets, self._lengths
        for i in self._order():
            at = offsets[i] - start
            length = lengths[i]
            if at < 0 or at + length > len(window):
                start = max(offsets[i] - _BEHIND, 0)
                self._file.seek(start)
                window = self._file.read(max(_WINDOW, offsets[i] - start + length))
                at = offsets[i] - start
            yield window[at:at + length]

    def texts(self) -> Iterator[str]:
        """Each row's canonical text, in uuid order."""
        for data in self._rows():
            yield data.decode("utf-8", "surrogatepass")

    def pieces(self) -> Iterator[str]:
        """The rows' canonical texts in uuid order, separated as the report's list separates
        them, in pieces of about a megabyte that end between two rows."""
        piece: list[bytes] = []
        size = 0
        for data in self._rows():
            piece.append(data)
            size += len(data)
            if size >= _PIECE:
                yield _ROW_SEPARATOR.join(piece).decode("utf-8", "surrogatepass")
                piece, size = [], 0
        if piece:
            yield _ROW_SEPARATOR.join(piece).decode("utf-8", "surrogatepass")

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """Each row as a dict (for callers that want the data, not the text)."""
        for text in self.texts():
            row: dict[str, Any] = json.loads(text)
            yield row

    def close(self) -> None:
        self._file.close()


class ReportStream:
    """The engine's record sink for one run."""

    def __init__(self, sla: Sla | None, *, rows: bool, folder: str | None = None) -> None:
        self.summary = SummaryAccumulator(sla)
        self.sla = sla
        self.rows = SpilledRows(folder) if rows else None
        self.count = 0
        self._batch: list[RequestRecord] = []

    def __call__(self, record: RequestRecord) -> None:
        self._batch.append(record)
        if len(self._batch) >= _BATCH:
            self._take()

    def _take(self) -> None:
        """Account the records gathered so far: a batch at a time keeps the report's code and
        data hot in the processor's caches between stretches of the replay's."""
        batch, self._batch = self._batch, []
        self.count += len(batch)
        self.summary.add_all(batch)
        rows = self.rows
        if rows is not None:
            add_text = rows.add_text
            for record in batch:
                if listed(record):
                    add_text(record.ordinal, row_text(record))

    def finish(self, result: CoreResult, *, wall_time_ms: float | None = None,
               version: str | None = None) -> dict[str, Any]:
        """The report: streamed records plus the ones the run left open (never terminal)."""
        facts = facts_from_core(result.facts, sla=self.sla, wall_time_ms=wall_time_ms)
        self._batch.extend(result.records)
        self._take()
        summary = self.summary.finish(self.count, facts)
        rows: SpilledRows | list[Any] = self.rows if self.rows is not None else []
        return {"summary": summary, "per_request": rows,
                "meta": report_meta(summary, facts, version)}

    def close(self) -> None:
        if self.rows is not None:
            self.rows.close()


def _nested(value: Any) -> str:
    """A top-level member's value as the canonical text prints it (2-space indent inside)."""
    text = json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
    return text.replace("\n", "\n  ")


def report_chunks(report: Mapping[str, Any]) -> Iterator[str]:
    """The canonical report text in pieces: byte for byte `dumps_report(report)`, with a
    `SpilledRows` list streamed from its file."""
    keys = sorted(report)
    yield "{"
    for n, key in enumerate(keys):
        value = report[key]
        yield ("," if n else "") + "\n  " + json.dumps(key, ensure_ascii=False) + ": "
        if isinstance(value, SpilledRows):
            if not len(value):
                yield "[]"
                continue
            yield "[\n"
            for i, piece in enumerate(value.pieces()):
                if i:
                    yield ",\n"
                yield piece
            yield "\n  ]"
            continue
        bad = non_finite(value, f"$.{key}")
        if bad is not None:
            raise ReportError(f"non-finite number at {bad}: a report must hold finite numbers "
                              "only")
        yield _nested(value)
    yield "\n}\n"


def write_report(report: Mapping[str, Any], out: IO[str]) -> None:
    """Write the canonical report text to an open text file."""
    for chunk in report_chunks(report):
        out.write(chunk)
