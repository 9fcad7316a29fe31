"""One pass over a report's per-request rows into compact columns for the HTML report.

Rows may come from a file of unknown origin: every field read is type-checked, and a wrong one
is a `ReportShapeError` naming its JSON path. Rows are read one at a time (a streamed run hands
a `SpilledRows`), so memory is a few 8-byte floats per request.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from kvreplay.engine.simtime import HORIZON_MS, HORIZON_TEXT

POOL_ORDER = {"agg": 0, "prefill": 1, "decode": 2}


class ReportShapeError(ValueError):
    """A report that is not shaped as `kvreplay run` writes it; the message names the path,
    `run` the index of the report among those rendered together."""

    run: int | None = None


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object" if isinstance(value, Mapping) else type(value).__name__


def _at(path: str, key: str) -> str:
    """The JSON path of a field, built only for an error message (not for every field read)."""
    return f"{path}.{key}" if key else path


def number(value: Any, path: str, key: str = "", *, optional: bool = True,
           ) -> float | None:
    """A JSON number (not a boolean), or None when absent/null and `optional`."""
    kind = type(value)
    if kind is float:  # the common cases first: this runs for every field of every row
        return value  # type: ignore[no-any-return]
    if kind is int:
        return float(value)
    if value is None and optional:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise ReportShapeError(f"{_at(path, key)}: expected a number, found {_kind(value)}")


def instant(value: Any, path: str, key: str, *, optional: bool = True) -> float | None:
    """A simulated time or duration in ms: a number within the engine's horizon (2**62 ns),
    which no replay passes; the charts' time grid is built from these."""
    n = number(value, path, key, optional=optional)
    if n is not None and not -HORIZON_MS <= n <= HORIZON_MS:
        raise ReportShapeError(f"{_at(path, key)}: {value:.6g} ms is past the engine's horizon "
                               f"of {HORIZON_TEXT}: no replay reaches it")
    return n


def integer(value: Any, path: str, key: str = "") -> int | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ReportShapeError(f"{_at(path, key)}: expected an integer, found {_kind(value)}")


def mapping(value: Any, path: str) -> Mapping[str, Any]:
    if type(value) is dict or isinstance(value, Mapping):
        return value
    raise ReportShapeError(f"{path}: expected an object, found {_kind(value)}")


def listing(value: Any, path: str, key: str = "") -> list[Any]:
    if value is None:
        return []
    if isinstance(value, list):
        return value
    raise ReportShapeError(f"{_at(path, key)}: expected an array, found {_kind(value)}")


WorkerKey = tuple[str, int, int]  # pool, logical worker id, dp rank


@attrs.define
class WorkerLoad:
    """What one (pool, worker, rank) received: routing decisions and first-admission reuse."""

    requests: int = 0
    input_tokens: int = 0
    queued: int = 0
    queue_wait_ms: float = 0.0
    admissions: int = 0
    admitted_input_tokens: int = 0
    reused_tokens: int = 0
    host_tokens: int = 0


@attrs.define
class Columns:
    """The per-request facts the charts need, in row (uuid) order."""

    rows: int = 0
    ttft: array[float] = attrs.field(factory=lambda: array("d"))
    tpot: array[float] = attrs.field(factory=lambda: array("d"))
    e2e: array[float] = attrs.field(factory=lambda: array("d"))
    arrivals: array[float] = attrs.field(factory=lambda: array("d"))
    ends: array[float] = attrs.field(factory=lambda: array("d"))  # terminal times, every row
    admitted: array[float] = attrs.field(factory=lambda: array("d"))  # first admission or end
    completions: array[float] = attrs.field(factory=lambda: array("d"))
    other_ends: array[float] = attrs.field(factory=lambda: array("d"))  # rejected, canceled...
    queue_in: array[float] = attrs.field(factory=lambda: array("d"))  # router queue intervals
    queue_out: array[float] = attrs.field(factory=lambda: array("d"))
    admit_at: array[float] = attrs.field(factory=lambda: array("d"))  # first admissions
    admit_input: array[float] = attrs.field(factory=lambda: array("d"))
    admit_g1: array[float] = attrs.field(factory=lambda: array("d"))
    admit_host: array[float] = attrs.field(factory=lambda: array("d"))
    admit_g3: array[float] = attrs.field(factory=lambda: array("d"))  # of admit_host, from G3
    host_tier: bool = False
    g3_tier: bool = False
    workers: dict[WorkerKey, WorkerLoad] = attrs.field(factory=dict)
    overlap_shortfall: Counter[int] = attrs.field(factory=Counter)
    statuses: Counter[str] = attrs.field(factory=Counter)


def read_columns(rows: Iterable[Any]) -> Columns:
    """Columns of every row; ReportShapeError at the first field that is not as documented."""
    cols = Columns()
    for i, raw in enumerate(rows):
        _add_row(cols, mapping(raw, f"per_request[{i}]"), f"per_request[{i}]")
    return cols


def _add_row(cols: Columns, row: Mapping[str, Any], path: str) -> None:
    status = row.get("terminal_status")
    if not isinstance(status, str):
        raise ReportShapeError(f"{path}.terminal_status: expected a string, found {_kind(status)}")
    arrival = instant(row.get("arrival_time_ms"), path, "arrival_time_ms", optional=False)
    end = instant(row.get("terminal_time_ms"), path, "terminal_time_ms", optional=False)
    assert arrival is not None and end is not None
    input_length = integer(row.get("input_length"), path, "input_length") or 0
    cols.rows += 1
    cols.statuses[status] += 1
    cols.arrivals.append(arrival)
    cols.ends.append(max(end, arrival))
    if status == "completed":
        cols.completions.append(end)
        for key, column in (("ttft_ms", cols.ttft), ("itl_ms", cols.tpot),
                            ("e2e_latency_ms", cols.e2e)):
            value = number(row.get(key), path, key)
            if value is not None:
                column.append(value)
    else:
        cols.other_ends.append(end)
    routing = listing(row.get("routing_history"), path, "routing_history")
    first_worker: dict[str, WorkerKey] = {}
    for j, entry in enumerate(routing):
        placed = _route(cols, mapping(entry, f"{path}.routing_history[{j}]"),
                        f"{path}.routing_history[{j}]", input_length)
        first_worker.setdefault(placed[0], placed)
    admissions = listing(row.get("admission_history"), path, "admission_history")
    first_admit = instant(row.get("first_admit_ms"), path, "first_admit_ms")
    cols.admitted.append(max(arrival, min(end, first_admit if first_admit is not None else end)))
    if admissions:
        _first_admission(cols, mapping(admissions[0], f"{path}.admission_history[0]"),
                         f"{path}.admission_history[0]", input_length, first_worker)
        g3 = integer(row.get("first_admission_g3_reused_input_tokens"), path,
                     "first_admission_g3_reused_input_tokens")
        if g3 is not None:
            cols.g3_tier = True
        cols.admit_g3.append(float(min(g3 or 0, int(cols.admit_host[-1]))))


def _route(cols: Columns, entry: Mapping[str, Any], path: str, input_length: int) -> WorkerKey:
    pool = entry.get("pool")
    if not isinstance(pool, str):
        raise ReportShapeError(f"{path}.pool: expected a string, found {_kind(pool)}")
    key = (pool, integer(entry.get("logical_worker_id"), path, "logical_worker_id") or 0,
           integer(entry.get("dp_rank"), path, "dp_rank") or 0)
    load = cols.workers.get(key)
    if load is None:
        load = cols.workers[key] = WorkerLoad()
    load.requests += 1
    load.input_tokens += input_length
    wait = instant(entry.get("queue_wait_ms"), path, "queue_wait_ms") or 0.0
    entered = instant(entry.get("queue_entered_at_ms"), path, "queue_entered_at_ms")
    if entry.get("outcome") == "queued":
        load.queued += 1
        load.queue_wait_ms += wait
    if entered is not None:
        cols.queue_in.append(entered)
        cols.queue_out.append(entered + max(wait, 0.0))
    selected = integer(entry.get("selected_overlap_blocks"), path, "selected_overlap_blocks")
    best = integer(entry.get("best_available_overlap_blocks"), path,
                   "best_available_overlap_blocks")
    if selected is not None and best is not None:
        cols.overlap_shortfall[max(best - selected, 0)] += 1
    return key


def _first_admission(cols: Columns, entry: Mapping[str, Any], path: str, input_length: int,
                     first_worker: Mapping[str, WorkerKey]) -> None:
    """The first admission's reuse, split G1 / host when its pool has a host tier."""
    at = instant(entry.get("at_ms"), path, "at_ms", optional=False)
    assert at is not None
    reused = integer(entry.get("reused_input_tokens"), path, "reused_input_tokens") or 0
    host = integer(entry.get("host_reused_input_tokens"), path, "host_reused_input_tokens")
    if host is not None:
        cols.host_tier = True
    host = host or 0
    cols.admit_at.append(at)
    cols.admit_input.append(float(input_length))
    cols.admit_g1.append(float(max(reused - host, 0)))
    cols.admit_host.append(float(host))
    pool = entry.get("pool")
    key = first_worker.get(pool) if isinstance(pool, str) else None
    if key is not None:
        load = cols.workers[key]
        load.admissions += 1
        load.admitted_input_tokens += input_length
        load.reused_tokens += reused
        load.host_tokens += host


def worker_order(key: WorkerKey) -> tuple[int, str, int, int]:
    return (POOL_ORDER.get(key[0], len(POOL_ORDER)), key[0], key[1], key[2])
