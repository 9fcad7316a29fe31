"""The agentic lowering of a Dynamo request trace: requests with `agent_context` -> graph rows.

The reference's rules (aisimulate-core, Dynamo 1.6.1), in its order: a session's requests in
sequence, then each child session (by session id) spawned and joined from its parent session,
through its tool call when one names it, else by the recorded times; edge delays are the
recorded gaps (a negative one is refused, as the reference refuses it); a request without an
incoming edge starts at its recorded time; connected requests form one play.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from kvreplay.engine.traces.agentic.graph import Dependency, GraphError, GraphRow

if TYPE_CHECKING:
    from kvreplay.engine.traces.dynamo_trace import Entry, Tool

MODES = ("blocking", "background")
PLAY_PREFIX = "dynamo-play"


def lower_agentic(entries: list[Entry], tools: list[Tool]) -> list[GraphRow]:
    """Graph rows in `entries` order (sorted by start, end, request id)."""
    index = {e.request_id: i for i, e in enumerate(entries)}
    by_session: dict[str, list[int]] = {}
    parents: dict[str, str] = {}
    for i, e in enumerate(entries):
        assert e.session is not None
        by_session.setdefault(e.session, []).append(i)
        if e.parent is not None:
            known = parents.setdefault(e.session, e.parent)
            if known != e.parent:
                raise GraphError(f"session {e.session!r} has conflicting parent_session_id "
                                 f"values {known!r} and {e.parent!r}", e.line, e.request_id)
    deps: list[list[Dependency]] = [[] for _ in entries]
    for members in by_session.values():
        for a, b in itertools.pairwise(members):
            _push(deps[b], _edge(entries, a, b, "completion", "sequence"))
    explicit = _explicit_tools(entries, tools, index, by_session)
    for child in sorted(parents):
        _link_child(entries, deps, index, by_session, child, parents[child], explicit)
    rows = []
    first = entries[0].start
    for e, edges in zip(entries, deps, strict=True):
        rows.append(GraphRow(
            request_id=e.request_id, play_id="", session_id=str(e.session),
            model=e.model if e.model is not None else "unknown", input_length=e.input_length,
            output_length=int(e.output or 0), hash_ids=list(e.hashes),
            not_before_ms=float(e.start - first) if not edges else 0.0, dependencies=edges,
            line=e.line))
    _name_plays(rows, index)
    return rows


def _explicit_tools(entries: list[Entry], tools: list[Tool], index: dict[str, int],
                    by_session: dict[str, list[int]]) -> dict[str, Tool]:
    """Tool calls that name a child session present in the trace, by child session."""
    explicit: dict[str, Tool] = {}
    for tool in tools:
        if tool.source is None:
            continue
        if tool.mode not in MODES:
            raise GraphError(f"tool {tool.call_id!r} ({tool.tool_class}) has unsupported "
                             f"execution_mode {tool.mode!r}", tool.line)
        for rid in (tool.source, tool.consumer):
            if rid is None:
                continue
            if rid not in index:
                raise GraphError(f"tool {tool.call_id!r} references unknown request_id {rid!r}",
                                 tool.line)
            session = entries[index[rid]].session
            if session != tool.session:
                raise GraphError(f"tool {tool.call_id!r} request {rid!r} belongs to session "
                                 f"{session!r}, expected {tool.session!r}", tool.line)
        if tool.child is None or tool.child not in by_session:
            continue
        if tool.child in explicit:
            raise GraphError(f"multiple tool events reference child session {tool.child!r}",
                             tool.line)
        explicit[tool.child] = tool
    return explicit


def _link_child(entries: list[Entry], deps: list[list[Dependency]], index: dict[str, int],
                by_session: dict[str, list[int]], child: str, parent: str,
                explicit: dict[str, Tool]) -> None:
    members = by_session[child]
    if parent not in by_session:
        e = entries[members[0]]
        raise GraphError(f"child session {child!r} references unknown parent session "
                         f"{parent!r}", e.line, e.request_id)
    in_parent = by_session[parent]
    first = members[0]
    last = max(members, key=lambda i: (entries[i].end, entries[i].start,
                                       entries[i].request_id))
    tool = explicit.get(child)
    if tool is not None:
        assert tool.source is not None
        spawn = index[tool.source]
        if spawn not in in_parent:
            raise GraphError(f"tool {tool.call_id!r} source request {tool.source!r} is not in "
                             f"parent session {parent!r}", tool.line)
        _push(deps[first], _edge(entries, spawn, first, "dispatch", "spawn"))
        if tool.consumer is not None:
            join = index[tool.consumer]
            if join not in in_parent:
                raise GraphError(f"tool {tool.call_id!r} consumer request {tool.consumer!r} is "
                                 f"not in parent session {parent!r}", tool.line)
            _push(deps[join], _edge(entries, last, join, "completion", "join"))
        return
    before = [i for i in in_parent if entries[i].start <= entries[first].start]
    if before:
        latest = max(entries[i].start for i in before)
        spawn = [i for i in before if entries[i].start == latest][-1]  # max_by_key: the last
        _push(deps[first], _edge(entries, spawn, first, "dispatch", "spawn"))
    after = [i for i in in_parent if entries[i].start >= entries[last].end]
    if after:
        earliest = min(entries[i].start for i in after)
        join = next(i for i in after if entries[i].start == earliest)  # min_by_key: the first
        _push(deps[join], _edge(entries, last, join, "completion", "join"))


def _edge(entries: list[Entry], source: int, target: int, trigger: str,
          relation: str) -> Dependency:
    at = entries[source].start if trigger == "dispatch" else entries[source].end
    delay = entries[target].start - at
    if delay < 0:
        t = entries[target]
        raise GraphError(f"request {t.request_id!r} starts {-delay} ms before its {relation} "
                         f"predecessor {entries[source].request_id!r} "
                         f"{'starts' if trigger == 'dispatch' else 'ends'}: a negative "
                         "dependency delay", t.line, t.request_id)
    return Dependency(entries[source].request_id, trigger, float(delay), relation)


def _push(edges: list[Dependency], dep: Dependency) -> None:
    if not any(d.request_id == dep.request_id and d.trigger == dep.trigger for d in edges):
        edges.append(dep)


def _name_plays(rows: list[GraphRow], index: dict[str, int]) -> None:
    """Connected requests form a play named after its first root request (row order: the
    first of the component without dependencies)."""
    parent = list(range(len(rows)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, row in enumerate(rows):
        for dep in row.dependencies:
            a, b = find(i), find(index[dep.request_id])
            if a != b:
                parent[max(a, b)] = min(a, b)
    names: dict[int, str] = {}
    for i, row in enumerate(rows):
        if not row.dependencies:
            names.setdefault(find(i), row.request_id)
    for i, row in enumerate(rows):
        row.play_id = f"{PLAY_PREFIX}:{names.get(find(i), rows[find(i)].request_id)}"
