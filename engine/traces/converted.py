"""Workloads of the formats read by their own readers and replayed as another one.

`dynamo` (request.trace.v1, one or several files; dynamo_trace.py): a standard trace becomes
Mooncake rows at their start times, an agentic one (requests with `agent_context`) a dependency
graph replayed like an Agentic Mooncake v2 file. `applied_compute_agentic` (one session per
line; applied_compute.py) becomes Mooncake session turns, under concurrency load. The Mooncake
rows are checked and streamed by the Mooncake reader from memory, so a replay of a converted
trace is the replay of its `kvreplay trace convert` output (tests compare the two).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kvreplay.engine.traces.applied_compute import mooncake_text, read_applied_compute
from kvreplay.engine.traces.dynamo_trace import read_dynamo
from kvreplay.engine.traces.mooncake_scan import scan_mooncake
from kvreplay.engine.traces.mooncake_workload import MooncakeWorkload

if TYPE_CHECKING:
    from kvreplay.engine.agentic.driver import AgenticWorkload
    from kvreplay.engine.traces.traffic import _Fields

MAX_DYNAMO_FILES = 4096


def converted_workload(f: _Fields, traffic: Mapping[str, Any], *, base_dir: str,
                       trace_paths: Sequence[str] | None, model: str | None,
                       engine_block_size: int | None,
                       ) -> MooncakeWorkload | AgenticWorkload | None:
    from kvreplay.engine.traces.traffic import _paths

    fmt = traffic.get("trace_format")
    paths = _paths(traffic, base_dir, trace_paths)
    if not paths or (fmt != "dynamo" and len(paths) != 1):
        many = "one or more trace paths" if fmt == "dynamo" else "exactly one trace path"
        f.error("TRACE-PATH", "trace_paths", f"{fmt} traffic needs {many}, found {len(paths)}")
        return None
    if fmt == "applied_compute_agentic":
        return _applied_compute(f, traffic, paths[0])
    return _dynamo(f, traffic, paths, model=model, engine_block_size=engine_block_size)


def _applied_compute(f: _Fields, traffic: Mapping[str, Any],
                     path: tuple[str, str]) -> MooncakeWorkload | None:
    load = traffic.get("load_type")
    if load != "concurrency":
        f.error("WORKLOAD-LOAD", "load_type", "applied_compute_agentic traces record no "
                f"first-turn times: load_type must be concurrency, found {load!r}",
                hint="set traffic.load: {type: concurrency, concurrency: N}")
    concurrency = (f.integer("concurrency", 1, required="with concurrency load")
                   if load == "concurrency" else None)
    block_size = f.integer("trace_block_size", 1, 1 << 20,
                           required="for applied_compute_agentic traces (tokens per block)")
    ratio = f.number("shared_prefix_ratio", 0.0, 1.0) or 0.0
    groups = f.integer("num_prefix_groups", 0, (1 << 32) - 1) or 0
    if ratio > 0 and groups == 0:
        f.error("WORKLOAD-VALUE", "num_prefix_groups",
                "`num_prefix_groups` must be positive when shared_prefix_ratio is positive")
    f.ignored("speedup", "with concurrency load (recorded gaps are kept)")
    stops = {key: f.integer(key, 1) for key in ("stop_requests", "stop_sessions")}
    if block_size is None or concurrency is None or any(d.severity == "error"
                                                        for d in f.found):
        return None
    rows, found = read_applied_compute(path[0], path[1], block_size=block_size,
                                       shared_prefix_ratio=ratio, num_prefix_groups=groups)
    f.found.extend(found)
    if rows is None:
        return None
    return _mooncake(f, path, mooncake_text(rows), block_size, concurrency=concurrency,
                     speedup=1.0, **stops)


def _dynamo(f: _Fields, traffic: Mapping[str, Any], paths: list[tuple[str, str]], *,
            model: str | None, engine_block_size: int | None,
            ) -> MooncakeWorkload | AgenticWorkload | None:
    from kvreplay.engine.traces.traffic import _agentic_options, agentic_workload

    if len(paths) > MAX_DYNAMO_FILES:
        f.error("TRACE-PATH", "trace_paths", f"a Dynamo trace of {len(paths)} files is more "
                f"than the {MAX_DYNAMO_FILES} read at once")
        return None
    expected = f.integer("trace_block_size", 1, 1 << 20)
    if any(d.severity == "error" for d in f.found):
        return None
    trace, found = read_dynamo(paths, expected_block_size=expected)
    f.found.extend(found)
    if trace is None:
        return None
    if trace.graph is not None:
        options = _agentic_options(f, traffic, "dynamo")
        if any(d.severity == "error" for d in f.found):
            return None
        return agentic_workload(f, trace.graph, options, paths[0][1], model=model,
                                engine_block_size=engine_block_size)
    assert trace.rows is not None
    load = traffic.get("load_type")
    concurrency = None
    speedup = 1.0
    if load == "concurrency":
        concurrency = f.integer("concurrency", 1, required="with concurrency load")
        f.ignored("speedup", "with concurrency load (recorded gaps are kept)")
    elif load == "trace_timestamps":
        speedup = f.number("speedup", 0.0, 1e9, positive=True) or 1.0
    else:
        f.error("WORKLOAD-LOAD", "load_type", "trace traffic needs load_type trace_timestamps "
                f"or concurrency, found {load!r}")
    stops = {key: f.integer(key, 1) for key in ("stop_requests", "stop_sessions")}
    if any(d.severity == "error" for d in f.found):
        return None
    return _mooncake(f, paths[0], mooncake_text(trace.rows), trace.block_size,
                     concurrency=concurrency, speedup=speedup, **stops)


def _mooncake(f: _Fields, path: tuple[str, str], data: bytes, block_size: int, *,
              concurrency: int | None, speedup: float, stop_requests: int | None,
              stop_sessions: int | None) -> MooncakeWorkload | None:
    index, found = scan_mooncake(path[0], path[1], block_size=block_size,
                                 timestamps=concurrency is None, speedup=speedup,
                                 stop_requests=stop_requests, stop_sessions=stop_sessions,
                                 data=data)
    f.found.extend(found)
    if index is None:
        return None
    return MooncakeWorkload(index, block_size=block_size, delta=False, concurrency=concurrency,
                            speedup=speedup)
