"""Request-boundary snapshots of agentic plays, and fresh play instances (engine.md section 6).

A play *instance* is one execution of a source play on a lane: `slot = ordinal * lanes + lane`
gives it its own identities (`agentic-v1:{graph digest}:{seed}:{lane}:{ordinal}`, request and
conversation ids under it, a `:cache` id) and its own prompt tokens (`slot * stride + rank`, the
rank of a hash id among the play's distinct ids in first-seen order), so an instance never hits
another instance's cache keys, in G1 or G2. The source play is `slot % plays`.

A snapshot cuts an instance at `t_star`: a seeded uniform draw (BLAKE3 of the compact JSON of
`["aisimulate.agentic.snapshot.v1", seed, graph digest, source play id, lane, ordinal]`, its
upper 53 bits of the first 8 little-endian bytes) placed in the middle half of the play's
recorded request starts. Requests that started before the cut are history: never executed,
their latest request per live conversation becomes a warmup primer. The rest keeps the edges
between retained requests; edges from history become a remaining delay from the cut. A cut at
the first start (`from_start`) keeps the whole play. All of this is the reference's algorithm
(aisimulate `loadgen/snapshot.rs`), checked against its figures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import blake3

from kvreplay.engine.traces.agentic import serde
from kvreplay.engine.traces.agentic.graph import AgenticGraph, Play

SCHEMA = "aisimulate.agentic.snapshot.v1"
U32 = 1 << 32


class SnapshotError(ValueError):
    """A snapshot the reference refuses (a cut across a dependency, identities exhausted)."""


@dataclass(slots=True)
class InstanceRequest:
    """One source request of an instance (the snapshot evidence row, plus execution data)."""

    source: int  # graph ordinal
    identity: dict[str, str]
    recorded_start_ms: float
    recorded_end_ms: float | None
    historical: bool
    remaining_delay_ms: float  # source clock, from the cut
    pending: list[tuple[int, str, float]]  # (source ordinal, trigger, delay) of live edges


@dataclass(slots=True)
class Instance:
    lane: int
    ordinal: int
    slot: int
    source_play: int
    play_id: str
    cache_id: str
    t_star_ms: float
    first_ms: float
    last_ms: float
    requests: list[InstanceRequest] = field(default_factory=list)
    primers: list[int] = field(default_factory=list)  # graph ordinals

    def request_id(self, source_request_id: str) -> str:
        return f"{self.play_id}:request:{source_request_id}"

    def conversation_id(self, source_session_id: str) -> str:
        return f"{self.play_id}:conversation:{source_session_id}"


class SnapshotContext:
    """What every instance of one corpus shares: ranks, strides, recorded intervals."""

    def __init__(self, graph: AgenticGraph, lanes: int, seed: int) -> None:
        if lanes <= 0 or not graph.plays:
            raise SnapshotError("agentic snapshots require positive lanes and a nonempty corpus")
        self.graph = graph
        self.lanes = lanes
        self.seed = seed
        self.digest = graph.digest()
        nodes = graph.nodes
        self.ranks: list[list[int]] = [[] for _ in nodes]
        stride = 1
        for play in graph.plays:
            interner: dict[int, int] = {}
            for i in play.nodes:
                ranks = self.ranks[i]
                for h in nodes[i].hash_ids:
                    rank = interner.get(h)
                    if rank is None:
                        rank = interner[h] = len(interner)
                    ranks.append(rank)
            stride = max(stride, len(interner))
        self.token_stride = stride
        self.request_stride = len(nodes) + 1
        self.intervals = [(n.not_before_ms, None if n.recorded_api_time_ms is None
                           else n.not_before_ms + n.recorded_api_time_ms) for n in nodes]
        self.topological = _topological_ranks(graph)
        self.parent: list[int | None] = [None] * len(nodes)
        for i, n in enumerate(nodes):
            spawns = [graph.index[d.request_id] for d in n.dependencies if d.relation == "spawn"]
            if spawns:
                self.parent[i] = min(spawns)

    # -- instances -----------------------------------------------------------------------------

    def prepare(self, lane: int, ordinal: int, *, from_start: bool = False,
                cut_ms: float | None = None, source: int | None = None) -> Instance:
        """The instance (lane, ordinal): a sampled cut, an absolute one, or the whole play;
        of source play `slot % plays` unless `source` names one (profile replacements)."""
        if not 0 <= lane < self.lanes:
            raise SnapshotError("snapshot lane is outside the configured lane count")
        slot = ordinal * self.lanes + lane
        if (slot + 1) * self.token_stride > U32:
            raise SnapshotError("play token identity range exceeds u32 capacity; identities "
                                "cannot be recycled")
        graph = self.graph
        k = slot % len(graph.plays) if source is None else source
        play = graph.plays[k]
        t_star, first, last = self._cut(play, lane, ordinal, from_start, cut_ms)
        play_id = f"agentic-v1:{self.digest}:{self.seed}:{lane}:{ordinal}"
        inst = Instance(lane, ordinal, slot, k, play_id, f"{play_id}:cache", t_star, first, last)
        nodes = graph.nodes
        live: set[str] = set()
        latest: dict[str, int] = {}
        for i in play.nodes:
            node = nodes[i]
            start, end = self.intervals[i]
            historical = start < t_star
            if historical:
                for dep in node.dependencies:
                    if self.intervals[graph.index[dep.request_id]][0] >= t_star:
                        raise SnapshotError("snapshot boundary crosses a historical request's "
                                            f"unresolved dependency: {node.request_id}")
                current = latest.get(node.session_id)
                if current is None or (start, self.topological[i]) > (
                        self.intervals[current][0], self.topological[current]):
                    latest[node.session_id] = i
            else:
                live.add(node.session_id)
            delay = max(node.not_before_ms - t_star, 0.0)
            pending: list[tuple[int, str, float]] = []
            if not historical:
                for dep in node.dependencies:
                    src = graph.index[dep.request_id]
                    src_start, src_end = self.intervals[src]
                    if src_start < t_star:
                        fired = src_start if dep.trigger == "dispatch" else (
                            src_start if src_end is None else src_end)
                        delay = max(delay, fired + dep.delay_ms - t_star)
                    else:
                        pending.append((src, dep.trigger, dep.delay_ms))
            inst.requests.append(InstanceRequest(
                i, self.identity(inst, i), start, end, historical,
                0.0 if historical else delay, pending))
        inst.primers = [latest[s] for s in sorted(live, key=str.encode) if s in latest]
        return inst

    def _cut(self, play: Play, lane: int, ordinal: int, from_start: bool,
             cut_ms: float | None) -> tuple[float, float, float]:
        """(the cut, the play's first and last request start): the first start, an absolute
        cut, or the seeded draw in the middle half of the recorded starts."""
        starts = [self.intervals[i][0] for i in play.nodes]
        first, last = min(starts), max(starts)
        if from_start:
            t_star = first
        elif cut_ms is not None:
            t_star = cut_ms
        else:
            t_star = first + (0.25 + 0.5 * self.unit(play.play_id, lane, ordinal)) * (last - first)
        if not first <= t_star <= last:
            raise SnapshotError(f"snapshot cut must lie within recorded request-start bounds "
                                f"[{first}, {last}]")
        return t_star, first, last

    def unit(self, play_id: str, lane: int, ordinal: int) -> float:
        key = serde.dumps([SCHEMA, self.seed, self.digest, play_id, lane, ordinal])
        bits = int.from_bytes(blake3.blake3(key.encode()).digest()[:8], "little")
        return (bits >> 11) / float(1 << 53)

    def identity(self, inst: Instance, i: int) -> dict[str, str]:
        graph = self.graph
        node = graph.nodes[i]
        play = graph.plays[inst.source_play]
        out = {"request_id": inst.request_id(node.request_id), "play_id": inst.play_id,
               "conversation_id": inst.conversation_id(node.session_id),
               "lane_id": f"lane:{inst.lane}"}
        if len(play.roots) == 1:
            out["root_id"] = inst.request_id(graph.nodes[play.roots[0]].request_id)
        parent = self.parent[i]
        if parent is not None:
            out["parent_id"] = inst.request_id(graph.nodes[parent].request_id)
        out["cache_id"] = inst.cache_id
        return out

    def tokens(self, inst: Instance, i: int) -> list[int]:
        base = inst.slot * self.token_stride
        return [base + r for r in self.ranks[i]]

    def record_ordinal(self, inst: Instance, i: int) -> int:
        """The report's uuid minus one: slot * (nodes + 1) + graph ordinal."""
        return inst.slot * self.request_stride + i

    # -- evidence ------------------------------------------------------------------------------

    def evidence(self, inst: Instance, graph_identity: dict[str, Any]) -> dict[str, Any]:
        """The `agentic_snapshots` entry of an instance (the reference's fields and order)."""
        nodes = self.graph.nodes
        requests = []
        for r in inst.requests:
            requests.append({
                "source_request_id": nodes[r.source].request_id, "identity": r.identity,
                "recorded_start_ms": float(r.recorded_start_ms),
                "recorded_end_ms": None if r.recorded_end_ms is None else float(r.recorded_end_ms),
                "historical": r.historical, "remaining_delay_ms": float(r.remaining_delay_ms),
                "pending_dependencies": [inst.request_id(nodes[src].request_id)
                                         for src, _, _ in r.pending]})
        primers = [{"source_request_id": nodes[i].request_id,
                    "request_id": inst.request_id(nodes[i].request_id),
                    "conversation_id": inst.conversation_id(nodes[i].session_id),
                    "input_length": nodes[i].input_length} for i in inst.primers]
        return {"schema": SCHEMA, "graph": graph_identity, "seed": self.seed, "lane_id": inst.lane,
                "play_ordinal": inst.ordinal,
                "source_play_id": self.graph.plays[inst.source_play].play_id,
                "play_id": inst.play_id, "cache_id": inst.cache_id,
                "t_star_ms": float(inst.t_star_ms), "recorded_start_ms": float(inst.first_ms),
                "recorded_last_start_ms": float(inst.last_ms), "requests": requests,
                "primers": primers}


def _topological_ranks(graph: AgenticGraph) -> list[int]:
    """Kahn's order, always taking the lowest ready graph ordinal (the reference's BTreeSet)."""
    import heapq

    nodes = graph.nodes
    remaining = [len(n.dependencies) for n in nodes]
    dependents: list[list[int]] = [[] for _ in nodes]
    for i, n in enumerate(nodes):
        for dep in n.dependencies:
            dependents[graph.index[dep.request_id]].append(i)
    ready = [i for i, r in enumerate(remaining) if r == 0]
    heapq.heapify(ready)
    out = [0] * len(nodes)
    rank = 0
    while ready:
        i = heapq.heappop(ready)
        out[i] = rank
        rank += 1
        for j in dependents[i]:
            remaining[j] -= 1
            if remaining[j] == 0:
                heapq.heappush(ready, j)
    return out
