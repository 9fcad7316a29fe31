"""Dynamo request traces (`dynamo.request.trace.v1`), one or several JSONL files.

As the reference reads them (aisimulate-core's `DynamoRequestTrace`, the one in Dynamo 1.6.1):
each line is a record (or `{"event": record}`); `request_payload` and `tool_start` records are
skipped, `request_end` records are the requests and `tool_end` / `tool_error` records with an
`agent_context` the tool calls. A request runs from `request_received_ms` (else its end minus
`total_time_ms`) to that plus the rounded `total_time_ms` (else `event_time_unix_ms`); the
requests of every file are replayed in (start, end, request_id) order.

- Without `agent_context` (every record): a standard trace, Mooncake rows at their start times
  (relative to the first), `replay.input_length` tokens over `replay.input_sequence_hashes`
  (blocks of `replay.trace_block_size`), `output_tokens` out.
- With `agent_context` (every record): an agentic graph. A session's requests run in sequence
  (each on its predecessor's completion, after the recorded gap); a child session
  (`parent_session_id`) is spawned by the parent request its tool call names
  (`tool.claude.source_request_id`; else the last parent request started by the child's
  start) and joined by its consumer request (`consumer_request_id`; else the first parent
  request started after the child ended). Requests without a predecessor start at their
  recorded time; connected requests form one play (`dynamo-play:<its first request>`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from kvreplay.engine.traces.agentic.graph import (
    AgenticGraph,
    GraphError,
    Header,
    build_graph,
)
from kvreplay.engine.traces.json_objects import json_objects
from kvreplay.engine.traces.mooncake_rows import MAX_TOKENS
from kvreplay.engine.traces.record_check import U64, RecordCheck
from kvreplay.engine.traces.rules import diag
from kvreplay.schema.diagnostics import Diagnostic

SCHEMA = "dynamo.request.trace.v1"
SKIPPED = ("request_payload", "tool_start")
READ = ("request_end", "tool_end", "tool_error")
MAX_ERRORS = 200
Row = dict[str, Any]


class Entry(NamedTuple):
    """One request_end record, where it was read."""

    start: int
    end: int
    request_id: str
    session: str | None
    parent: str | None
    model: str | None
    output: int | None
    input_length: int
    hashes: list[int]
    block_size: int
    file: str
    line: int


class Tool(NamedTuple):
    session: str
    call_id: str
    tool_class: str
    source: str | None  # claude.source_request_id (None: no claude metadata)
    consumer: str | None
    child: str | None
    mode: str | None
    file: str
    line: int


class DynamoTrace(NamedTuple):
    """A standard trace's Mooncake rows, or an agentic trace's graph."""

    block_size: int
    rows: list[Row] | None
    graph: AgenticGraph | None


class _Reading:
    def __init__(self) -> None:
        self.found: list[Diagnostic] = []
        self.requests: list[Entry] = []
        self.tools: list[Tool] = []
        self.ids: dict[str, Entry] = {}
        self.errors = 0

    def add(self, d: Diagnostic) -> None:
        self.found.append(d)
        if d.severity == "error":
            self.errors += 1

    def error(self, rule: str, message: str, file: str, line: int | None = None,
              column: int | None = None) -> None:
        self.add(diag(rule, message, file=file, line=line, column=column))


def read_dynamo(paths: list[tuple[str, str]], *, expected_block_size: int | None = None,
                ) -> tuple[DynamoTrace | None, list[Diagnostic]]:
    """Every file's records, lowered (None when any error was found)."""
    r = _Reading()
    for path, display in paths:
        _read_file(r, path, display)
        if r.errors > MAX_ERRORS:
            r.add(diag("TRACE-TRUNCATED", f"more than {MAX_ERRORS} problems: the rest was not "
                       "checked", file=display, severity="note"))
            break
    if r.errors:
        return None, r.found
    if not r.requests:
        r.error("TRACE-EMPTY", "the Dynamo trace contains no request_end record",
                paths[0][1] if paths else "")
        return None, r.found
    trace = _lower(r, expected_block_size)
    return (None if r.errors else trace), r.found


def _read_file(r: _Reading, path: str, display: str) -> None:
    for item in json_objects(path, display):
        if isinstance(item, Diagnostic):
            r.add(item)
            continue
        number, text, obj = item
        _record(r, text, obj, display, number)
        if r.errors > MAX_ERRORS:
            return


def _record(r: _Reading, text: str, obj: dict[str, Any], file: str, line: int) -> None:
    event = obj.get("event")
    prefix: tuple[str, ...] = ("event",) if isinstance(event, dict) else ()
    record: dict[str, Any] = event if isinstance(event, dict) else obj
    check = RecordCheck(text, file, line, prefix)
    kind = record.get("event_type", obj.get("event_type"))
    if kind in SKIPPED:
        return
    if kind not in READ:
        check.report("TRACE-VALUE", ("event_type",), "a request trace holds request_end, "
                     "tool_end, tool_error, request_payload and tool_start records; found "
                     f"event_type {kind!r}")
    else:
        schema = check.string(record, ("schema",), required=True)
        if schema is not None and schema != SCHEMA:
            check.report("TRACE-VALUE", ("schema",), f"unsupported Dynamo request trace schema "
                         f"{schema!r} (expected {SCHEMA!r})")
        event_ms = check.integer(record, ("event_time_unix_ms",), 0, U64, required=True)
        context = _context(check, record)
        if not check.found and event_ms is not None:
            if kind == "request_end":
                _request(r, check, record, event_ms, context, file, line)
            else:
                _tool(r, check, record, event_ms, context, file, line)
    for d in check.found:
        r.add(d)


def _context(check: RecordCheck, record: dict[str, Any]) -> tuple[str, str | None] | None:
    context = check.mapping(record, ("agent_context",), required=False)
    if context is None:
        return None
    session = check.string(context, ("agent_context", "session_id"), required=True,
                           nonempty=True)
    parent = check.string(context, ("agent_context", "parent_session_id"))
    return None if session is None else (session, parent)


def _request(r: _Reading, check: RecordCheck, record: dict[str, Any], event_ms: int,
             context: tuple[str, str | None] | None, file: str, line: int) -> None:
    request = check.mapping(record, ("request",))
    if request is None:
        return
    rid = check.string(request, ("request", "request_id"), required=True, nonempty=True)
    model = check.string(request, ("request", "model"))
    output = check.integer(request, ("request", "output_tokens"), 0, MAX_TOKENS)
    received = check.integer(request, ("request", "request_received_ms"), 0, U64)
    total = check.number(request, ("request", "total_time_ms"), 0.0, 1e15)
    replay = check.mapping(request, ("request", "replay"))
    if replay is None or rid is None or check.found:
        return
    keys = ("request", "replay")
    block = check.integer(replay, (*keys, "trace_block_size"), 1, 1 << 20, required=True)
    length = check.integer(replay, (*keys, "input_length"), 1, MAX_TOKENS, required=True)
    hashes = check.int_list(replay, (*keys, "input_sequence_hashes"), 0, U64, required=True)
    if block is None or length is None or hashes is None:
        return
    if length > len(hashes) * block:
        check.report("TRACE-CAPACITY", (*keys, "input_length"),
                     f"`input_length` {length} exceeds the {len(hashes) * block} tokens that "
                     f"{len(hashes)} sequence hash(es) cover at trace_block_size {block}")
        return
    if rid in r.ids:
        seen = r.ids[rid]
        check.report("TRACE-VALUE", ("request", "request_id"), f"duplicate request_id {rid!r} "
                     f"(also at {seen.file}:{seen.line})")
        return
    total_ms = None if total is None else _round(total)
    end = received + total_ms if received is not None and total_ms is not None else event_ms
    start = received if received is not None else max(event_ms - (total_ms or 0), 0)
    session, parent = context if context is not None else (None, None)
    entry = Entry(start, end, rid, session, parent, model, output, length, hashes, block, file,
                  line)
    r.ids[rid] = entry
    r.requests.append(entry)


def _tool(r: _Reading, check: RecordCheck, record: dict[str, Any], event_ms: int,
          context: tuple[str, str | None] | None, file: str, line: int) -> None:
    tool = check.mapping(record, ("tool",), required=False)
    if context is None or tool is None:
        return  # only agentic tool calls matter
    call = check.string(tool, ("tool", "tool_call_id"), required=True, nonempty=True)
    kind = check.string(tool, ("tool", "tool_class"), required=True, nonempty=True)
    started = check.integer(tool, ("tool", "started_at_unix_ms"), 0, U64)
    ended = check.integer(tool, ("tool", "ended_at_unix_ms"), 0, U64)
    duration = check.number(tool, ("tool", "duration_ms"), 0.0, 1e15)
    claude = check.mapping(tool, ("tool", "claude"), required=False)
    source = consumer = child = mode = None
    if claude is not None:
        keys = ("tool", "claude")
        source = check.string(claude, (*keys, "source_request_id"), required=True)
        consumer = check.string(claude, (*keys, "consumer_request_id"))
        child = check.string(claude, (*keys, "child_session_id"))
        mode = check.string(claude, (*keys, "execution_mode"), required=True)
    if check.found or call is None or kind is None:
        return
    end = ended if ended is not None else event_ms
    start = started if started is not None else (
        end - _round(duration) if duration is not None else end)
    if end < start:
        check.report("TRACE-VALUE", ("tool",), f"tool {call!r} ends ({end}) before it starts "
                     f"({start})")
        return
    r.tools.append(Tool(context[0], call, kind, source, consumer, child, mode, file, line))


def _round(ms: float) -> int:
    """Rust's f64::round (halves away from zero) of a non-negative time."""
    whole = int(ms)
    return whole + 1 if ms - whole >= 0.5 else whole


def _lower(r: _Reading, expected: int | None) -> DynamoTrace | None:
    entries = sorted(r.requests, key=lambda e: (e.start, e.end, e.request_id))
    contextual = [e for e in entries if e.session is not None]
    if contextual and len(contextual) != len(entries):
        odd = next(e for e in r.requests if (e.session is None) == bool(contextual))
        r.error("TRACE-VALUE", "a Dynamo request trace cannot mix requests with and without "
                f"agent_context (request {odd.request_id!r})", odd.file, odd.line)
        return None
    block = entries[0].block_size
    mixed = next((e for e in r.requests if e.block_size != block), None)
    if mixed is not None:
        r.error("TRACE-BLOCK-SIZE", f"request {mixed.request_id!r} has trace_block_size "
                f"{mixed.block_size}, other requests {block}: one block size per trace",
                mixed.file, mixed.line)
        return None
    if expected is not None and expected != block:
        first = r.requests[0]
        r.error("TRACE-BLOCK-SIZE", f"the configured trace block size {expected} does not "
                f"match the trace's own ({block})", first.file, first.line)
        return None
    missing = next((e for e in entries if e.output is None), None)
    if missing is not None:
        r.error("TRACE-MISSING", f"request {missing.request_id!r} has no "
                "`request.output_tokens`", missing.file, missing.line)
        return None
    if not contextual:
        origin = entries[0].start
        rows = [{"timestamp": float(e.start - origin), "input_length": e.input_length,
                 "output_length": e.output, "hash_ids": e.hashes, "request_id": e.request_id}
                for e in entries]
        return DynamoTrace(block, rows, None)
    graph = _agentic(r, entries, block)
    return None if graph is None else DynamoTrace(block, None, graph)


def _agentic(r: _Reading, entries: list[Entry], block: int) -> AgenticGraph | None:
    from kvreplay.engine.traces.dynamo_graph import lower_agentic

    try:
        rows = lower_agentic(entries, r.tools)
    except GraphError as exc:
        at = next((e for e in entries if e.request_id == exc.request_id), entries[0])
        r.error("TRACE-GRAPH", str(exc), at.file, at.line)
        return None
    header = Header(block, SCHEMA, f"requests:{len(rows)};tools:{len(r.tools)}")
    try:
        return build_graph(header, rows)
    except GraphError as exc:
        at = next((e for e in entries if e.request_id == exc.request_id), entries[0])
        r.error("TRACE-GRAPH", str(exc), at.file, at.line)
        return None
