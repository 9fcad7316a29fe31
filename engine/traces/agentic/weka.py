"""Weka / AgentX plays: reading, checking and lowering to the agentic graph (engine.md 1.1).

A source is a `.json` file (one play), a `.jsonl` file (one play per JSON value, normally one a
line) or a directory (walked recursively; entries sorted by their path under the root, other
extensions skipped, symlinks refused). A play's *source name* is the file's basename (a file) or
its path under the root (a directory), plus `#<6-digit index>` for JSONL; every id and block
identity of the play derives from it, so equal hash ids in different plays never share a prefix.

Problems are reported as diagnostics with the file, the line where the play starts, the play id
and the field (JSON path inside the play), all of them, not only the first. The lowering is the
reference's (aisimulate-core 0.13.0): streams by hash chains with seam splicing, sequence /
spawn / replay_barrier / join / root-anchor edges, BLAKE3 block identities, and the reference's
source and graph digests (checked equal on the reference's own fixtures and a corpus of probes).
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import struct
from bisect import bisect_left, insort
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from heapq import heapify, heappop, heappush
from typing import Any

import blake3

from kvreplay.engine.traces.agentic import graph as graphs
from kvreplay.engine.traces.agentic import serde
from kvreplay.engine.traces.agentic.graph import (
    AgenticGraph,
    Dependency,
    GraphError,
    GraphRow,
    Header,
    build_graph,
)
from kvreplay.engine.traces.agentic.serde import seconds_to_ms
from kvreplay.engine.traces.jsonl import MAX_NESTING, TOO_DEEP, too_deep
from kvreplay.engine.traces.mooncake_rows import MAX_TIME_MS, MAX_TOKENS
from kvreplay.engine.traces.rules import diag
from kvreplay.schema.diagnostics import Diagnostic, Severity
from kvreplay.schema.files import kind_of, open_regular

EPS = 1e-6  # seconds
SEAM_MAX_GAP = 3600.0
SEAM_MIN_OVERLAP = 0.5
BASES = ("auto", "absolute", "relative")
MAX_DIAGNOSTICS = 50
# Times past this are refused where they are written (Mooncake rows' bound, in seconds): the
# lowering's nanosecond arithmetic overflows near 1.8e299 s, the engine's clock at 2**53 ms.
MAX_SECONDS = MAX_TIME_MS / 1000.0


# -- reading ---------------------------------------------------------------------------------------

@dataclass(slots=True)
class _File:
    relative: str  # the name ids derive from (basename, or path under the directory root)
    display: str  # as shown in diagnostics
    path: str
    jsonl: bool
    data: bytes = b""


@dataclass(slots=True)
class WekaRequest:
    t: float
    model: str
    input: int
    output: int
    hash_ids: list[int]
    api_time: float | None
    where: str  # JSON path inside the play, for diagnostics


@dataclass(slots=True)
class WekaSubagent:
    t: float
    agent_id: str
    duration_ms: int | None
    status: str
    requests: list[WekaRequest]
    where: str


@dataclass(slots=True)
class WekaPlay:
    id: str
    models: list[str]
    block_size: int
    hash_id_scope: str
    entries: list[WekaRequest | WekaSubagent]
    source_name: str
    display: str
    line: int


class _Report:
    """Collects diagnostics (capped) for one reading."""

    def __init__(self) -> None:
        self.found: list[Diagnostic] = []
        self.truncated = False

    def add(self, rule: str, message: str, file: str | None, line: int | None = None,
            hint: str | None = None, severity: Severity = "error") -> None:
        if len(self.found) >= MAX_DIAGNOSTICS:
            self.truncated = True
            return
        self.found.append(diag(rule, message, file=file, line=line, hint=hint,
                               severity=severity))

    def errors(self) -> bool:
        return any(d.severity == "error" for d in self.found)


def _collect(path: str, display: str, report: _Report) -> list[_File]:
    try:
        info = os.lstat(path)
    except OSError as exc:
        report.add("TRACE-PATH", f"cannot read Weka source {display}: {exc.strerror or exc}",
                   display)
        return []
    if stat.S_ISLNK(info.st_mode):
        report.add("TRACE-PATH", f"Weka source may not be a symlink: {display}", display)
        return []
    if stat.S_ISREG(info.st_mode):
        lower = path.lower()
        if not lower.endswith((".json", ".jsonl")):
            report.add("TRACE-PATH", f"Weka source file must use a .json or .jsonl extension: "
                       f"{display}", display)
            return []
        return [_File(os.path.basename(path), display, path, lower.endswith(".jsonl"))]
    if not stat.S_ISDIR(info.st_mode):
        report.add("TRACE-PATH", f"Weka source is neither a file nor a directory: {display} "
                   f"(it is {kind_of(info.st_mode)})", display)
        return []
    files: list[_File] = []
    _walk(path, display, "", files, report)
    if not files and not report.errors():
        report.add("TRACE-EMPTY", f"Weka source {display} contains no JSON or JSONL files",
                   display)
    files.sort(key=lambda f: f.relative.encode())
    return files


def _walk(root: str, display: str, prefix: str, out: list[_File], report: _Report) -> None:
    here = os.path.join(root, prefix) if prefix else root
    try:
        names = sorted(os.listdir(here))
    except OSError as exc:
        report.add("TRACE-PATH", f"cannot read Weka directory {display}: {exc.strerror or exc}",
                   display)
        return
    for name in names:
        relative = f"{prefix}/{name}" if prefix else name
        full = os.path.join(root, relative)
        shown = f"{display.rstrip('/')}/{relative}"
        try:
            info = os.lstat(full)
        except OSError as exc:
            report.add("TRACE-PATH", f"cannot read {shown}: {exc.strerror or exc}", shown)
            continue
        wanted = name.lower().endswith((".json", ".jsonl"))
        if stat.S_ISLNK(info.st_mode):
            report.add("TRACE-PATH", f"Weka corpus may not contain symlinks: {shown}", shown)
        elif stat.S_ISDIR(info.st_mode):
            _walk(root, display, relative, out, report)
        elif stat.S_ISREG(info.st_mode) and wanted:
            out.append(_File(relative, shown, full, name.lower().endswith(".jsonl")))
        elif wanted:
            report.add("TRACE-PATH", f"Weka corpus entry {shown} is {kind_of(info.st_mode)}, "
                       "not a regular file", shown)


_DECODER = serde.STRICT
_SPACE = re.compile(r"[ \t\r\n]+")


def _text(file: _File, report: _Report) -> str | None:
    """The file's text (its bytes kept in `file.data`); None when it cannot be read as UTF-8."""
    try:
        with open_regular(file.path) as f:
            file.data = f.read()
    except OSError as exc:
        report.add("TRACE-PATH", f"cannot read {file.display}: {exc.strerror or exc}",
                   file.display)
        return None
    try:
        text = file.data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = file.data[:exc.start].count(b"\n") + 1
        report.add("TRACE-ENCODING", f"{file.display} is not valid UTF-8 (byte {exc.start})",
                   file.display, line)
        return None
    if text.startswith("\ufeff"):
        report.add("TRACE-ENCODING", f"{file.display} starts with a byte-order mark",
                   file.display, 1)
        return None
    return text


def _values(file: _File, report: _Report) -> list[tuple[int, Any]]:
    """The file's JSON values with the line each starts on (any whitespace separates them)."""
    text = _text(file, report)
    if text is None:
        return []
    out: list[tuple[int, Any]] = []
    i, line, n = 0, 1, len(text)
    while True:
        gap = _SPACE.match(text, i)
        if gap is not None:
            line += text.count("\n", i, gap.end())
            i = gap.end()
        if i >= n:
            break
        try:
            value, end = _DECODER.raw_decode(text, i)
        except RecursionError:
            deep = too_deep(text, i)
            column = deep - text.rfind("\n", 0, deep)
            report.add("TRACE-JSON", f"parsing Weka source {file.display} object "
                       f"{len(out) + 1}: {TOO_DEEP} (past {MAX_NESTING} levels at column "
                       f"{column})", file.display, line + text.count("\n", i, deep))
            return []
        except (json.JSONDecodeError, ValueError) as exc:
            where = line + (text.count("\n", i, exc.pos) if isinstance(exc, json.JSONDecodeError)
                            else 0)
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            report.add("TRACE-JSON", f"parsing Weka source {file.display} object "
                       f"{len(out) + 1}: {reason}", file.display, where)
            return []
        if out and not file.jsonl:
            report.add("TRACE-JSON", f"Weka JSON source {file.display} contains more than one "
                       "object; use a .jsonl extension", file.display, line)
            return []
        if len(out) == graphs.MAX_REQUESTS:  # each play has a request: the corpus is too large
            report.add("TRACE-VALUE", f"Weka source {file.display} holds more than "
                       f"{graphs.MAX_REQUESTS:,} plays, so {graphs.too_many()}", file.display, line,
                       hint="replay a part of the corpus")
            return []
        out.append((line, value))
        line += text.count("\n", i, end)
        i = end
    if not out:
        report.add("TRACE-EMPTY", f"Weka source {file.display} contains no trace objects",
                   file.display)
    return out


# -- typed fields (serde's rules: ints may stand for floats, never the other way) ------------------

class _Bad(Exception):
    def __init__(self, rule: str, where: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule
        self.where = where


def _get(obj: dict[str, Any], key: str, where: str, required: bool = True) -> Any:
    if key not in obj:
        if required:
            raise _Bad("TRACE-MISSING", f"{where}.{key}", f"`{key}` is required")
        return None
    return obj[key]


def _str(obj: dict[str, Any], key: str, where: str) -> str:
    value = _get(obj, key, where)
    if not isinstance(value, str):
        raise _Bad("TRACE-FIELD", f"{where}.{key}", f"`{key}` must be a string, found "
                   f"{_kind(value)}")
    return value


def _uint(obj: dict[str, Any], key: str, where: str, high: int = (1 << 64) - 1) -> int:
    value = _get(obj, key, where)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Bad("TRACE-FIELD", f"{where}.{key}", f"`{key}` must be an integer, found "
                   f"{_kind(value)}")
    if not 0 <= value <= high:
        raise _Bad("TRACE-VALUE", f"{where}.{key}", f"`{key}` must be in 0..{high}, found "
                   f"{value}")
    return value


def _float(obj: dict[str, Any], key: str, where: str, required: bool = True) -> float | None:
    value = _get(obj, key, where, required)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Bad("TRACE-FIELD", f"{where}.{key}", f"`{key}` must be a number, found "
                   f"{_kind(value)}")
    return float(value)


def _abridged(value: int) -> str:
    text = str(value) if value.bit_length() < 200 else f"a {len(str(value))}-digit number"
    return text if len(text) <= 40 else text[:18] + "..." + text[-18:]


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _all_u64(values: list[Any]) -> bool:
    """Every value a plain int in 0..2^64-1, checked by C loops (the per-value loop that names
    the first bad one runs only when this says no)."""
    if not values:
        return True
    kinds = set(map(type, values))
    return kinds == {int} and min(values) >= 0 and max(values) < (1 << 64)


def _request(obj: Any, where: str) -> WekaRequest:
    if not isinstance(obj, dict):
        raise _Bad("TRACE-FIELD", where, f"a request must be an object, found {_kind(obj)}")
    hashes = _get(obj, "hash_ids", where, required=False)
    if "hash_ids" in obj:
        if not isinstance(hashes, list):
            raise _Bad("TRACE-FIELD", f"{where}.hash_ids", "`hash_ids` must be an array of "
                       f"unsigned 64-bit integers, found {_kind(hashes)}")
        if not _all_u64(hashes):
            for k, h in enumerate(hashes):
                if isinstance(h, bool) or not isinstance(h, int) or not 0 <= h < (1 << 64):
                    raise _Bad("TRACE-VALUE", f"{where}.hash_ids[{k}]", "hash ids must be "
                               f"unsigned 64-bit integers, found {_kind(h)}")
    return WekaRequest(
        t=_float(obj, "t", where) or 0.0,
        model=_str(obj, "model", where),
        input=_uint(obj, "in", where, MAX_TOKENS),
        output=_uint(obj, "out", where, MAX_TOKENS),
        hash_ids=list(hashes or []),
        api_time=_float(obj, "api_time", where, required=False),
        where=where,
    )


def _entry(obj: Any, where: str) -> WekaRequest | WekaSubagent:
    if not isinstance(obj, dict):
        raise _Bad("TRACE-FIELD", where, f"an entry must be an object, found {_kind(obj)}")
    kind = _get(obj, "type", where)
    if kind in ("n", "s"):
        return _request(obj, where)
    if kind != "subagent":
        raise _Bad("TRACE-VALUE", f"{where}.type", f"`type` must be n, s or subagent, found "
                   f"{kind!r}")
    duration = _get(obj, "duration_ms", where, required=False)
    if duration is not None and (isinstance(duration, bool) or not isinstance(duration, int)):
        raise _Bad("TRACE-FIELD", f"{where}.duration_ms", "`duration_ms` must be an integer, "
                   f"found {_kind(duration)}")
    if duration is not None and duration > MAX_TIME_MS:
        raise _Bad("TRACE-VALUE", f"{where}.duration_ms", f"`duration_ms` must be at most "
                   f"{MAX_TIME_MS:.0e}, found {_abridged(duration)}")
    _str(obj, "subagent_type", where)
    inner = _get(obj, "requests", where)
    if not isinstance(inner, list):
        raise _Bad("TRACE-FIELD", f"{where}.requests", f"`requests` must be an array, found "
                   f"{_kind(inner)}")
    requests = []
    for j, item in enumerate(inner):
        sub_where = f"{where}.requests[{j}]"
        if isinstance(item, dict) and item.get("type") not in ("n", "s"):
            raise _Bad("TRACE-VALUE", f"{sub_where}.type", "a subagent's requests must have type "
                       f"n or s, found {item.get('type')!r} (subagents do not nest)")
        requests.append(_request(item, sub_where))
    return WekaSubagent(t=_float(obj, "t", where) or 0.0, agent_id=_str(obj, "agent_id", where),
                        duration_ms=duration, status=_str(obj, "status", where),
                        requests=requests, where=where)


def _play(obj: Any, source_name: str, display: str, line: int) -> WekaPlay:
    if not isinstance(obj, dict):
        raise _Bad("TRACE-FIELD", "$", f"a play must be an object, found {_kind(obj)}")
    models = _get(obj, "models", "$", required=False)
    if models is None:
        models = []
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        raise _Bad("TRACE-FIELD", "$.models", "`models` must be an array of strings")
    entries = _get(obj, "requests", "$")
    if not isinstance(entries, list):
        raise _Bad("TRACE-FIELD", "$.requests", f"`requests` must be an array, found "
                   f"{_kind(entries)}")
    return WekaPlay(
        id=_str(obj, "id", "$"),
        models=models,
        block_size=_uint(obj, "block_size", "$"),
        hash_id_scope=_str(obj, "hash_id_scope", "$"),
        entries=[_entry(e, f"$.requests[{i}]") for i, e in enumerate(entries)],
        source_name=source_name, display=display, line=line)


# -- checks (the reference's preflight pass) -------------------------------------------------------

def _check(play: WekaPlay, bad: Callable[[str, str, str], None]) -> None:
    src = play.source_name
    if not play.id.strip():
        bad("TRACE-VALUE", "$.id", f"Weka trace {src} has an empty id")
    if play.block_size == 0:
        bad("TRACE-VALUE", "$.block_size", f"Weka trace {src} has zero block_size")
    if play.hash_id_scope != "local":
        bad("TRACE-VALUE", "$.hash_id_scope", f"Weka trace {src} has unsupported hash_id_scope "
            f"{play.hash_id_scope!r}; expected local")
    if any(not m.strip() for m in play.models):
        bad("TRACE-VALUE", "$.models", f"Weka trace {src} declares an empty model")
    used: set[str] = set()
    count = 0
    for entry in play.entries:
        for r in entry.requests if isinstance(entry, WekaSubagent) else [entry]:
            count += 1
            used.add(r.model)
    if count == 0:
        bad("TRACE-EMPTY", "$.requests", f"Weka trace {src} has no model requests")
    if play.models and not used <= set(play.models):
        bad("TRACE-VALUE", "$.models", f"Weka trace {src} contains request models absent from "
            f"its declaration: declared {sorted(set(play.models))}, found {sorted(used)}")
    for entry in play.entries:
        if isinstance(entry, WekaSubagent):
            if not math.isfinite(entry.t) or entry.t < 0:
                bad("TRACE-VALUE", f"{entry.where}.t", f"Weka trace {src} has invalid subagent "
                    f"timestamp {entry.t!r}")
            elif entry.t > MAX_SECONDS:
                bad("TRACE-VALUE", f"{entry.where}.t", f"Weka trace {src} has subagent "
                    f"timestamp {entry.t:.6g} s, {_PAST}")
            if not entry.agent_id.strip():
                bad("TRACE-VALUE", f"{entry.where}.agent_id", f"Weka trace {src} has an empty "
                    "subagent agent_id")
            if entry.duration_ms is not None and entry.duration_ms < 0:
                bad("TRACE-VALUE", f"{entry.where}.duration_ms", f"Weka trace {src} has negative "
                    f"duration_ms for subagent {entry.agent_id}")
            if entry.status not in ("completed", "async_launched"):
                bad("TRACE-VALUE", f"{entry.where}.status", f"Weka trace {src} has unsupported "
                    f"subagent status {entry.status!r} for {entry.agent_id} (expected completed "
                    "or async_launched)")
            elif entry.status == "completed" and not entry.requests:
                bad("TRACE-VALUE", f"{entry.where}.requests", f"Weka trace {src} has blocking "
                    f"subagent {entry.agent_id} with no replayable requests; external waits are "
                    "not modeled")
            for r in entry.requests:
                _check_request(r, src, bad)
        else:
            _check_request(entry, src, bad)


def _check_request(r: WekaRequest, src: str, bad: Callable[[str, str, str], None]) -> None:
    if not math.isfinite(r.t) or r.t < 0:
        bad("TRACE-VALUE", f"{r.where}.t", f"Weka trace {src} has invalid request timestamp "
            f"{r.t!r}")
    elif r.t > MAX_SECONDS:
        bad("TRACE-VALUE", f"{r.where}.t", f"Weka trace {src} has request timestamp "
            f"{r.t:.6g} s, {_PAST}")
    if not r.model.strip():
        bad("TRACE-VALUE", f"{r.where}.model", f"Weka trace {src} has an empty request model")
    if r.input == 0:
        bad("TRACE-VALUE", f"{r.where}.in", f"Weka trace {src} has a zero-length request")
    if r.api_time is not None and (not math.isfinite(r.api_time) or r.api_time < 0):
        bad("TRACE-VALUE", f"{r.where}.api_time", f"Weka trace {src} has invalid api_time; "
            "expected a finite non-negative value")
    elif r.api_time is not None and r.api_time > MAX_SECONDS:
        bad("TRACE-VALUE", f"{r.where}.api_time", f"Weka trace {src} has api_time "
            f"{r.api_time:.6g} s, {_PAST}")


_blake3 = blake3.blake3
_PAST = f"past the {MAX_SECONDS:.0e} s (about 31,700 years) a trace time may reach"


# -- the whole corpus ------------------------------------------------------------------------------

def read_weka(path: str, display: str | None = None, *, basis: str = "auto",
              expected_block_size: int | None = None
              ) -> tuple[AgenticGraph | None, list[Diagnostic]]:
    """Read, check and lower a Weka source; (graph, diagnostics); graph None on errors."""
    display = display or path
    report = _Report()
    files = _collect(path, display, report)
    plays = _read_plays(files, display, report)
    if plays is None:
        return None, _finish(report)
    if report.errors() or not plays:
        return None, _finish(report)
    block_size = plays[0].block_size
    if expected_block_size is not None and expected_block_size != block_size:
        report.add("TRACE-BLOCK-SIZE", f"Weka source block size {block_size} does not match the "
                   f"configured trace block size {expected_block_size}", display,
                   hint=f"set traffic.source.block_size to {block_size}")
        return None, _finish(report)
    resolved = resolve_basis(plays, basis)
    effective = "relative" if resolved == "relative" else "absolute"
    rows: list[GraphRow] = []
    for ordinal, play in enumerate(plays):
        notes: list[str] = []
        try:
            rows.extend(lower_play(play, ordinal, effective, notes))
        except _Lowering as exc:
            report.add(exc.rule, f"{exc} (play {play.id!r})", play.display, play.line,
                       hint=exc.hint)
            continue
        for note in notes:
            report.add("TRACE-DURATION", f"{note} (play {play.id!r})", play.display,
                       play.line, hint="fix duration_ms, or the nested timestamp basis "
                       "(relative vs absolute)", severity="warning")
    if report.errors():
        return None, _finish(report)
    raw = _raw_digest([(f.relative, f.data) for f in files])
    header = Header(block_size, "weka", _semantic_digest(raw, resolved))
    try:
        graph = build_graph(header, rows, resolved)
    except GraphError as exc:
        report.add("TRACE-GRAPH", str(exc), display)
        return None, _finish(report)
    return graph, _finish(report)


def _read_plays(files: list[_File], display: str, report: _Report) -> list[WekaPlay] | None:
    """The plays of every file, each checked; None once the corpus is past MAX_REQUESTS."""
    plays: list[WekaPlay] = []
    requests = 0
    for file in files:
        for index, (line, value) in enumerate(_values(file, report)):
            name = f"{file.relative}#{index:06d}" if file.jsonl else file.relative
            play_id = value.get("id") if isinstance(value, dict) else None
            label = f"play {play_id!r}" if isinstance(play_id, str) else f"object {index + 1}"
            try:
                play = _play(value, name, file.display, line)
            except _Bad as exc:
                report.add(exc.rule, f"Weka source {file.display}, {label}, `{exc.where}`: "
                           f"{exc}", file.display, line)
                continue

            def bad(rule: str, where: str, message: str, play: WekaPlay = play) -> None:
                report.add(rule, f"{message} (play {play.id!r}, `{where}`)", play.display,
                           play.line)

            _check(play, bad)
            requests += sum(len(e.requests) if isinstance(e, WekaSubagent) else 1
                            for e in play.entries)
            if requests > graphs.MAX_REQUESTS:
                report.add("TRACE-VALUE", f"Weka corpus {display} holds "
                           f"{graphs.too_many()} (past it at play {play.id!r})", play.display,
                           play.line,
                           hint="replay a part of the corpus")
                return None
            if plays and play.block_size != plays[0].block_size and play.block_size:
                report.add("TRACE-BLOCK-SIZE", f"Weka corpus mixes block sizes: {name} has "
                           f"{play.block_size}, expected {plays[0].block_size}", file.display,
                           line)
            plays.append(play)
    return plays


def _finish(report: _Report) -> list[Diagnostic]:
    out = list(report.found)
    if report.truncated:
        # Placed at the last finding, so that sorted output shows it after what it summarizes.
        last = max(out, key=Diagnostic.sort_key)
        out.append(diag("TRACE-TRUNCATED", f"more than {MAX_DIAGNOSTICS} problems; the rest are "
                        "not listed", file=last.file, line=last.line, column=last.column,
                        severity="note"))
    return out


def resolve_basis(plays: list[WekaPlay], configured: str) -> str:
    """auto: relative if any replayable subagent's inner request precedes its marker by more
    than 1e-6 s anywhere in the corpus, else absolute; not_applicable without subagents."""
    if configured in ("absolute", "relative"):
        return configured
    replayable = 0
    for play in plays:
        for entry in play.entries:
            if isinstance(entry, WekaSubagent) and entry.requests:
                replayable += 1
                if any(r.t < entry.t - EPS for r in entry.requests):
                    return "relative"
    return "not_applicable" if replayable == 0 else "absolute"


def _raw_digest(files: list[tuple[str, bytes]]) -> str:
    h = blake3.blake3(b"aisimulate-weka-corpus-v1\0")
    for relative, data in files:
        name = relative.encode()
        h.update(struct.pack("<Q", len(name)))
        h.update(name)
        h.update(struct.pack("<Q", len(data)))
        h.update(data)
    return h.hexdigest()


def _semantic_digest(raw: str, basis: str) -> str:
    h = blake3.blake3(b"aisimulate-weka-corpus-semantics-v2\0")
    h.update(struct.pack("<Q", len(raw)))
    h.update(raw.encode())
    h.update(struct.pack("<Q", len(basis)))
    h.update(basis.encode())
    return h.hexdigest()


# -- lowering one play -----------------------------------------------------------------------------

class _Lowering(Exception):
    def __init__(self, message: str, rule: str = "TRACE-GRAPH", hint: str | None = None) -> None:
        super().__init__(message)
        self.rule = rule
        self.hint = hint


@dataclass(slots=True)
class _Item:
    sid: str  # outer:<i> or outer:<i>:inner:<j>
    order: int
    t: float
    end: float  # t + api_time
    req: WekaRequest

    def key(self) -> tuple[float, int, bytes]:
        return (self.t, self.order, self.sid.encode())


@dataclass(slots=True)
class _Fork:
    parent: int | None
    fork_sid: str | None
    depth: int
    fork_time: float


@dataclass(slots=True)
class _Chain:
    items: list[_Item] = field(default_factory=list)
    fork: _Fork | None = None
    spliced_into: int | None = None
    tail_sid: str | None = None
    tail_hashes: list[int] = field(default_factory=list)
    tail_end: float = 0.0
    tail_model: str = ""

    def append(self, item: _Item, owner: dict[str, int], index: int) -> None:
        owner[item.sid] = index
        if item.req.hash_ids:
            self.tail_sid = item.sid
            self.tail_hashes = item.req.hash_ids
            self.tail_end = item.end
            self.tail_model = item.req.model
        self.items.append(item)


@dataclass(slots=True)
class _Stream:
    session: str
    items: list[_Item]
    fork_sid: str | None
    scope: str


def _lcp(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _split_preamble(items: list[_Item]) -> tuple[list[_Item], list[_Item]]:
    items = sorted(items, key=_Item.key)
    if len(items) < 2 or not items[0].req.hash_ids:
        return [], items
    first = items[0].req
    if any(_lcp(first.hash_ids, o.req.hash_ids) > 0 for o in items[1:]):
        return [], items
    if first.output > 64:
        others = {h for o in items[1:] for h in o.req.hash_ids}
        if any(h in others for h in first.hash_ids):
            return [], items
    return [items[0]], items[1:]


def _detect(items: list[_Item]) -> tuple[list[_Chain], int, list[int]]:
    items = sorted(items, key=_Item.key)
    chains: list[_Chain] = []
    owner: dict[str, int] = {}
    forks: dict[str, list[int]] = {}
    by_sid: dict[str, _Item] = {}
    # Chains by the first hash id of their tail, in index order: only those can extend or
    # share a prefix with a request (a play of n forks compared every chain: O(n^2)).
    by_first: dict[int, list[int]] = {}

    def place(index: int, item: _Item) -> None:
        chain = chains[index]
        before = chain.tail_hashes[0] if chain.tail_hashes else None
        chain.append(item, owner, index)
        after = chain.tail_hashes[0] if chain.tail_hashes else None
        if before != after:
            if before is not None:
                by_first[before].remove(index)
            if after is not None:
                insort(by_first.setdefault(after, []), index)

    for item in items:
        r = item.req
        by_sid[item.sid] = item
        if not r.hash_ids:
            if not chains:
                chains.append(_Chain())
            owner[item.sid] = 0
            chains[0].items.append(item)
            continue
        if not chains:
            chains.append(_Chain())
            place(0, item)
            continue
        candidates = by_first.get(r.hash_ids[0], [])
        target = _extension_target(chains, item, candidates)
        if target is not None:
            place(target, item)
            continue
        if all(not c.tail_hashes for c in chains):
            place(0, item)
            continue
        parent, depth = _max_lcp_chain(chains, r.hash_ids, candidates)
        fork_sid = chains[parent].tail_sid if parent is not None else None
        index = len(chains)
        chains.append(_Chain(fork=_Fork(parent, fork_sid, depth, item.t)))
        place(index, item)
        if fork_sid is not None and depth > 0:
            forks.setdefault(fork_sid, []).append(index)
    _resolve_seams(chains, forks, owner, by_sid)
    live = [i for i, c in enumerate(chains) if c.spliced_into is None]
    main = min(live, key=lambda i: chains[i].items[0].key()) if live else 0
    while chains[main].spliced_into is not None:
        main = chains[main].spliced_into  # type: ignore[assignment]
    workers = sorted((i for i in live if i != main), key=lambda i: chains[i].items[0].key())
    return chains, main, workers


def _extension_target(chains: list[_Chain], item: _Item, candidates: list[int]) -> int | None:
    """The chain (of `candidates`, in index order) whose tail the request extends: the longest
    tail that is a prefix of its hash ids, same model, ended by its start; the first on ties."""
    best, best_len = None, 0
    h = item.req.hash_ids
    for i in candidates:
        c = chains[i]
        tail = len(c.tail_hashes)
        if (tail == 0 or tail > len(h) or tail <= best_len or c.tail_model != item.req.model
                or c.tail_end > item.t + EPS or c.tail_hashes != h[:tail]):
            continue
        best, best_len = i, tail
    return best


def _max_lcp_chain(chains: list[_Chain], hashes: list[int],
                   candidates: list[int]) -> tuple[int | None, int]:
    """The chain (of `candidates`, in index order) sharing the longest prefix with `hashes`,
    then the longest tail, the first on ties; and that prefix's length."""
    best, key = None, (0, 0)
    for i in candidates:
        c = chains[i]
        depth = _lcp(c.tail_hashes, hashes)
        candidate = (depth, len(c.tail_hashes))
        if depth > 0 and candidate > key:
            best, key = i, candidate
    return best, key[0]


def _seam_eligible(chain: _Chain, tail: _Item) -> bool:
    fork = chain.fork
    if fork is None or fork.depth == 0 or not chain.items:
        return False
    first = chain.items[0]
    gap = first.t - tail.end
    overlap = fork.depth / max(len(tail.req.hash_ids), 1)
    return (tail.end <= first.t + EPS and first.req.model == tail.req.model
            and not (gap > SEAM_MAX_GAP and overlap < SEAM_MIN_OVERLAP))


def _elect(chains: list[_Chain], eligible: list[int]) -> int:
    """The chain spliced at a seam: max by depth, then earlier fork time, then lower index."""
    elected = eligible[0]
    for i in eligible[1:]:
        a, b = chains[elected].fork, chains[i].fork
        assert a is not None and b is not None
        if (a.depth, -a.fork_time, -elected) <= (b.depth, -b.fork_time, -i):
            elected = i
    return elected


def _resolve_seams(chains: list[_Chain], forks: dict[str, list[int]], owner: dict[str, int],
                   by_sid: dict[str, _Item]) -> None:
    # Fork points in UTF-8 order, smallest first (a heap: taking the min of a set each time
    # was O(n^2) in a play of n forks); a point is queued at most once at a time.
    queued = set(forks)
    queue = [(sid.encode(), sid) for sid in queued]
    heapify(queue)
    aliases: dict[int, int] = {}
    processed: set[str] = set()
    while queue:
        sid = heappop(queue)[1]
        queued.discard(sid)
        if sid in processed:
            continue
        processed.add(sid)
        head = owner[sid]
        while head in aliases:
            head = aliases[head]
        if chains[head].tail_sid != sid:
            continue
        tail = by_sid[sid]
        registered = [i for i in forks[sid] if chains[i].spliced_into is None]
        eligible = [i for i in registered if _seam_eligible(chains[i], tail)]
        if not eligible:
            continue
        elected = _elect(chains, eligible)
        moved = chains[elected].items
        chains[elected].items = []
        for item in moved:
            owner[item.sid] = head
        into, source = chains[head], chains[elected]
        into.items.extend(moved)
        into.tail_sid, into.tail_hashes = source.tail_sid, source.tail_hashes
        into.tail_end, into.tail_model = source.tail_end, source.tail_model
        source.spliced_into = head
        aliases[elected] = head
        new_tail = into.tail_sid
        if new_tail is None:
            continue
        tail_item = by_sid[new_tail]
        for candidate in registered:
            if candidate == elected or chains[candidate].spliced_into is not None:
                continue
            first = chains[candidate].items[0]
            if tail_item.t > first.t + EPS:
                continue
            depth = _lcp(into.tail_hashes, first.req.hash_ids)
            if depth == 0:
                continue
            fork = chains[candidate].fork
            assert fork is not None
            fork.parent, fork.fork_sid, fork.depth = head, new_tail, depth
            forks.setdefault(new_tail, []).append(candidate)
            processed.discard(new_tail)
            if new_tail not in queued:
                queued.add(new_tail)
                heappush(queue, (new_tail.encode(), new_tail))


def _streams(ns: str, prefix: str, chains: list[_Chain], main: int, workers: list[int],
             preamble: list[_Item]) -> list[_Stream]:
    if not chains:
        chains, main = [_Chain()], 0
    fork = chains[main].fork
    scope = f"{ns}:scope:{prefix}"
    out = [_Stream(f"{ns}:session:{prefix}", sorted(chains[main].items + preamble, key=_Item.key),
                   fork.fork_sid if fork else None, scope)]
    for k, i in enumerate(workers):
        fork = chains[i].fork
        out.append(_Stream(f"{ns}:session:{prefix}:worker:{k}", list(chains[i].items),
                           fork.fork_sid if fork else None, scope))
    return out


def _canonical_inner(inner_t: float, marker_t: float, basis: str, where: str, play: WekaPlay,
                     agent: str, j: int) -> float:
    if basis == "relative":
        t = marker_t + inner_t
        if not math.isfinite(t):
            raise _Lowering(f"Weka source {play.source_name}, trace {play.id}, subagent {agent} "
                            f"inner request {j} overflows while converting a relative timestamp")
        if t > MAX_SECONDS:
            raise _Lowering(f"Weka source {play.source_name}, trace {play.id}, subagent {agent} "
                            f"inner request {j} starts at {t:.6g} s relative to its marker, "
                            f"{_PAST} (`{where}.t`)", "TRACE-VALUE")
        return t
    if inner_t < marker_t - EPS:
        raise _Lowering(
            f"Weka source {play.source_name}, trace {play.id}, subagent {agent} inner request {j} "
            f"at {_rust(inner_t)} precedes its marker at {_rust(marker_t)} under absolute "
            f"nested_timestamp_basis (`{where}.t`)", "TRACE-NESTED-TIME",
            hint="nested timestamps look relative to their marker: set traffic.source."
                 "nested_timestamp_basis to relative (or auto)")
    return max(inner_t, marker_t)


def _rust(x: float) -> str:
    """Rust's f64 Display: shortest round trip, positional, no trailing `.0`."""
    text = repr(float(x))
    if "e" in text:
        text = f"{x:.20f}".rstrip("0").rstrip(".")
    return text[:-2] if text.endswith(".0") else text


def _end(r: WekaRequest, t: float) -> float:
    return t + max(r.api_time or 0.0, 0.0)


def lower_play(play: WekaPlay, ordinal: int, basis: str,
               notes: list[str] | None = None) -> list[GraphRow]:
    """The v2 rows of one play (sorted by request id), as the reference lowers it; what the
    replay takes differently from what the play says is added to `notes`."""
    ns = "weka:" + blake3.blake3(play.source_name.encode()).hexdigest()[:16]
    play_id = f"{ns}:play:{play.id}"
    top: list[_Item] = []
    explicit: list[tuple[int, WekaSubagent]] = []
    for i, entry in enumerate(play.entries):
        if isinstance(entry, WekaSubagent):
            explicit.append((i, entry))
        else:
            top.append(_Item(f"outer:{i}", i, entry.t, _end(entry, entry.t), entry))
    if not top:
        raise _Lowering(f"Weka trace {play.source_name} has no parent requests")
    pre, rest = _split_preamble(top)
    chains, main, workers = _detect(rest)
    streams = _streams(ns, "root", chains, main, workers, pre)
    parents = len(streams)
    joins: list[tuple[str, list[str]]] = []
    for oi, sub in explicit:
        candidates = [(si, item) for si, s in enumerate(streams[:parents]) for item in s.items
                      if item.order < oi]
        if not candidates:
            raise _Lowering(f"Weka trace {play.source_name} has subagent {sub.agent_id} at outer "
                            f"index {oi} without a preceding parent request")
        owner_stream, owner_item = max(candidates, key=lambda c: c[1].order)
        inner = _inner_items(play, oi, sub, basis, notes)
        if not inner:
            continue
        pre, rest = _split_preamble(inner)
        child_chains, child_main, child_workers = _detect(rest)
        prefix = f"subagent:{oi}:{sub.agent_id}"
        children = _streams(ns, prefix, child_chains, child_main, child_workers, pre)
        children[0].fork_sid = owner_item.sid
        for s in children:
            s.scope = children[0].session
        join_sid = _join_target(streams[owner_stream], oi, sub, inner)
        start = len(streams)
        streams.extend(children)
        if join_sid is not None:
            terminals = [s.items[-1].sid for s in streams[start:] if s.items]
            if terminals:
                joins.append((join_sid, terminals))
    return _rows(play, ordinal, ns, play_id, streams, joins)


def _inner_items(play: WekaPlay, oi: int, sub: WekaSubagent, basis: str,
                 notes: list[str] | None) -> list[_Item]:
    """A subagent's requests on the play's clock. A completed subagent whose stated duration
    ends before its own last request is replayed as the reference (1.6.1) does, the parent
    resuming at the stated end; `notes` says so."""
    inner = []
    for j, r in enumerate(sub.requests):
        t = _canonical_inner(r.t, sub.t, basis, r.where, play, sub.agent_id, j)
        if not math.isfinite(t) or t < 0:
            raise _Lowering(f"Weka trace {play.source_name} has invalid request timestamp",
                            "TRACE-VALUE")
        inner.append(_Item(f"outer:{oi}:inner:{j}", j, t, _end(r, t), r))
    if inner and sub.status == "completed" and sub.duration_ms is not None:
        stated = sub.t + sub.duration_ms / 1000.0
        last = max(inner, key=lambda item: item.end)
        if last.end > stated + EPS and notes is not None:
            notes.append(
                f"Weka trace {play.source_name} has subagent {sub.agent_id} whose duration_ms "
                f"{sub.duration_ms} understates its own requests: {last.sid} ends at "
                f"{_rust(last.end)} s, after the stated end {_rust(stated)} s "
                f"(`{sub.where}.duration_ms`); the parent resumes at the stated end")
    return inner


def _join_target(owner: _Stream, oi: int, sub: WekaSubagent, inner: list[_Item]) -> str | None:
    """A completed subagent joins its owner stream's first later request that starts after
    the subagent's end."""
    if sub.status != "completed":
        return None
    if sub.duration_ms is not None:
        child_end = sub.t + sub.duration_ms / 1000.0
    else:
        child_end = max([sub.t] + [item.end for item in inner])
    later = [item for item in owner.items if item.order > oi and item.t + EPS >= child_end]
    return min(later, key=lambda item: item.order).sid if later else None


class _Edges:
    """The dependencies of a play's requests, by target; an edge already there (same source,
    trigger and relation) is not added again."""

    __slots__ = ("deps", "ns")

    def __init__(self, ns: str) -> None:
        self.ns = ns
        self.deps: dict[str, list[Dependency]] = {}

    def rid(self, sid: str) -> str:
        return f"{self.ns}:request:{sid}"

    def push(self, target: str, source: str, trigger: str, delay_ms: float,
             relation: str) -> None:
        dep = Dependency(self.rid(source), trigger, delay_ms, relation)
        found = self.deps.setdefault(target, [])
        if not any(d.request_id == dep.request_id and d.trigger == dep.trigger
                   and d.relation == dep.relation for d in found):
            found.append(dep)

    def sequences_and_forks(self, streams: list[_Stream], items: dict[str, _Item]) -> None:
        """Each stream in order; a forked stream's first request after its parent's dispatch
        (while the parent runs) or completion."""
        for s in streams:
            for p, q in zip(s.items, s.items[1:], strict=False):
                self.push(q.sid, p.sid, "completion", seconds_to_ms(q.t - p.end), "sequence")
        for s in streams:
            if not s.items or s.fork_sid is None:
                continue
            first, parent = s.items[0], items[s.fork_sid]
            if first.t < parent.end:
                self.push(first.sid, parent.sid, "dispatch", seconds_to_ms(first.t - parent.t),
                          "spawn")
            else:
                self.push(first.sid, parent.sid, "completion",
                          seconds_to_ms(first.t - parent.end), "spawn")

    def barriers(self, streams: list[_Stream]) -> None:
        """Within a scope, a request waits for the latest finished request of each other
        stream that no other such request follows (replay barriers)."""
        scopes: dict[str, list[_Stream]] = {}
        for s in streams:
            scopes.setdefault(s.scope, []).append(s)
        for scope in sorted(scopes, key=str.encode):
            for target, frontier in replay_barriers(scopes[scope]):
                for c in frontier:
                    self.push(target.sid, c.sid, "completion", 0.0, "replay_barrier")

    def joins_and_roots(self, streams: list[_Stream], items: dict[str, _Item],
                        joins: list[tuple[str, list[str]]]) -> None:
        """Subagent joins; then every stream start without a dependency spawns from the
        root."""
        for target_sid, terminals in joins:
            for terminal in terminals:
                self.push(target_sid, terminal, "completion",
                          seconds_to_ms(items[target_sid].t - items[terminal].end), "join")
        root = streams[0].items[0]
        for s in streams:
            if not s.items:
                continue
            first = s.items[0]
            if first.sid == root.sid or self.deps.get(first.sid):
                continue
            self.push(first.sid, root.sid, "dispatch", seconds_to_ms(first.t - root.t),
                      "spawn")


def _rows(play: WekaPlay, ordinal: int, ns: str, play_id: str, streams: list[_Stream],
          joins: list[tuple[str, list[str]]]) -> list[GraphRow]:
    items = {item.sid: item for s in streams for item in s.items}
    edges = _Edges(ns)
    edges.sequences_and_forks(streams, items)
    edges.barriers(streams)
    edges.joins_and_roots(streams, items, joins)
    deps = edges.deps
    root_time = min(item.t for s in streams for item in s.items)
    used: dict[Any, Any] = {}  # value -> identity, (domain, identity) -> value, "blocks"
    rows = []
    for s in streams:
        for item in s.items:
            r = item.req
            request_id = edges.rid(item.sid)
            rows.append(GraphRow(
                request_id=request_id, play_id=play_id, source_play_ordinal=ordinal,
                session_id=s.session, model=r.model, input_length=r.input,
                output_length=r.output,
                hash_ids=_normalized_hashes(play.source_name, request_id, r, play.block_size,
                                            used),
                not_before_ms=seconds_to_ms(item.t - root_time),
                recorded_api_time_ms=None if r.api_time is None else seconds_to_ms(r.api_time),
                dependencies=deps.pop(item.sid, [])))
    rows.sort(key=lambda row: row.request_id.encode())
    return rows


def replay_barriers(members: list[_Stream]) -> Iterator[tuple[_Item, list[_Item]]]:
    """Each request of a scope with the requests it waits on at replay (the reference's
    barriers): of every other stream of the scope, the latest-ending request that started
    before it and ended by its start (+ EPS), less any of those that ended by the start of a
    later-starting one. Targets come in start order, so every stream's best candidate only
    grows; the frontier is read from the candidates sorted by start and by end: the latest
    start M among the other streams' candidates, then those starting at M or ending after M +
    EPS, in stream order. O(n log n + barriers), where comparing every pair was O(n^3)."""
    entries = [(item, m) for m, stream in enumerate(members) for item in stream.items]
    order = sorted(entries, key=lambda e: e[0].t)
    started: list[tuple[float, int]] = []  # (end, index in order) of those started before t
    best: list[_Item | None] = [None] * len(members)
    by_start: list[tuple[float, int]] = []  # (t, stream) of every stream's candidate, sorted
    by_end: list[tuple[float, int]] = []  # (end, stream), sorted
    pending = i = 0
    while i < len(order):
        t = order[i][0].t
        j = i
        while j < len(order) and order[j][0].t == t:
            j += 1
        while pending < len(order) and order[pending][0].t < t:
            heappush(started, (order[pending][0].end, pending))
            pending += 1
        limit = t + EPS
        while started and started[0][0] <= limit:
            c, m = order[heappop(started)[1]]
            old = best[m]
            if old is not None:
                if (c.end, c.t, c.sid.encode()) <= (old.end, old.t, old.sid.encode()):
                    continue
                del by_start[bisect_left(by_start, (old.t, m))]
                del by_end[bisect_left(by_end, (old.end, m))]
            best[m] = c
            insort(by_start, (c.t, m))
            insort(by_end, (c.end, m))
        for target, own in order[i:j]:
            latest = next((start for start, m in reversed(by_start) if m != own), None)
            if latest is None:
                continue
            chosen: set[int] = set()
            for start, m in reversed(by_start):
                if m == own:
                    continue
                if start != latest:
                    break
                chosen.add(m)
            bound = latest + EPS
            for end, m in reversed(by_end):
                if not end > bound:
                    break
                if m != own:
                    chosen.add(m)
            yield target, [best[m] for m in sorted(chosen)]  # type: ignore[misc]
        i = j


def _unique_hash(domain: str, identity: str, used: dict[Any, Any]) -> int:
    """The first collision-free 64-bit value of BLAKE3(domain, identity, nonce) in the play;
    an identity seen before gets its value again (kept under the key (domain, identity))."""
    known = used.get((domain, identity))
    if known is not None:
        return int(known)
    for nonce in range(1 << 32):
        value = int.from_bytes(_blake3(f"{domain}\0{identity}\0{nonce}".encode()).digest(8),
                               "little")
        holder = used.get(value)
        if holder is not None and holder != identity:
            continue
        used[value] = identity
        used[(domain, identity)] = value
        return value
    raise _Lowering(f"could not allocate a collision-free hash for {identity}")


def _normalized_hashes(source_name: str, request_id: str, r: WekaRequest, block_size: int,
                       used: dict[Any, Any]) -> list[int]:
    """Per-play block identities: full blocks by the play's hash ids (missing ones private),
    a trailing partial block always private."""
    full, partial = divmod(r.input, block_size)
    hash_ids = r.hash_ids
    blocks = used.setdefault("blocks", {})  # this play's hash id -> its block value
    out = []
    for h in hash_ids[:full]:
        value = blocks.get(h)
        if value is None:
            value = blocks[h] = _unique_hash("weka-full-block", f"source:{source_name}:{h}",
                                             used)
        out.append(value)
    for i in range(len(out), full):
        out.append(_unique_hash("weka-full-block", f"private:missing:{request_id}:{i}", used))
    if partial:
        out.append(_unique_hash("weka-partial-tail", f"{request_id}:{full}:{r.input}", used))
    return out
