"""Helpers for the workload and report tests: trace files, traffic sections, a toy event loop,
and request records built from token times."""

from __future__ import annotations

import heapq
import itertools
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import attrs

from kvreplay.engine.records import Admission, RequestRecord
from kvreplay.engine.traces.request import TraceRequest, Workload

TRAFFIC_KEYS = (
    "source_type", "trace_format", "trace_paths", "trace_block_size",
    "weka_nested_timestamp_basis", "input_tokens", "output_tokens", "cached_prefix_tokens",
    "turns_per_session", "shared_prefix_ratio", "num_prefix_groups", "inter_turn_delay_ms",
    "load_type", "concurrency", "request_rate", "arrival_seed", "speedup", "agentic_lanes",
    "agentic_snapshot_seed", "agentic_warmup", "agentic_profile", "stop_requests",
    "stop_sessions",
)


def traffic(**keys: Any) -> dict[str, Any]:
    """A native `traffic` section: every key present, null unless given."""
    section: dict[str, Any] = dict.fromkeys(TRAFFIC_KEYS)
    section.update(trace_paths=[], agentic_warmup=False)
    unknown = set(keys) - set(TRAFFIC_KEYS)
    assert not unknown, unknown
    section.update(keys)
    return section


def trace_traffic(path: Path | str, *, fmt: str = "mooncake", load: str = "trace_timestamps",
                  block_size: int = 4, **keys: Any) -> dict[str, Any]:
    return traffic(source_type="trace", trace_format=fmt, trace_paths=[str(path)],
                   trace_block_size=block_size, load_type=load, **keys)


def write_trace(path: Path, rows: Iterable[dict[str, Any] | str | bytes]) -> Path:
    """One line per row: dicts as JSON, strings and bytes verbatim."""
    with open(path, "wb") as out:
        for row in rows:
            if isinstance(row, dict):
                out.write(json.dumps(row).encode() + b"\n")
            elif isinstance(row, str):
                out.write(row.encode() + b"\n")
            else:
                out.write(row + b"\n")
    return path


@attrs.frozen
class Done:
    """A released request and when the toy loop ended it."""

    ordinal: int
    session_id: str | None
    turn_index: int | None
    release_ms: float
    input_length: int
    output_length: int
    prompt: tuple[tuple[int, int], ...]
    request_id: str
    terminal_ms: float


Latency = Callable[[TraceRequest], float]
Outcome = Callable[[TraceRequest], tuple[str, int | None]]


def drive(workload: Workload, latency: Latency = lambda r: 10.0 + 2.0 * max(r.output_length - 1, 0),
          outcome: Outcome = lambda r: ("completed", None)) -> list[Done]:
    """Run a workload against an unbounded server: each request ends `latency` after release.

    Terminals at a time are reported before releases at that time (the engine's phase order).
    Returns requests in release order (time, then the workload's own order).
    """
    pending: list[tuple[float, int, TraceRequest]] = []
    finished: list[tuple[float, int, Done]] = []
    sequence = 0
    while True:
        release_at = workload.next_release_ms()
        end_at = pending[0][0] if pending else None
        if release_at is None and end_at is None:
            break
        if end_at is not None and (release_at is None or end_at <= release_at):
            now, position, request = heapq.heappop(pending)
            status, produced = outcome(request)
            workload.on_terminal(request, now, status=status, output_tokens=produced)
            finished.append((request.release_ms, position, Done(
                request.ordinal, request.session_id, request.turn_index, request.release_ms,
                request.input_length, request.output_length, request.prompt,
                request.request_id, now)))
            continue
        assert release_at is not None
        for request in workload.release(release_at):
            heapq.heappush(pending, (release_at + latency(request), sequence, request))
            sequence += 1
    assert workload.exhausted()
    return [done for _, _, done in sorted(finished, key=lambda item: (item[0], item[1]))]


def record(ordinal: int, arrival: float, tokens: list[float], *, first_admit: float | None = None,
           terminal: float | None = None, status: str | None = "completed",
           input_length: int = 8, requested: int | None = None, reused: int = 0,
           first_reused: int | None = None, session_id: str | None = None,
           turn_index: int | None = None) -> RequestRecord:
    """A record whose token times are `tokens`; gaps become (gap, count) runs."""
    r = RequestRecord(ordinal, "", arrival, input_length,
                      requested if requested is not None else len(tokens),
                      session_id=session_id, turn_index=turn_index)
    r.first_admit_ms = arrival if first_admit is None else first_admit
    r.output_length = len(tokens)
    if tokens:
        r.first_token_ms, r.last_token_ms = tokens[0], tokens[-1]
        r.second_token_ms = tokens[1] if len(tokens) > 1 else None
    r.terminal_time_ms = terminal if terminal is not None else (tokens[-1] if tokens else None)
    r.terminal_status = status
    r.reused_input_tokens = reused
    r.admission_history.append(Admission(0, "agg", 0, r.first_admit_ms,
                                         reused if first_reused is None else first_reused,
                                         None, None, False))
    runs: list[tuple[float, int]] = []
    for before, after in itertools.pairwise(tokens):
        gap = after - before
        if runs and runs[-1][0] == gap:
            runs[-1] = (gap, runs[-1][1] + 1)
        else:
            runs.append((gap, 1))
    r.itl_gaps = runs
    return r
