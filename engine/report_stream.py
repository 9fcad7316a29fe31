"""Reports whose memory follows the requests in flight, not the trace.

`ReportStream` is the engine's record sink: each measured record, as it ends, enters the
summary accumulator and (when rows are wanted) is serialized at once into an anonymous spill
file, so the record itself can go. `finish` gives the canonical report dict with a
`SpilledRows` in place of the per-request list; `write_report` writes the canonical text
chunk by chunk (the same bytes as `dumps_report` of the full dict).
"""

from __future__ import annotations

import json
import tempfile
from array import array
from collections.abc import Iterator, Mapping
from itertools import pairwise
from typing import IO, Any

from kvreplay.engine.canonical_json import canonical_json
from kvreplay.engine.records import RequestRecord
from kvreplay.engine.report import (
    CoreResult,
    ReportError,
    Sla,
    SummaryAccumulator,
    facts_from_core,
    listed,
    non_finite,
    per_request_row,
    report_meta,
    uuid_for,
)

_ROW_INDENT = " " * 4  # a row sits in the top-level object's list


def row_text(row: Mapping[str, Any]) -> str:
    """A row as the canonical report prints it inside `per_request` (indented, no separator)."""
    try:
        return _ROW_INDENT + canonical_json(row, _ROW_INDENT)
    except ValueError as exc:
        raise ReportError(f"request {row.get('uuid')}: {exc}") from exc




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
        self._end = 0

    def add(self, ordinal: int, row: Mapping[str, Any]) -> None:
        data = row_text(row).encode("utf-8", "surrogatepass")
        if self._ordinals and ordinal <= self._ordinals[-1]:
            self._sorted = False
        self._file.seek(self._end)
        self._file.write(data)
        self._ordinals.append(ordinal)
        self._offsets.append(self._end)
        self._lengths.append(len(data))
        self._end += len(data)

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

    def texts(self) -> Iterator[str]:
        """Each row's canonical text, in uuid order."""
        self._file.flush()
        for i in self._order():
            self._file.seek(self._offsets[i])
            yield self._file.read(self._lengths[i]).decode("utf-8", "surrogatepass")

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

    def __call__(self, record: RequestRecord) -> None:
        self.count += 1
        self.summary.add(record)
        if self.rows is not None and listed(record):
            self.rows.add(record.ordinal, per_request_row(record))

    def finish(self, result: CoreResult, *, wall_time_ms: float | None = None,
               version: str | None = None) -> dict[str, Any]:
        """The report: streamed records plus the ones the run left open (never terminal)."""
        facts = facts_from_core(result.facts, sla=self.sla, wall_time_ms=wall_time_ms)
        for record in result.records:
            self(record)
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
            yield "["
            for i, text in enumerate(value.texts()):
                yield ("," if i else "") + "\n" + text
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
