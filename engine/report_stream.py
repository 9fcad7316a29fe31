"""Reports whose memory follows the requests in flight, not the trace.

`ReportStream` is the engine's record sink: each measured record, as it ends, enters the
summary accumulator and (when rows are wanted) is printed at once (`row_text`) into an anonymous
spill file, so the record itself can go. `finish` gives the canonical report dict with a
`SpilledRows` in place of the per-request list; `write_report` writes the canonical text
chunk by chunk (the same bytes as `dumps_report` of the full dict), the rows in large pieces
read back in uuid order.
"""

from __future__ import annotations

import codecs
import json
import operator
from array import array
from collections.abc import Callable, Iterator, Mapping
from itertools import accumulate, chain, islice, pairwise, repeat
from typing import IO, Any, Protocol

from kvreplay.engine.records import RequestRecord
from kvreplay.engine.report import (
    ReportError,
    Sla,
    SummaryAccumulator,
    facts_from_core,
    listed,
    non_finite,
    report_meta,
    uuid_for,
    with_telemetry,
)
from kvreplay.engine.result import RunResult

_HELD = 512  # rows held back to be spilled in uuid order, though they end out of order
_BUFFER = 1 << 18  # bytes of rows gathered before each write to the spill file
_WINDOW = 1 << 20  # bytes read from the spill file at once when reading rows back
_BEHIND = _WINDOW // 4  # of which before the row asked for, for rows spilled out of order
_BATCH = 256  # records gathered before they are accounted
_PIECE = 1 << 20  # bytes of rows per piece of the written report
_SEPARATOR = ",\n"  # between two rows of the report's list (canonical_json's)


_ordinal = operator.itemgetter(0)  # of a held (ordinal, text) row
_text = operator.itemgetter(1)


class SpilledRows:
    """Per-request rows held in a temporary file (deleted on close, or by the OS if killed),
    read back in uuid (ordinal) order.

    Rows end roughly in uuid order: the last _HELD given wait in memory, so the file takes them
    in uuid order, each followed by the list's separator, and the report copies it as it is.
    A row later than that (a request that ran far longer than the _HELD after it) leaves the
    file out of order: it is read back row by row then, through windows of the file."""

    def __init__(self, folder: str | None = None) -> None:
        import tempfile  # (and random, shutil): only a run that keeps rows needs it

        # Closed by close(); an anonymous file, so a killed run leaves nothing behind.
        self._file: IO[bytes] = tempfile.TemporaryFile(  # noqa: SIM115
            prefix=".kvreplay-rows-", dir=folder)
        self._held: list[tuple[int, str]] = []
        self._ordinals: list[int] = []  # of the rows spilled; agentic ones can exceed 64 bits
        self._offsets = array("q")
        self._lengths = array("q")  # bytes of each row's text (its separator follows)
        self._sorted = True  # the file holds the rows in uuid order
        self._utf8 = True  # no row holds a lone surrogate (the file is UTF-8)
        self._end = 0  # bytes spilled, written or pending
        self._pending: list[str] = []  # texts and separators not written yet
        self._pending_size = 0
        self._read = False

    def add(self, ordinal: int, row: Mapping[str, Any]) -> None:
        """A row given as a mapping."""
        from kvreplay.engine.row_text import mapping_text  # its printers: only for rows

        self.add_text(ordinal, mapping_text(row))

    def add_text(self, ordinal: int, text: str) -> None:
        """A row's canonical text (`row_text`)."""
        self.add_texts([(ordinal, text)])

    def add_texts(self, rows: list[tuple[int, str]]) -> None:
        """Rows' (ordinal, canonical text)."""
        self._held += rows
        if len(self._held) >= _HELD + _BATCH:
            self._spill(len(self._held) - _HELD)

    def _spill(self, count: int) -> None:
        """Spill the `count` held rows of the smallest uuids (a nearly sorted list: cheap), in
        C-level passes over them rather than a Python loop."""
        held = self._held
        held.sort(key=_ordinal)
        rows = held[:count]
        del held[:count]
        if not rows:
            return
        ordinals = list(map(_ordinal, rows))
        texts = list(map(_text, rows))
        if (self._ordinals and ordinals[0] <= self._ordinals[-1]) or any(
                map(operator.ge, ordinals, islice(ordinals, 1, None))):
            self._sorted = False  # a row later than those held back, or a uuid twice
        sizes = (list(map(len, texts)) if all(map(str.isascii, texts))
                 else list(map(self._encoded_size, texts)))
        self._ordinals += ordinals
        self._lengths.extend(sizes)
        end = self._end
        self._offsets.extend(accumulate(map(len(_SEPARATOR).__add__, sizes[:-1]), initial=end))
        end += sum(sizes) + len(_SEPARATOR) * len(sizes)
        self._pending += chain.from_iterable(zip(texts, repeat(_SEPARATOR)))
        self._pending_size += end - self._end
        self._end = end
        if self._pending_size >= _BUFFER:
            self._write()

    def _encoded_size(self, text: str) -> int:
        try:
            return len(text.encode("utf-8"))
        except UnicodeEncodeError:  # a lone surrogate: kept, and refused if written as UTF-8
            self._utf8 = False
            return len(text.encode("utf-8", "surrogatepass"))

    def _write(self) -> None:
        """Append the pending rows to the file, in one write."""
        if self._read:  # rows were read back since: append at the end again
            self._file.seek(self._end - self._pending_size)
            self._read = False
        self._file.write("".join(self._pending).encode("utf-8", "surrogatepass"))
        self._pending = []
        self._pending_size = 0

    def _settle(self) -> None:
        """Every row in the file, before reading it back."""
        self._spill(len(self._held))
        self._write()
        self._file.flush()
        self._read = True

    def __len__(self) -> int:
        return len(self._ordinals) + len(self._held)

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
        """Bytes of row text (and separators) held."""
        return self._end + sum(len(text) + len(_SEPARATOR) for _, text in self._held)

    def _rows(self) -> Iterator[bytes]:
        """Each row's bytes in uuid order, read a window of the file at a time."""
        self._settle()
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
        them, in pieces of about a megabyte."""
        decoder = codecs.getincrementaldecoder("utf-8")("surrogatepass")
        for block in self._blocks():
            yield decoder.decode(block)
        yield decoder.decode(b"", final=True)

    def blocks(self) -> Iterator[bytes]:
        """`pieces` encoded in UTF-8 (UnicodeEncodeError for a lone surrogate, as writing the
        text to a UTF-8 file raises), without decoding and encoding it again."""
        if not self._utf8:
            for piece in self.pieces():
                yield piece.encode("utf-8")
            return
        yield from self._blocks()

    def _blocks(self) -> Iterator[bytes]:
        """The spill file's bytes of `pieces`, a megabyte at a time: the file as it is (the
        last separator aside), or its rows one by one when it is out of uuid order."""
        self._settle()
        if not self._sorted:
            yield from self._reordered_blocks()
            return
        self._file.seek(0)
        left = self._end - len(_SEPARATOR)
        while left > 0:
            block = self._file.read(min(_PIECE, left))
            if not block:
                raise ReportError("the rows' spill file is shorter than what was written")
            left -= len(block)
            yield block

    def _reordered_blocks(self) -> Iterator[bytes]:
        separator = _SEPARATOR.encode()
        parts: list[bytes] = []
        size = 0
        for n, data in enumerate(self._rows()):
            if n:
                parts.append(separator)
            parts.append(data)
            size += len(data)
            if size >= _PIECE:
                yield b"".join(parts)
                parts, size = [], 0
        if parts:
            yield b"".join(parts)

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
        if self.rows is not None:
            from kvreplay.engine.row_text import row_text  # its printers: only for rows

            self.rows.add_texts([(r.ordinal, row_text(r)) for r in batch if listed(r)])

    def finish(self, result: RunResult, *, wall_time_ms: float | None = None,
               version: str | None = None) -> dict[str, Any]:
        """The report: streamed records plus the ones the run left open (never terminal)."""
        from kvreplay.engine.collect import no_collections

        facts = facts_from_core(result.facts, sla=self.sla, wall_time_ms=wall_time_ms)
        with no_collections():  # as build_report: the records' and rows' objects all live on
            self._batch.extend(result.records)
            self._take()
            summary = self.summary.finish(self.count, facts)
        rows: SpilledRows | list[Any] = self.rows if self.rows is not None else []
        return with_telemetry({"summary": summary, "per_request": rows,
                               "meta": report_meta(summary, facts, version)}, facts)

    def close(self) -> None:
        if self.rows is not None:
            self.rows.close()


def _nested(value: Any) -> str:
    """A top-level member's value as the canonical text prints it (2-space indent inside)."""
    text = json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
    return text.replace("\n", "\n  ")


def report_parts(report: Mapping[str, Any]) -> Iterator[str | SpilledRows]:
    """The canonical report text in pieces, a `SpilledRows` standing for its rows' text (its
    `pieces`, or its `blocks` for a binary file)."""
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
            yield value
            yield "\n  ]"
            continue
        bad = non_finite(value, f"$.{key}")
        if bad is not None:
            raise ReportError(f"non-finite number at {bad}: a report must hold finite numbers "
                              "only")
        yield _nested(value)
    yield "\n}\n"


def report_chunks(report: Mapping[str, Any]) -> Iterator[str]:
    """The canonical report text in pieces: byte for byte `dumps_report(report)`, with a
    `SpilledRows` list streamed from its file."""
    for part in report_parts(report):
        if isinstance(part, SpilledRows):
            yield from part.pieces()
        else:
            yield part


class TextOut(Protocol):
    def write(self, text: str, /) -> object: ...


def write_report(report: Mapping[str, Any], out: TextOut,
                 binary: Callable[[bytes], object] | None = None,
                 progress: Callable[[float], object] | None = None) -> None:
    """Write the canonical report text to `out`; given `binary`, the spilled rows go there as
    the UTF-8 bytes of their text, as they are in the spill file (no decoding and encoding of
    the bulk of the report), and `progress` hears the share of them written."""
    for part in report_parts(report):
        if isinstance(part, str):
            out.write(part)
            continue
        total, written = max(part.size, 1), 0
        if binary is not None:
            for block in part.blocks():
                binary(block)
                written += len(block)
                if progress is not None:
                    progress(min(written / total, 1.0))
            continue
        for piece in part.pieces():
            out.write(piece)
            written += len(piece)
            if progress is not None:
                progress(min(written / total, 1.0))
