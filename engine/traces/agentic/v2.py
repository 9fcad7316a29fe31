"""Agentic Mooncake v2 files (header + rows with dependencies), and legacy headerless rows.

v2: the first non-blank line is the header `{"schema":"dynamo.agentic_mooncake","version":2,
"block_size":N,"hash_id_scope":"local","source":{"format":..,"digest":..}}`; every other
non-blank line is a request row. The header owns the block size. Line numbers are physical
lines (blank lines count). Checks and their order follow the reference's reader; every problem
is reported with its line.

Legacy headerless rows (no header line): `request_id`, `hash_ids`, `output_length` (or
`output_tokens`), `input_length` (or `input_tokens`), optional `session_id`, `timestamp` |
`created_time`, `delay` xor `delay_ms`, `tool_wait_ms` (added to the delay) and `wait_for`
(predecessor ids: completion edges, a join when more than one). The reference 1.6.1 refuses
them on its `agentic_mooncake` path (v2 only); kvreplay reads them as its stored sources
describe, with the trace block size from the config (docs/traces-and-reports.md).
"""

from __future__ import annotations

import math
from typing import Any

from kvreplay.engine.traces.agentic import graph as graphs
from kvreplay.engine.traces.agentic import serde
from kvreplay.engine.traces.agentic.graph import (
    RELATIONS,
    SCHEMA,
    TRIGGERS,
    VERSION,
    AgenticGraph,
    Dependency,
    GraphError,
    GraphRow,
    Header,
    build_graph,
)
from kvreplay.engine.traces.jsonl import MAX_NESTING, TOO_DEEP, too_deep
from kvreplay.engine.traces.mooncake_rows import MAX_TIME_MS, MAX_TOKENS
from kvreplay.engine.traces.rules import diag
from kvreplay.schema.diagnostics import Diagnostic
from kvreplay.schema.files import open_regular

MAX_DIAGNOSTICS = 50
_PAST = f"past the {MAX_TIME_MS:.0e} ms (about 31,700 years) a trace time may reach"


class _Bad(Exception):
    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule


def _parse(text: str) -> Any:
    try:
        return serde.STRICT.decode(text)
    except RecursionError:
        raise ValueError(f"{TOO_DEEP} (past {MAX_NESTING} levels at column "
                         f"{too_deep(text) + 1})") from None


class _Findings:
    """A reader's diagnostics, the first MAX_DIAGNOSTICS of them listed."""

    __slots__ = ("display", "found", "last_unlisted", "unlisted")

    def __init__(self, display: str) -> None:
        self.display = display
        self.found: list[Diagnostic] = []
        self.unlisted = 0  # problems past MAX_DIAGNOSTICS
        self.last_unlisted = 0  # the last line among them

    def __call__(self, rule: str, message: str, line: int | None = None,
                 hint: str | None = None) -> None:
        if len(self.found) < MAX_DIAGNOSTICS:
            self.found.append(diag(rule, message, file=self.display, line=line, hint=hint))
        else:
            self.unlisted += 1
            self.last_unlisted = max(self.last_unlisted, line or 0)

    def close(self) -> bool:
        """Note what was not listed; True when there is an error."""
        if self.unlisted:
            self.found.append(diag("TRACE-TRUNCATED", f"{self.unlisted} more problem(s) in this "
                                   "trace are not listed", file=self.display,
                                   line=self.last_unlisted or None, severity="note"))
        return any(d.severity == "error" for d in self.found)


def read_agentic_mooncake(path: str, display: str | None = None, *,
                          legacy_block_size: int | None = None
                          ) -> tuple[AgenticGraph | None, list[Diagnostic]]:
    """Read a v2 (or legacy headerless) agentic trace; (graph, diagnostics)."""
    display = display or path
    add = _Findings(display)
    lines = _lines(path, display, add)
    if lines is None:
        return None, add.found
    if not lines:
        add("TRACE-EMPTY", f"agentic trace file {display} is empty")
        return None, add.found
    start = _start(lines, display, legacy_block_size, add)
    if start is None:
        return None, add.found
    header, legacy = start
    rows = lines if legacy else lines[1:]
    if legacy and len(rows) > graphs.MAX_REQUESTS:
        add("TRACE-VALUE", f"agentic trace {display} holds {graphs.too_many()} (past it at "
            f"line {rows[-1][0]})", rows[-1][0], hint="replay a part of the trace")
        return None, add.found
    if not rows:
        add("TRACE-EMPTY", f"agentic trace file {display} did not contain any requests")
        return None, add.found
    graph_rows = _graph_rows(rows, header.block_size, legacy, add)
    if add.close():
        return None, add.found
    if legacy:
        _legacy_plays(graph_rows)
    try:
        graph = build_graph(header, graph_rows)
    except GraphError as exc:
        add("TRACE-GRAPH", str(exc), exc.line)
        return None, add.found
    return graph, add.found


def _lines(path: str, display: str, add: _Findings) -> list[tuple[int, str]] | None:
    """The file's non-blank lines with their physical numbers; None when it cannot be read."""
    lines: list[tuple[int, str]] = []
    try:
        with open_regular(path) as f:
            for number, raw in enumerate(f, start=1):
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    add("TRACE-ENCODING", f"line {number} is not valid UTF-8 (byte {exc.start})",
                        number)
                    return None
                if number == 1 and text.startswith("\ufeff"):
                    add("TRACE-ENCODING", "the file starts with a byte-order mark", 1)
                    return None
                if text.strip():
                    if len(lines) > graphs.MAX_REQUESTS:  # the header and MAX_REQUESTS rows
                        add("TRACE-VALUE", f"agentic trace {display} holds "
                            f"{graphs.too_many()} (past it at line {number})", number,
                            hint="replay a part of the trace")
                        return None
                    lines.append((number, text))
    except OSError as exc:
        add("TRACE-PATH", f"cannot read {display}: {exc.strerror or exc}")
        return None
    return lines


def _start(lines: list[tuple[int, str]], display: str, legacy_block_size: int | None,
           add: _Findings) -> tuple[Header, bool] | None:
    """The header (v2) or a legacy stand-in for it, and whether the rows are legacy ones."""
    first_line, first_text = lines[0]
    try:
        first = _parse(first_text)
    except ValueError as exc:
        add("TRACE-JSON", f"failed to parse line {first_line} as the agentic Mooncake v2 "
            f"header: {exc}", first_line)
        return None
    if isinstance(first, dict) and "schema" in first:
        header = _header(first, first_line, add)
        return None if header is None else (header, False)
    if legacy_block_size is None:
        add("TRACE-FORMAT", f"{display} has no agentic Mooncake v2 header; legacy headerless "
            "rows need the trace block size", first_line,
            hint="set traffic.source.block_size (tokens per hash id)")
        return None
    return Header(legacy_block_size, "legacy_agentic_mooncake", f"{display}:{len(lines)}"), True


def _graph_rows(rows: list[tuple[int, str]], block_size: int, legacy: bool,
                add: _Findings) -> list[GraphRow]:
    """The rows that read, each request id once; a problem is reported with its line."""
    graph_rows: list[GraphRow] = []
    seen: set[str] = set()
    for number, text in rows:
        try:
            value = _parse(text)
            row = _legacy_row(value, block_size) if legacy else _row(value, block_size)
        except ValueError as exc:
            add("TRACE-JSON", f"failed to parse line {number} as an agentic Mooncake "
                f"{'legacy row' if legacy else 'v2 request'}: {exc}", number)
            continue
        except _Bad as exc:
            add(exc.rule, f"trace line {number} {exc}", number)
            continue
        if row.request_id in seen:
            add("TRACE-VALUE", f"trace line {number} duplicates request_id {row.request_id}",
                number)
            continue
        seen.add(row.request_id)
        row.line = number
        graph_rows.append(row)
    return graph_rows


def _header(value: dict[str, Any], line: int, add: _Findings) -> Header | None:
    if value.get("schema") != SCHEMA:
        add("TRACE-VALUE", f"unsupported agentic Mooncake schema {value.get('schema')!r}; "
            f"expected {SCHEMA!r}", line)
        return None
    if value.get("version") != VERSION:
        add("TRACE-VALUE", f"unsupported agentic Mooncake version {value.get('version')!r}; "
            f"expected {VERSION}", line)
        return None
    block = value.get("block_size")
    if isinstance(block, bool) or not isinstance(block, int) or block <= 0:
        add("TRACE-VALUE", "agentic Mooncake block_size must be an integer greater than 0, "
            f"found {block!r}", line)
        return None
    if value.get("hash_id_scope") != "local":
        add("TRACE-VALUE", f"unsupported hash_id_scope {value.get('hash_id_scope')!r}; "
            "expected local", line)
        return None
    source = value.get("source")
    fmt = source.get("format") if isinstance(source, dict) else None
    digest = source.get("digest") if isinstance(source, dict) else None
    if not (isinstance(fmt, str) and fmt.strip() and isinstance(digest, str) and digest.strip()):
        add("TRACE-VALUE", "agentic Mooncake source provenance requires nonempty format and "
            "digest", line)
        return None
    return Header(block, fmt, digest)


def _text(value: dict[str, Any], key: str) -> str:
    item = value.get(key)
    if item is None:
        raise _Bad("TRACE-MISSING", f"is missing {key}")
    if not isinstance(item, str):
        raise _Bad("TRACE-FIELD", f"{key} must be a string, found {item!r}")
    if not item.strip():
        raise _Bad("TRACE-VALUE", f"has empty {key}")
    return item


def _uint(value: Any, key: str, high: int = (1 << 64) - 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Bad("TRACE-FIELD", f"{key} must be an unsigned integer, found {value!r}")
    if not 0 <= value <= high:
        raise _Bad("TRACE-VALUE", f"{key} must be in 0..{high}, found {value}")
    return value


def _number(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Bad("TRACE-FIELD", f"{key} must be a number, found {value!r}")
    try:
        return float(value)
    except OverflowError:  # an integer beyond any float
        raise _Bad("TRACE-VALUE", f"has {key} of {len(str(value))} digits, {_PAST}") from None


def _time(value: float, what: str) -> float:
    """A time or delay (ms) the engine's clock can reach, else a finding naming it."""
    if value > MAX_TIME_MS:
        raise _Bad("TRACE-VALUE", f"has {what} {value:.6g} ms, {_PAST}")
    return value


def _either(value: dict[str, Any], key: str, alias: str) -> Any:
    return value[key] if key in value else value.get(alias)


def _row(value: Any, block_size: int) -> GraphRow:
    if not isinstance(value, dict):
        raise _Bad("TRACE-FIELD", f"must be a JSON object, found {value!r}")
    request_id = _text(value, "request_id")
    play_id = _text(value, "play_id")
    session_id = _text(value, "session_id")
    hash_ids, input_length = _prompt(value, block_size)
    model = value.get("model")
    if not isinstance(model, str):
        raise _Bad("TRACE-MISSING" if model is None else "TRACE-FIELD",
                   f"model must be a string, found {model!r}")
    if not model.strip():
        raise _Bad("TRACE-VALUE", "has an empty model")
    output_length, tokens = _output(value)
    not_before, api_ms = _times(value)
    raw_deps = value.get("dependencies") or []
    if not isinstance(raw_deps, list):
        raise _Bad("TRACE-FIELD", f"dependencies must be an array, found {raw_deps!r}")
    deps = [_dependency(dep) for dep in raw_deps]
    priority = value.get("priority")
    strict = value.get("strict_priority")
    policy = value.get("policy_class")
    if policy is not None and not isinstance(policy, str):
        raise _Bad("TRACE-FIELD", f"policy_class must be a string, found {policy!r}")
    ordinal = value.get("source_play_ordinal")
    return GraphRow(
        request_id=request_id, play_id=play_id, session_id=session_id, model=model,
        input_length=input_length, output_length=output_length, hash_ids=hash_ids,
        not_before_ms=not_before, dependencies=deps,
        source_play_ordinal=None if ordinal is None else _uint(ordinal, "source_play_ordinal"),
        output_token_ids=tokens, recorded_api_time_ms=api_ms,
        priority=None if priority is None else _uint(priority, "priority", (1 << 32) - 1),
        strict_priority=None if strict is None else _uint(strict, "strict_priority",
                                                          (1 << 32) - 1),
        policy_class=policy)


def _prompt(value: dict[str, Any], block_size: int) -> tuple[list[int], int]:
    """(hash_ids, input_length): exactly one hash id per started block."""
    hashes = value.get("hash_ids")
    if hashes is None:
        raise _Bad("TRACE-MISSING", "is missing hash_ids")
    if not isinstance(hashes, list):
        raise _Bad("TRACE-FIELD", f"hash_ids must be an array, found {hashes!r}")
    if not hashes:
        raise _Bad("TRACE-VALUE", "has empty hash_ids")
    hash_ids = [_uint(h, "hash_ids[]") for h in hashes]
    length = _either(value, "input_length", "input_tokens")
    if length is None:
        raise _Bad("TRACE-MISSING", "is missing input_length")
    input_length = _uint(length, "input_length", MAX_TOKENS)
    if input_length == 0:
        raise _Bad("TRACE-VALUE", "has zero input_length")
    need = -(-input_length // block_size)
    if len(hash_ids) != need:
        raise _Bad("TRACE-CAPACITY", f"has input_length {input_length} at block_size "
                   f"{block_size} and requires exactly {need} hash_ids, got {len(hash_ids)}")
    return hash_ids, input_length


def _output(value: dict[str, Any]) -> tuple[int, list[int] | None]:
    """(output_length, output_token_ids or None)."""
    out = _either(value, "output_length", "output_tokens")
    if out is None:
        raise _Bad("TRACE-MISSING", "is missing output_length")
    output_length = _uint(out, "output_length", MAX_TOKENS)
    tokens = value.get("output_token_ids")
    if tokens is None:
        return output_length, None
    if not isinstance(tokens, list):
        raise _Bad("TRACE-FIELD", f"output_token_ids must be an array, found {tokens!r}")
    ids = [_uint(t, "output_token_ids[]", (1 << 32) - 1) for t in tokens]
    if len(ids) != output_length:
        raise _Bad("TRACE-VALUE", f"output_length {output_length} does not match "
                   f"output_token_ids length {len(ids)}")
    return output_length, ids


def _times(value: dict[str, Any]) -> tuple[float, float | None]:
    """(not_before_ms, recorded_api_time_ms or None)."""
    if "not_before_ms" not in value:
        raise _Bad("TRACE-MISSING", "is missing not_before_ms")
    not_before = _number(value["not_before_ms"], "not_before_ms")
    if not math.isfinite(not_before) or not_before < 0:
        raise _Bad("TRACE-VALUE", f"has invalid not_before_ms {not_before}")
    _time(not_before, "not_before_ms")
    api = value.get("recorded_api_time_ms")
    api_ms = None if api is None else _number(api, "recorded_api_time_ms")
    if api_ms is not None and (not math.isfinite(api_ms) or api_ms < 0):
        raise _Bad("TRACE-VALUE", f"has invalid recorded_api_time_ms {api_ms}")
    if api_ms is not None:
        _time(api_ms, "recorded_api_time_ms")
    return not_before, api_ms


def _dependency(dep: Any) -> Dependency:
    if not isinstance(dep, dict):
        raise _Bad("TRACE-FIELD", f"has a dependency that is not an object: {dep!r}")
    for key in ("request_id", "trigger", "delay_ms", "relation"):
        if key not in dep:
            raise _Bad("TRACE-MISSING", f"has a dependency without {key}")
    request_id = dep["request_id"]
    if not isinstance(request_id, str) or not request_id.strip():
        raise _Bad("TRACE-VALUE", "has a dependency with an empty request_id")
    trigger, relation = dep["trigger"], dep["relation"]
    if trigger not in TRIGGERS:
        raise _Bad("TRACE-VALUE", f"has a dependency trigger {trigger!r}; expected dispatch or "
                   "completion")
    if relation not in RELATIONS:
        raise _Bad("TRACE-VALUE", f"has a dependency relation {relation!r}; expected "
                   f"{', '.join(RELATIONS)}")
    delay = _number(dep["delay_ms"], "delay_ms")
    if not math.isfinite(delay) or delay < 0:
        raise _Bad("TRACE-VALUE", f"has invalid dependency delay {delay}")
    _time(delay, f"dependency delay (on {request_id})")
    if trigger == "dispatch" and relation != "spawn":
        raise _Bad("TRACE-VALUE", f"has invalid {relation} dependency with dispatch trigger "
                   "(only spawn may be dispatch-triggered)")
    return Dependency(request_id, trigger, delay, relation)


def _legacy_row(value: Any, block_size: int) -> GraphRow:
    if not isinstance(value, dict):
        raise _Bad("TRACE-FIELD", f"must be a JSON object, found {value!r}")
    request_id = _text(value, "request_id")
    hashes = value.get("hash_ids")
    if not isinstance(hashes, list) or not hashes:
        raise _Bad("TRACE-VALUE", "hash_ids must be a nonempty array")
    hash_ids = [_uint(h, "hash_ids[]") for h in hashes]
    length = _either(value, "input_length", "input_tokens")
    if length is None:
        raise _Bad("TRACE-MISSING", "is missing input_length")
    input_length = _uint(length, "input_length", MAX_TOKENS)
    out = _either(value, "output_length", "output_tokens")
    if out is None:
        raise _Bad("TRACE-MISSING", "is missing output_length")
    delay_ms = _legacy_delay(value)
    wait_for = value.get("wait_for") or []
    if not isinstance(wait_for, list) or not all(isinstance(w, str) for w in wait_for):
        raise _Bad("TRACE-FIELD", "wait_for must be an array of request ids")
    relation = "join" if len(wait_for) > 1 else "sequence"
    deps = [Dependency(w, "completion", delay_ms, relation) for w in wait_for]
    stamp = value.get("timestamp", value.get("created_time"))
    not_before = 0.0 if deps or stamp is None else _number(stamp, "timestamp")
    if not math.isfinite(not_before) or abs(not_before) > MAX_TIME_MS:
        raise _Bad("TRACE-VALUE", f"has timestamp {not_before:.6g} ms, {_PAST}")
    session = value.get("session_id")
    row = _row({"request_id": request_id, "play_id": "-", "session_id":
                session if isinstance(session, str) and session.strip() else "agentic-session",
                "model": "unknown", "input_length": input_length, "output_length": out,
                "output_token_ids": value.get("output_token_ids"), "hash_ids": hash_ids,
                "not_before_ms": not_before, "priority": value.get("priority"),
                "strict_priority": value.get("strict_priority"),
                "policy_class": value.get("policy_class")}, block_size)
    row.dependencies = deps
    return row


def _legacy_delay(value: dict[str, Any]) -> float:
    """A legacy row's dependency delay (ms): `delay` (or `delay_ms`) plus `tool_wait_ms`."""
    wait_ms = _number(value.get("tool_wait_ms", 0), "tool_wait_ms")
    if not math.isfinite(wait_ms) or wait_ms < 0:
        raise _Bad("TRACE-VALUE", "tool_wait_ms must be finite and nonnegative")
    if value.get("delay") is not None and value.get("delay_ms") is not None:
        raise _Bad("TRACE-VALUE", "delay and delay_ms cannot both be set")
    delay = value.get("delay") if value.get("delay") is not None else value.get("delay_ms")
    delay_ms = (0.0 if delay is None else _number(delay, "delay")) + wait_ms
    if not math.isfinite(delay_ms) or delay_ms < 0:
        raise _Bad("TRACE-VALUE", "dependency delay must be finite and nonnegative")
    return _time(delay_ms, "dependency delay (delay plus tool_wait_ms)")


def _legacy_plays(rows: list[GraphRow]) -> None:
    """Plays are the connected components of the wait_for edges, named after their root."""
    parent = {r.request_id: r.request_id for r in rows}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for r in rows:
        for dep in r.dependencies:
            if dep.request_id in parent:
                a, b = find(r.request_id), find(dep.request_id)
                if a != b:
                    parent[a] = b
    members: dict[str, list[GraphRow]] = {}
    for r in rows:
        members.setdefault(find(r.request_id), []).append(r)
    for group in members.values():
        roots = [r for r in group if not r.dependencies]
        label = (min(roots, key=lambda r: (r.not_before_ms, r.request_id)).request_id if roots
                 else group[0].request_id)
        for r in group:
            r.play_id = f"legacy-play:{label}"
