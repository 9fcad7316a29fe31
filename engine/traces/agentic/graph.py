"""The agentic dependency graph ("Agentic Mooncake v2"): nodes, edges, plays, identity.

Both readers (Weka plays, v2 files) produce `GraphRow`s; `build_graph` checks them as the
reference's graph builder does and orders them: nodes sorted by request id (bytes), which is
the graph ordinal (the report's uuid is ordinal + 1), plays in corpus order. `graph_digest` is
the reference's canonical digest (BLAKE3 of the serde JSON of the sorted nodes), so an equal
digest means equal ids, sessions, hashes, delays, triggers and relations.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import blake3

from kvreplay.engine.traces.agentic import serde

SCHEMA = "dynamo.agentic_mooncake"
VERSION = 2
# An agentic replay holds its whole graph (and a driver node per request): 2.5-4.5 KB a request
# measured (40,000 requests in one play, or in 40,000 one-request plays, 95-170 MB), so a
# corpus of 100,000 requests replays in under half a gigabyte. Larger ones are refused while
# they are read, before the graph is built.
MAX_REQUESTS = 100_000


def too_many() -> str:
    """Why a corpus past MAX_REQUESTS is refused (read at call time: tests scale the bound)."""
    return (f"more than {MAX_REQUESTS:,} requests, the most an agentic replay takes (it holds "
            "the whole graph in memory)")
TRIGGERS = ("dispatch", "completion")
RELATIONS = ("sequence", "spawn", "join", "replay_barrier")
_TRIGGER_ORDER = {name: i for i, name in enumerate(TRIGGERS)}
_RELATION_ORDER = {name: i for i, name in enumerate(RELATIONS)}
DIGEST_CHUNK = 256  # nodes hashed per update of the graph digest


class GraphError(ValueError):
    """A graph the builder refuses; `line` is the source line of the request (None: global)."""

    def __init__(self, message: str, line: int | None = None,
                 request_id: str | None = None) -> None:
        super().__init__(message)
        self.line = line
        self.request_id = request_id


@dataclass(frozen=True, slots=True)
class Dependency:
    request_id: str
    trigger: str  # dispatch | completion
    delay_ms: float
    relation: str  # sequence | spawn | join | replay_barrier

    def to_json(self) -> dict[str, Any]:
        return {"request_id": self.request_id, "trigger": self.trigger,
                "delay_ms": float(self.delay_ms), "relation": self.relation}


@dataclass(slots=True)
class GraphRow:
    """One request of the graph as a v2 row carries it (`line`: where it was read)."""

    request_id: str
    play_id: str
    session_id: str
    model: str
    input_length: int
    output_length: int
    hash_ids: list[int]
    not_before_ms: float
    dependencies: list[Dependency] = field(default_factory=list)
    source_play_ordinal: int | None = None
    output_token_ids: list[int] | None = None
    recorded_api_time_ms: float | None = None
    priority: int | None = None
    strict_priority: int | None = None
    policy_class: str | None = None
    line: int | None = None

    def to_v2(self) -> dict[str, Any]:
        """The row as written to a v2 file (the reference's field order and omissions)."""
        out: dict[str, Any] = {"request_id": self.request_id, "play_id": self.play_id}
        if self.source_play_ordinal is not None:
            out["source_play_ordinal"] = self.source_play_ordinal
        out.update({"session_id": self.session_id, "model": self.model,
                    "input_length": self.input_length, "output_length": self.output_length})
        if self.output_token_ids is not None:
            out["output_token_ids"] = list(self.output_token_ids)
        out["hash_ids"] = list(self.hash_ids)
        out["not_before_ms"] = float(self.not_before_ms)
        if self.recorded_api_time_ms is not None:
            out["recorded_api_time_ms"] = float(self.recorded_api_time_ms)
        for key in ("priority", "strict_priority", "policy_class"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.dependencies:
            out["dependencies"] = [d.to_json() for d in self.dependencies]
        return out


@dataclass(frozen=True, slots=True)
class Header:
    block_size: int
    source_format: str
    source_digest: str

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "version": VERSION, "block_size": self.block_size,
                "hash_id_scope": "local",
                "source": {"format": self.source_format, "digest": self.source_digest}}


@dataclass(slots=True)
class Play:
    play_id: str
    ordinal: int  # corpus order
    nodes: list[int]  # graph ordinals, ascending
    roots: list[int]


@dataclass(slots=True)
class AgenticGraph:
    header: Header
    nodes: list[GraphRow]  # sorted by request id (bytes): index = graph ordinal
    plays: list[Play]  # corpus order
    index: dict[str, int]  # request id -> ordinal
    basis: str | None = None  # the resolved Weka nested-timestamp basis (None: v2 input)

    def digest(self) -> str:
        return graph_digest(self.header.block_size, self.nodes)

    def source_models(self) -> list[str]:
        return sorted({n.model for n in self.nodes})

    def v2_lines(self) -> Iterable[str]:
        """The graph as a v2 file (header, then rows play by play in corpus order)."""
        yield serde.dumps(self.header.to_json())
        for play in self.plays:
            for ordinal in sorted(play.nodes, key=lambda i: self.nodes[i].line or 0):
                yield serde.dumps(self.nodes[ordinal].to_v2())

    def normalize_starts(self) -> None:
        """Shift every not_before so that the earliest is 0 (the reference does on load)."""
        low = min((n.not_before_ms for n in self.nodes), default=0.0)
        if low:
            for n in self.nodes:
                n.not_before_ms -= low

    def speed_up(self, ratio: float) -> None:
        """Divide not_before and every edge delay by `ratio` (arrival_speedup_ratio)."""
        if ratio == 1.0:
            return
        for n in self.nodes:
            n.not_before_ms /= ratio
            n.dependencies = [Dependency(d.request_id, d.trigger, d.delay_ms / ratio, d.relation)
                              for d in n.dependencies]


def graph_digest(block_size: int, nodes: Sequence[GraphRow]) -> str:
    """The reference's canonical graph digest (BLAKE3 of the sorted nodes' serde JSON)."""
    h = blake3.blake3(f'{{"block_size":{block_size},"nodes":['.encode())
    quoted: dict[str, str] = {}  # ids and names recur (plays, sessions, models, dependencies)

    def q(text: str) -> str:
        out = quoted.get(text)
        if out is None:
            out = quoted[text] = _quote(text)
        return out

    ordered = sorted(nodes, key=lambda r: r.request_id.encode())
    for start in range(0, len(ordered), DIGEST_CHUNK):  # one update per chunk of nodes
        text = ",".join(_node_json(n, q) for n in ordered[start:start + DIGEST_CHUNK])
        h.update((text if start == 0 else "," + text).encode())
    h.update(b"]}")
    return h.hexdigest()


def _node_json(n: GraphRow, q: Callable[[str], str]) -> str:
    """One node as serde writes it (the field order of the reference's node struct)."""
    f = serde.f64
    ordinal = ("" if n.source_play_ordinal is None
               else f',"source_play_ordinal":{n.source_play_ordinal}')
    outputs = ("null" if n.output_token_ids is None
               else "[" + ",".join(map(str, n.output_token_ids)) + "]")
    replay_key = "null" if n.output_token_ids is None else q(n.request_id)
    api = ("" if n.recorded_api_time_ms is None
           else f',"recorded_api_time_ms":{f(float(n.recorded_api_time_ms))}')
    policy = "null" if n.policy_class is None else q(n.policy_class)
    deps = sorted(n.dependencies, key=lambda d: (d.request_id.encode(),
                                                 _TRIGGER_ORDER[d.trigger],
                                                 _RELATION_ORDER[d.relation], d.delay_ms))
    edges = ",".join(
        f'{{"request_id":{q(d.request_id)},"trigger":"{d.trigger}","delay_ms":'
        f'{f(float(d.delay_ms))},"relation":"{d.relation}"}}' for d in deps)
    return (f'{{"request_id":{q(n.request_id)},"play_id":{q(n.play_id)}{ordinal},'
            f'"session_id":{q(n.session_id)},"model":{q(n.model)},'
            f'"input_length":{n.input_length},"max_output_tokens":{n.output_length},'
            f'"output_token_ids":{outputs},"replay_key":{replay_key},'
            f'"hash_ids":[{",".join(map(str, n.hash_ids))}],'
            f'"not_before_ms":{f(float(n.not_before_ms))}{api},'
            f'"priority":{n.priority or 0},"strict_priority":{n.strict_priority or 0},'
            f'"policy_class":{policy},"dependencies":[{edges}]}}')


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def build_graph(header: Header, rows: list[GraphRow], basis: str | None = None) -> AgenticGraph:
    """Check and order the rows; raises GraphError as the reference's builder would."""
    seen: dict[str, GraphRow] = {}
    for row in rows:
        if row.request_id in seen:
            raise GraphError(f"duplicates request_id {row.request_id}", row.line, row.request_id)
        seen[row.request_id] = row
    nodes = sorted(rows, key=lambda r: r.request_id.encode())
    index = {n.request_id: i for i, n in enumerate(nodes)}
    for n in nodes:
        for dep in n.dependencies:
            pred = seen.get(dep.request_id)
            if pred is None:
                raise GraphError(f"request {n.request_id} references unknown request_id "
                                 f"{dep.request_id}", n.line, n.request_id)
            if pred is n:
                raise GraphError(f"request {n.request_id} cannot depend on itself", n.line,
                                 n.request_id)
            if pred.play_id != n.play_id:
                raise GraphError(f"request {n.request_id} in play {n.play_id} depends on request "
                                 f"{pred.request_id} in play {pred.play_id}", n.line, n.request_id)
    _check_acyclic(nodes, index)
    by_play: dict[str, list[int]] = {}
    for i, n in enumerate(nodes):
        by_play.setdefault(n.play_id, []).append(i)
    order = _play_order(nodes, by_play)
    plays = []
    for rank, play_id in enumerate(order):
        members = by_play[play_id]
        roots = [i for i in members if not nodes[i].dependencies]
        if not roots:
            raise GraphError(f"play {play_id} must have at least one root request, found 0",
                             nodes[members[0]].line)
        plays.append(Play(play_id, rank, members, roots))
    return AgenticGraph(header, nodes, plays, index, basis)


def _play_order(nodes: list[GraphRow], by_play: dict[str, list[int]]) -> list[str]:
    """The plays in order: by source_play_ordinal when every play sets one (unique and
    contiguous from 0), else by play id."""
    ordinals: dict[str, int | None] = {}
    for play_id, members in by_play.items():
        values = {nodes[i].source_play_ordinal for i in members}
        if len(values) > 1:
            raise GraphError(f"play {play_id} has inconsistent source_play_ordinal values",
                             nodes[members[0]].line)
        ordinals[play_id] = values.pop()
    given = [o for o in ordinals.values() if o is not None]
    if given and len(given) != len(ordinals):
        unset = next(p for p, o in ordinals.items() if o is None)
        raise GraphError("source_play_ordinal must be set for every play when it is used "
                         f"(play {unset} has none)", _first_line(nodes, by_play[unset]))
    if given:
        by_ordinal = sorted((o, p) for p, o in ordinals.items())
        for expected, (value, play_id) in enumerate(by_ordinal):
            if value != expected:
                raise GraphError("source_play_ordinal values must be unique and contiguous from "
                                 f"0; expected {expected}, found {value} (play {play_id})",
                                 _first_line(nodes, by_play[play_id]))
        return sorted(by_play, key=lambda p: ordinals[p])  # type: ignore[arg-type, return-value]
    return sorted(by_play, key=lambda p: p.encode())


def _first_line(nodes: list[GraphRow], members: list[int]) -> int | None:
    """The first source line of a play's rows (None when they were not read from lines)."""
    lines = [line for i in members if (line := nodes[i].line) is not None]
    return min(lines, default=None)


def _check_acyclic(nodes: list[GraphRow], index: dict[str, int]) -> None:
    """Kahn's algorithm; a cycle names (up to) its first 8 blocked requests in node order."""
    indegree = [len(n.dependencies) for n in nodes]
    dependents: list[list[int]] = [[] for _ in nodes]
    for i, n in enumerate(nodes):
        for dep in n.dependencies:
            dependents[index[dep.request_id]].append(i)
    ready = [i for i, d in enumerate(indegree) if d == 0]
    done = 0
    while ready:
        i = ready.pop()
        done += 1
        for j in dependents[i]:
            indegree[j] -= 1
            if indegree[j] == 0:
                ready.append(j)
    if done != len(nodes):
        blocked = [nodes[i].request_id for i, d in enumerate(indegree) if d > 0]
        raise GraphError(f"cycle detected among {len(blocked)} agentic requests; blocked request "
                         f"IDs: {', '.join(blocked[:8])}", nodes[index[blocked[0]]].line,
                         blocked[0])
