"""Executing an agentic dependency graph as a workload (engine.md section 6).

A node dispatches at max(its not_before floor, each incoming edge's fire time + delay): a
dispatch-triggered edge fires when its predecessor dispatches (in the same release step, so a
zero-delay child goes out at the same instant), a completion-triggered one when its predecessor
completes successfully in a play that has not failed. Feedback the engine reports at one instant
is applied as one batch in graph-ordinal order (causal terminals, then quiescence) before
anything dispatches at that instant. A rejected, canceled or failed request fails its play: the
play's undispatched nodes are skipped; dispatched ones settle.

Lanes (`agentic_lanes`): at most that many plays run at once; the initial plays take lanes 0..,
and when a play's every node is terminal (background children included) its lane takes the next
play of the corpus (a shared queue), rebased to start then. Without lanes every play starts at 0.

The lifecycle transcript (`aisimulate.agentic.lifecycle.v1`: dispatch, causal_terminal,
quiescent, skipped, play_quiescent) and its digest are the reference's, byte for byte.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Any

from kvreplay.engine.agentic.lifecycle import Lifecycle
from kvreplay.engine.metrics import exact_distribution
from kvreplay.engine.traces.agentic.graph import AgenticGraph
from kvreplay.engine.traces.request import TraceRequest

BLOCKED, READY, EMITTED, COMPLETED, FAILED, SKIPPED = range(6)
FAILURES = ("rejected", "canceled", "failed")


class _PlayState:
    __slots__ = ("completed", "failed", "failure", "finished", "in_flight", "lane", "max_terminal",
                 "pending", "play", "quiescent_at", "root_dispatch", "started")

    def __init__(self, play: Any) -> None:
        self.play = play
        self.lane: int | None = None
        self.started = False
        self.pending = 0  # emitted, not yet causally terminal
        self.in_flight = 0  # emitted, not yet quiescent
        self.completed = 0
        self.failed = False
        self.failure: tuple[float, int, str] | None = None  # (at, ordinal, status)
        self.finished = False  # client finish: lane released
        self.quiescent_at: float | None = None
        self.max_terminal: float | None = None
        self.root_dispatch: float | None = None


class AgenticWorkload:
    """The Workload of an agentic graph (see the module docstring)."""

    dense_tokens = True  # prompt token values are the reference's dense u32 ids

    def __init__(self, graph: AgenticGraph, *, lanes: int | None, target_model: str,
                 lifecycle_sink: Callable[[str], None] | None = None) -> None:
        self.graph = graph
        self.lanes = lanes
        self.target_model = target_model
        nodes = graph.nodes
        n = len(nodes)
        self.total_requests = n
        self.diagnostics: list[Any] = []
        self.lifecycle = Lifecycle(lifecycle_sink)
        self._state = [BLOCKED] * n
        self._remaining = [len(node.dependencies) for node in nodes]
        self._ready_after = [node.not_before_ms for node in nodes]
        self._dispatch_deps: list[list[tuple[int, float]]] = [[] for _ in range(n)]
        self._completion_deps: list[list[tuple[int, float]]] = [[] for _ in range(n)]
        self._parent: list[int | None] = [None] * n
        for i, node in enumerate(nodes):
            for dep in node.dependencies:
                src = graph.index[dep.request_id]
                target = self._dispatch_deps if dep.trigger == "dispatch" else (
                    self._completion_deps)
                target[src].append((i, dep.delay_ms))
                if dep.relation == "spawn" and (self._parent[i] is None
                                                or src < self._parent[i]):  # type: ignore[operator]
                    self._parent[i] = src
        self._play_of = [0] * n
        self._plays = [_PlayState(p) for p in graph.plays]
        for k, p in enumerate(graph.plays):
            for i in p.nodes:
                self._play_of[i] = k
        self._tokens = _intern(graph)
        self._heap: list[tuple[float, int]] = []
        self._feedback: list[tuple[float, int, str]] = []
        self._queue = 0  # next play of the corpus to start
        if lanes is None:
            for k in range(len(self._plays)):
                self._start(k, None, 0.0, rebase=False)
            self._queue = len(self._plays)
        else:
            for lane in range(min(lanes, len(self._plays))):
                self._start(lane, lane, 0.0, rebase=True)
            self._queue = min(lanes, len(self._plays))

    # -- the Workload protocol -------------------------------------------------------------------

    def next_release_ms(self) -> float | None:
        if self._feedback:
            self._flush()
        heap = self._heap
        state = self._state
        while heap and state[heap[0][1]] != READY:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def release(self, now_ms: float) -> list[TraceRequest]:
        heap = self._heap
        state = self._state
        out = []
        while heap and heap[0][0] <= now_ms:
            at, i = heapq.heappop(heap)
            if state[i] != READY or at != self._ready_after[i]:
                continue
            out.append(self._emit(i, at, now_ms))
        return out

    def on_terminal(self, request: TraceRequest, now_ms: float, *, status: str = "completed",
                    output_tokens: int | None = None) -> None:
        self._feedback.append((now_ms, request.ordinal, status))

    def exhausted(self) -> bool:
        return not self._heap and self._queue >= len(self._plays) and not self._feedback

    # -- scheduling --------------------------------------------------------------------------------

    def _start(self, k: int, lane: int | None, start_ms: float, rebase: bool) -> None:
        state = self._plays[k]
        state.lane = lane
        state.started = True
        play = state.play
        if rebase:
            nb = self.graph.nodes
            root0 = min(nb[r].not_before_ms for r in play.roots)
            for i in play.nodes:
                self._ready_after[i] = start_ms + max(0.0, nb[i].not_before_ms - root0)
        for r in play.roots:
            self._schedule(r, self._ready_after[r])

    def _schedule(self, i: int, at: float) -> None:
        if self._state[i] == BLOCKED:
            self._state[i] = READY
            heapq.heappush(self._heap, (at, i))

    def _release_edges(self, edges: list[tuple[int, float]], now: float) -> None:
        state = self._state
        remaining = self._remaining
        ready = self._ready_after
        for target, delay in edges:
            if state[target] != BLOCKED:
                continue
            remaining[target] -= 1
            at = now + delay
            if at > ready[target]:
                ready[target] = at
            if remaining[target] == 0:
                self._schedule(target, ready[target])

    def _emit(self, i: int, at: float, now: float) -> TraceRequest:
        node = self.graph.nodes[i]
        self._state[i] = EMITTED
        play = self._plays[self._play_of[i]]
        play.pending += 1
        play.in_flight += 1
        if i in play.play.roots and (play.root_dispatch is None or now < play.root_dispatch):
            play.root_dispatch = now
        self.lifecycle.event(now, node.play_id, node.request_id, "dispatch")
        request = TraceRequest(i, node.request_id, at, node.input_length, node.output_length,
                               self._prompt(i), session_id=node.session_id)
        request.agentic = (node.play_id, self._identity(i, play), None)
        self._release_edges(self._dispatch_deps[i], now)
        return request

    def _prompt(self, i: int) -> tuple[tuple[int, int], ...]:
        node = self.graph.nodes[i]
        bs = self.graph.header.block_size
        left = node.input_length
        runs = []
        for token in self._tokens[i]:
            if left <= 0:
                break
            take = bs if left >= bs else left
            runs.append((token, take))
            left -= take
        return tuple(runs)

    def _identity(self, i: int, play: _PlayState) -> dict[str, str]:
        nodes = self.graph.nodes
        node = nodes[i]
        out = {"request_id": node.request_id, "play_id": node.play_id,
               "conversation_id": node.session_id}
        if play.lane is not None:
            out["lane_id"] = f"lane:{play.lane}"
        roots = play.play.roots
        if len(roots) == 1:
            out["root_id"] = nodes[roots[0]].request_id
        parent = self._parent[i]
        if parent is not None:
            out["parent_id"] = nodes[parent].request_id
        return out

    # -- feedback ----------------------------------------------------------------------------------

    def _flush(self) -> None:
        batch = sorted(self._feedback, key=lambda f: (f[0], f[1]))
        self._feedback = []
        at = batch[0][0]
        for now, i, status in batch:
            self._causal_terminal(i, now, status)
        for now, i, _ in batch:
            self._quiescent(i, now)
        del at

    def _causal_terminal(self, i: int, now: float, status: str) -> None:
        node = self.graph.nodes[i]
        k = self._play_of[i]
        play = self._plays[k]
        self.lifecycle.event(now, node.play_id, node.request_id, "causal_terminal", status)
        play.pending -= 1
        if play.max_terminal is None or now > play.max_terminal:
            play.max_terminal = now
        if status == "completed":
            self._state[i] = COMPLETED
            play.completed += 1
            if not play.failed:
                self._release_edges(self._completion_deps[i], now)
        else:
            self._state[i] = FAILED
            failure = (now, i, status)
            if play.failure is None or failure[:2] < play.failure[:2]:
                play.failure = failure
            if not play.failed:
                play.failed = True
                for m in play.play.nodes:
                    if self._state[m] in (BLOCKED, READY):
                        self._state[m] = SKIPPED
                        self.lifecycle.event(now, node.play_id, self.graph.nodes[m].request_id,
                                             "skipped")
        done = play.failed or play.completed == len(play.play.nodes)
        if done and play.pending == 0 and not play.finished:
            play.finished = True
            self._next_play(play.lane, now)

    def _quiescent(self, i: int, now: float) -> None:
        node = self.graph.nodes[i]
        play = self._plays[self._play_of[i]]
        self.lifecycle.event(now, node.play_id, node.request_id, "quiescent")
        play.in_flight -= 1
        if play.finished and play.in_flight == 0 and play.quiescent_at is None:
            play.quiescent_at = now
            self.lifecycle.event(now, node.play_id, None, "play_quiescent")

    def _next_play(self, lane: int | None, now: float) -> None:
        if lane is None or self._queue >= len(self._plays):
            return
        k = self._queue
        self._queue += 1
        self._start(k, lane, now, rebase=True)

    # -- report ------------------------------------------------------------------------------------

    def outcomes(self) -> list[dict[str, Any]]:
        out = []
        for play in self._plays:
            row: dict[str, Any] = {"play_id": play.play.play_id}
            if play.quiescent_at is None:
                row["status"] = "incomplete"
            else:
                row["status"] = "failed" if play.failed else "completed"
            causal = play.failure[0] if play.failed and play.failure else play.max_terminal
            if causal is not None:
                row["causal_terminal_ms"] = causal
            if play.quiescent_at is not None:
                row["settled_at_ms"] = play.quiescent_at
            if play.failed and play.failure is not None:
                row["failure_request_id"] = self.graph.nodes[play.failure[1]].request_id
                row["failure_status"] = play.failure[2]
            out.append(row)
        return out

    def summary_extra(self) -> dict[str, Any]:
        """The agentic summary keys (reference names)."""
        graph = self.graph
        out: dict[str, Any] = {
            "agentic_graph": {
                "source": {"format": graph.header.source_format,
                           "digest": graph.header.source_digest},
                "graph_digest": graph.digest(), "block_size": graph.header.block_size,
                "node_count": len(graph.nodes), "play_count": len(graph.plays),
                "source_models": graph.source_models()},
            "agentic_lifecycle_event_count": self.lifecycle.count,
            "agentic_lifecycle_digest": self.lifecycle.digest(),
            "agentic_play_outcomes": self.outcomes(),
            "agentic_model_projection": {"policy": "project_to_configured_target",
                                         "source_models": graph.source_models(),
                                         "target_model": self.target_model},
        }
        if graph.basis is not None:
            out["weka_nested_timestamp_basis"] = graph.basis
        out.update(_trajectories(self._plays))
        return out


def _trajectories(plays: Sequence[_PlayState]) -> dict[str, Any]:
    """Per completed play: its last terminal minus its first root dispatch."""
    samples = [p.max_terminal - p.root_dispatch for p in plays
               if p.quiescent_at is not None and not p.failed and p.max_terminal is not None
               and p.root_dispatch is not None]
    completed = len(samples)
    out: dict[str, Any] = {"total_trajectories": len(plays),
                           "completed_trajectories": completed,
                           "incomplete_trajectories": len(plays) - completed}
    stats = exact_distribution(samples).summary("trajectory_e2e_latency", "_ms")
    for key, value in stats.items():
        out[key] = 0.0 if value is None else value
    out["p50_trajectory_e2e_latency_ms"] = out["median_trajectory_e2e_latency_ms"]
    return out


def _intern(graph: AgenticGraph) -> list[list[int]]:
    """Hash ids to dense u32 token values, first seen in graph order, shared by all plays."""
    dense: dict[int, int] = {}
    out = []
    for node in graph.nodes:
        tokens = []
        for h in node.hash_ids:
            token = dense.get(h)
            if token is None:
                token = len(dense) & 0xFFFFFFFF
                dense[h] = token
            tokens.append(token)
        out.append(tokens)
    return out
