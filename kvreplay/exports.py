"""`kvreplay run --export FILE`: the per-request rows as CSV, JSON Lines or Parquet (by suffix).

JSONL holds each report row as it is (compact, sorted keys). CSV and Parquet have one column per
scalar field, in the order of `COLUMNS`, and hold the nested fields (admission and routing
histories, the agentic identity) as compact JSON text. Parquet needs pyarrow
(`pip install 'kvreplay[parquet]'`).
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import IO, Any, Protocol

from kvreplay.csv_cells import line

# (column, type) for CSV and Parquet; `json` columns hold compact JSON text.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("uuid", "string"), ("request_id", "string"), ("session_id", "string"),
    ("turn_index", "int"), ("play_id", "string"), ("agentic_phase", "string"),
    ("terminal_status", "string"), ("arrival_time_ms", "float"), ("dispatched_at_ms", "float"),
    ("first_admit_ms", "float"), ("first_token_ms", "float"), ("last_token_ms", "float"),
    ("terminal_time_ms", "float"), ("ttft_ms", "float"), ("ttst_ms", "float"),
    ("e2e_latency_ms", "float"), ("itl_ms", "float"), ("input_length", "int"),
    ("output_length", "int"), ("requested_output_length", "int"),
    ("reused_input_tokens", "int"), ("decode_reused_input_tokens", "int"),
    ("first_admission_g1_reused_input_tokens", "int"),
    ("first_admission_host_reused_input_tokens", "int"),
    ("first_admission_g3_reused_input_tokens", "int"), ("admission_count", "int"),
    ("readmission_count", "int"), ("prefill_admit_ms", "float"), ("source_held_ms", "float"),
    ("destination_reserved_ms", "float"), ("destination_activated_ms", "float"),
    ("decode_admit_ms", "float"), ("source_released_ms", "float"),
    ("admission_history", "json"), ("routing_history", "json"), ("agentic", "json"),
)
FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".parquet": "parquet"}
_INSTALL = "pip install 'kvreplay[parquet]'"
REINSTALL = f"reinstall it ({_INSTALL} --force-reinstall)"  # an installed pyarrow that fails
_BATCH = 50_000  # Parquet rows per row group: memory stays bounded on long traces


class TextSink(Protocol):
    def write(self, text: str, /) -> Any: ...


class ExportError(Exception):
    """An export that cannot be made (unknown suffix, pyarrow missing): exit 2."""


def export_format(path: str) -> str:
    """The format `path` asks for by its suffix; ExportError if none, or Parquet without
    pyarrow (checked before any work)."""
    suffix = os.path.splitext(path)[1].lower()
    kind = FORMATS.get(suffix)
    if kind is None:
        raise ExportError(f"--export {path}: unknown format {suffix or '(no suffix)'}; use "
                          ".csv, .jsonl or .parquet")
    if kind == "parquet":
        _need_pyarrow(path)
    return kind


def pyarrow_problem() -> tuple[bool, str] | None:
    """None when pyarrow's Parquet module imports, else (installed, why not): absent, or
    present but broken (a missing shared library, a numpy it was not built for)."""
    if importlib.util.find_spec("pyarrow") is None:
        return False, "not installed"
    try:
        importlib.import_module("pyarrow.parquet")
    except (ImportError, OSError) as exc:
        return True, f"{type(exc).__name__}: {exc}"
    return None


def _need_pyarrow(path: str) -> None:
    """ExportError unless pyarrow imports: absent, or present but broken, it says which extra to
    install."""
    problem = pyarrow_problem()
    if problem is None:
        return
    installed, why = problem
    if not installed:
        raise ExportError(f"--export {path}: Parquet needs pyarrow, which is not installed "
                          f"({_INSTALL}); .csv and .jsonl need nothing")
    raise ExportError(f"--export {path}: Parquet needs pyarrow, which is installed but does not "
                      f"import ({why}); {REINSTALL}; .csv and .jsonl need nothing")


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def flat(row: Mapping[str, Any]) -> list[Any]:
    """A row's values in COLUMNS order (None where absent; JSON text for nested fields)."""
    values: list[Any] = []
    for name, kind in COLUMNS:
        value = row.get(name)
        values.append(_compact(value) if kind == "json" and value is not None else value)
    return values


def write_jsonl(rows: Iterable[Mapping[str, Any]], out: TextSink) -> None:
    for row in rows:
        out.write(_compact(row) + "\n")


def write_csv(rows: Iterable[Mapping[str, Any]], out: TextSink) -> None:
    """CSV with a header; empty cells are nulls; floats as Python prints them; text quoted
    per RFC 4180 and formulas neutralized (kvreplay.csv_cells)."""
    chunk = [line(name for name, _ in COLUMNS)]
    for row in rows:
        chunk.append(line(flat(row)))
        if len(chunk) == 1024:
            out.write("".join(chunk))
            chunk.clear()
    out.write("".join(chunk))


def write_parquet(rows: Iterable[Mapping[str, Any]], out: IO[bytes]) -> None:
    # pyarrow has no type information (and may be absent where the types are checked)
    import pyarrow as pa  # type: ignore[import-untyped, import-not-found, unused-ignore]
    import pyarrow.parquet as pq  # type: ignore[import-untyped, import-not-found, unused-ignore]

    types = {"string": pa.string(), "int": pa.int64(), "float": pa.float64(),
             "json": pa.string()}
    schema = pa.schema([(name, types[kind]) for name, kind in COLUMNS])
    with pq.ParquetWriter(out, schema) as writer:
        for batch in _batches(rows):
            columns = list(zip(*batch, strict=True))
            writer.write_table(pa.table(
                [pa.array(col, type=schema.field(i).type) for i, col in enumerate(columns)],
                schema=schema))


def _batches(rows: Iterable[Mapping[str, Any]]) -> Iterator[list[list[Any]]]:
    batch: list[list[Any]] = []
    for row in rows:
        batch.append(flat(row))
        if len(batch) == _BATCH:
            yield batch
            batch = []
    if batch:
        yield batch
