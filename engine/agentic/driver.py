"""Executing an agentic dependency graph as a workload (engine.md section 6).

A node dispatches at max(its not_before floor, each incoming edge's fire time + delay): a
dispatch-triggered edge fires when its predecessor dispatches (in the same release step, so a
zero-delay child goes out at the same instant), a completion-triggered one when its predecessor
completes successfully in a play that has not failed. Feedback the engine reports at one instant
is applied as one batch in node order (causal terminals, then quiescence) before anything
dispatches at that instant. A rejected, canceled or failed request fails its play: the play's
undispatched nodes are skipped; dispatched ones settle.

Three ways to run a corpus:
- plain: the graph's own nodes. Without lanes every play starts at 0; with `agentic_lanes` the
  first plays take lanes 0.., and when a play's every node is terminal (background children
  included) its lane takes the next play of the corpus (a shared queue), rebased to start then.
- snapshot (`agentic_snapshot_seed`): one instance per lane, cut at its seeded boundary
  (snapshot.py); only the retained suffix runs, from 0 (or from the warmup barrier).
- warmup (`agentic_warmup`): preparation.py runs first; measured work starts at the barrier.
- profile (`agentic_profile`): profile.py; a lane whose play finished takes a fresh instance of
  the next corpus play (whole play, fresh identities) until the admission cutoff.

A plain run is event-driven (`acts_at_instants` False): only a release or a terminal can move
what it does next, and the loop asks it again only then; its feedback is flushed when asked, at
the point of the instant where at_instant flushed it before the release. Snapshot runs act at
instants (the warmup barrier, the profile's deadlines).

The lifecycle transcript (`aisimulate.agentic.lifecycle.v1`: dispatch, causal_terminal,
quiescent, skipped, play_quiescent) and its digest are the reference's, byte for byte. Each
node emits with the authored (source) request id; instances use their own play id.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Any

from kvreplay.engine.agentic.lifecycle import Lifecycle
from kvreplay.engine.agentic.preparation import Preparation, PrepRequest
from kvreplay.engine.agentic.profile import Profile, ProfileOptions
from kvreplay.engine.agentic.snapshot import Instance, SnapshotContext, SnapshotError
from kvreplay.engine.errors import EngineError
from kvreplay.engine.metrics import exact_distribution
from kvreplay.engine.simtime import limit_to_ns, ms_to_ns
from kvreplay.engine.traces.agentic.graph import AgenticGraph
from kvreplay.engine.traces.request import Host, TraceRequest

BLOCKED, READY, EMITTED, COMPLETED, FAILED, SKIPPED, CENSORED = range(7)
PREP_FEEDBACK = 1 << 62  # preparation requests sort after every graph node


class _Node:
    __slots__ = ("completion", "dispatch", "identity", "input_length", "not_before",
                 "output_length", "play", "ready_after", "record", "remaining", "request_id",
                 "session_id", "state", "tokens")

    def __init__(self, request_id: str, session_id: str, play: _PlayState, record: int,
                 input_length: int, output_length: int, tokens: list[int],
                 identity: dict[str, str], not_before: float, remaining: int) -> None:
        self.request_id = request_id  # the authored id (lifecycle, report row)
        self.session_id = session_id
        self.play = play
        self.record = record  # the record ordinal (uuid - 1)
        self.input_length = input_length
        self.output_length = output_length
        self.tokens = tokens
        self.identity = identity
        self.not_before = not_before
        self.ready_after = not_before
        self.remaining = remaining
        self.state = BLOCKED
        self.dispatch: list[tuple[int, float]] = []
        self.completion: list[tuple[int, float]] = []


class _PlayState:
    """A play's progress; once settled, only what the report reads of it (its nodes are gone)."""

    __slots__ = ("censored", "completed", "failed", "failure", "finished", "idle_since",
                 "in_flight", "instance", "lane", "max_terminal", "nodes", "pending", "play_id",
                 "quiescent_at", "root_dispatch", "roots")

    def __init__(self, play_id: str, lane: int | None, instance: Instance | None = None) -> None:
        self.play_id = play_id
        self.lane = lane
        self.instance = instance
        self.nodes: Sequence[int] = ()
        self.roots: Sequence[int] = ()
        self.pending = 0  # emitted, not yet causally terminal
        self.in_flight = 0  # emitted, not yet quiescent
        self.completed = 0
        self.failed = False
        self.failure: tuple[float, int, str, str] | None = None  # (at, node, status, its id)
        self.finished = False  # client finish: lane released
        self.quiescent_at: float | None = None
        self.max_terminal: float | None = None
        self.root_dispatch: float | None = None
        self.censored = False  # the profile's cutoff left nodes of it undispatched
        self.idle_since: float | None = None  # profile: no request of it outstanding since


class AgenticWorkload:
    """The Workload of an agentic graph (see the module docstring)."""

    dense_tokens = True  # prompt token values are the reference's dense u32 ids

    def __init__(self, graph: AgenticGraph, *, lanes: int | None, target_model: str,
                 speedup: float = 1.0, snapshot_seed: int | None = None, warmup: bool = False,
                 profile: ProfileOptions | None = None, engine_block_size: int = 1,
                 lifecycle_sink: Callable[[str], None] | None = None) -> None:
        self.graph = graph
        self.lanes = lanes
        self.target_model = target_model
        self.speedup = speedup
        self.diagnostics: list[Any] = []
        self.lifecycle = Lifecycle(lifecycle_sink)
        self.host: Host | None = None
        # Node ordinal -> node, for the plays not settled yet: a settled play keeps only its
        # outcome (_settle), so a profile's memory follows the plays in flight, not its length.
        self._nodes: dict[int, _Node] = {}
        self._node_count = 0
        self._plays_settled = 0
        self._plays_started = 0
        self._plays: list[_PlayState] = []
        self._heap: list[tuple[float, int]] = []
        self._feedback: list[tuple[float, int, int, str, int]] = []
        self._live: dict[int, int | PrepRequest] = {}  # record ordinal -> node or prep request
        self._client_in_flight = 0
        self._queue = 0  # plain lanes: next play of the corpus to start
        self.ctx: SnapshotContext | None = None
        self.prep: Preparation | None = None
        self.profile: Profile | None = None
        self._snapshots: list[dict[str, Any]] = []
        self._active: list[_PlayState] = []  # profile: the play of each lane
        self._parent: list[int | None] = []  # plain: the spawning node of each node
        self._measuring = not warmup  # profile nodes may dispatch
        self.prepares = warmup  # the engine measures (and streams records) from the barrier
        self._graph_identity: dict[str, Any] | None = None
        # Plain runs: the next release only moves with release(), feedback and its flush, so
        # the answer is kept until one of them.
        self._known_next: tuple[float | None] | None = None
        # Snapshot runs act at instants (barrier, profile deadlines); plain runs are
        # event-driven (the module docstring).
        self.acts_at_instants = snapshot_seed is not None
        if snapshot_seed is None:
            graph.speed_up(speedup)  # the reference digests the sped-up graph here
            self._digest = graph.digest()
            self.total_requests: int | None = len(graph.nodes)
            self._plain()
            return
        assert lanes is not None, "snapshots need agentic_lanes"
        self._digest = graph.digest()  # snapshots scale their own delays by the speedup
        self.ctx = ctx = SnapshotContext(graph, lanes, snapshot_seed)
        instances = [ctx.prepare(lane, 0) for lane in range(lanes)]
        identity = self.graph_identity()
        self._snapshots = [ctx.evidence(inst, identity) for inst in instances]
        self.total_requests = None if profile is not None else sum(
            1 for inst in instances for r in inst.requests if not r.historical)
        if profile is not None:
            self.profile = Profile(profile, lanes, len(graph.plays))
        for inst in instances:
            self._active.append(self._add_instance(inst))
        if warmup:
            self.prep = Preparation(ctx, instances, engine_block_size)
        else:
            self._open_profile(0.0)

    # -- building nodes ------------------------------------------------------------------------

    def _plain(self) -> None:
        graph = self.graph
        nodes = graph.nodes
        tokens = _intern(graph)
        parent: list[int | None] = [None] * len(nodes)
        for i, node in enumerate(nodes):
            for dep in node.dependencies:
                src = graph.index[dep.request_id]
                if dep.relation == "spawn" and (parent[i] is None or src < parent[i]):  # type: ignore[operator]
                    parent[i] = src
        plays = [_PlayState(p.play_id, None) for p in graph.plays]
        play_of = [plays[0]] * len(nodes) if plays else []
        for k, p in enumerate(graph.plays):
            plays[k].nodes = list(p.nodes)
            plays[k].roots = list(p.roots)
            for i in p.nodes:
                play_of[i] = plays[k]
        self._parent = parent
        for i, node in enumerate(nodes):
            self._nodes[i] = _Node(node.request_id, node.session_id, play_of[i], i,
                                   node.input_length, node.output_length, tokens[i], {},
                                   node.not_before_ms, len(node.dependencies))
        self._node_count = len(nodes)
        for i, row in enumerate(nodes):
            for dep in row.dependencies:
                pred = self._nodes[graph.index[dep.request_id]]
                (pred.dispatch if dep.trigger == "dispatch" else pred.completion).append(
                    (i, dep.delay_ms))
        self._plays = plays
        lanes = self.lanes
        if lanes is None:
            for play in plays:
                self._start(play, None, 0.0, rebase=False)
            self._queue = len(plays)
        else:
            for lane in range(min(lanes, len(plays))):
                self._start(plays[lane], lane, 0.0, rebase=True)
            self._queue = min(lanes, len(plays))

    def _add_instance(self, inst: Instance) -> _PlayState:
        """The retained requests of an instance become nodes (not scheduled yet)."""
        ctx = self.ctx
        assert ctx is not None
        nodes = self.graph.nodes
        play = _PlayState(inst.play_id, inst.lane, inst)
        self._plays.append(play)
        self._plays_started += 1
        index: dict[int, int] = {}
        speedup = self.speedup
        play_nodes: list[int] = []
        roots: list[int] = []
        for r in inst.requests:
            if r.historical:
                continue
            src = nodes[r.source]
            i = self._node_count
            self._node_count += 1
            index[r.source] = i
            self._nodes[i] = _Node(src.request_id, r.identity["conversation_id"], play,
                                   ctx.record_ordinal(inst, r.source), src.input_length,
                                   src.output_length, ctx.tokens(inst, r.source), r.identity,
                                   r.remaining_delay_ms / speedup, len(r.pending))
            play_nodes.append(i)
            if not r.pending:
                roots.append(i)
        play.nodes, play.roots = play_nodes, roots
        for r in inst.requests:
            if r.historical:
                continue
            for pred_source, trigger, delay in r.pending:
                pred = self._nodes[index[pred_source]]
                (pred.dispatch if trigger == "dispatch" else pred.completion).append(
                    (index[r.source], delay / speedup))
        return play

    def graph_identity(self) -> dict[str, Any]:
        if self._graph_identity is None:
            graph = self.graph
            self._graph_identity = {
                "source": {"format": graph.header.source_format,
                           "digest": graph.header.source_digest},
                "graph_digest": self._digest, "block_size": graph.header.block_size,
                "node_count": len(graph.nodes), "play_count": len(graph.plays),
                "source_models": graph.source_models()}
        return self._graph_identity

    # -- the simulation's hooks ----------------------------------------------------------------

    def bind(self, host: Host) -> None:
        self.host = host

    def token_order(self) -> tuple[()]:
        return ()  # its token values already are dense ids

    def at_instant(self, now: float) -> bool:
        """Feedback, the barrier, profile deadlines; True stops the run (profile finished)."""
        if self._feedback:
            self._flush()
        prep = self.prep
        if prep is not None and prep.transition is None:
            transition = prep.ready_transition()
            if transition is not None and self.host is not None and self.host.drained():
                prep.finish(transition, now)
                if transition == "profile":
                    self.host.open_measurement()
                    self._open_profile(now)
                else:
                    self.host.drop_records()  # nothing is measured
        profile = self.profile
        if profile is None or not self._measuring:
            return False
        self._advance_profile(profile, now)
        if profile.cancel_due(_due(profile.grace, now)) and self._client_in_flight:
            self._cancel_in_flight(now)
        if profile.admission_closed and self._client_in_flight == 0:
            profile.finished_at = now
            return True
        return False

    def _open_profile(self, now: float) -> None:
        """Measured work starts: initial instances are scheduled from `now`."""
        self._measuring = True
        if self.profile is not None:
            self.profile.open(now)
        for play in self._plays:
            self._activate(play, now)

    def _activate(self, play: _PlayState, now: float) -> None:
        """Schedule an instance's timers from `now` (its suffix's clock starts then)."""
        for i in play.nodes:
            node = self._nodes[i]
            node.ready_after = now + node.not_before
        play.root_dispatch = now
        play.idle_since = now
        for r in play.roots:
            self._schedule(r, self._nodes[r].ready_after)

    # -- the Workload protocol -----------------------------------------------------------------

    def next_release_ms(self) -> float | None:
        known = self._known_next
        if known is not None:
            return known[0]
        if self._feedback:
            self._flush()
        heap = self._heap
        nodes = self._nodes
        while heap and (heap[0][1] not in nodes or nodes[heap[0][1]].state != READY):
            heapq.heappop(heap)  # dispatched, moved by an idle cap, or of a settled play
        best = heap[0][0] if heap else None
        profile = self.profile
        if profile is not None and self._measuring:
            wake = self._profile_wake(profile)
            if best is not None and profile.admission_closed:
                best = None
            if wake is not None and (best is None or wake < best):
                best = wake
        prep = self.prep
        if prep is not None:
            ready = prep.next_ready_ms()
            if ready is not None and (best is None or ready < best):
                best = ready
        elif profile is None:
            self._known_next = (best,)
        return best

    def release(self, now_ms: float) -> list[TraceRequest]:
        self._known_next = None
        out = []
        prep = self.prep
        if prep is not None and prep.transition is None:
            for req, inst, at in prep.pop_ready(now_ms):
                out.append(self._prep_request(req, inst, at))
        profile = self.profile
        if profile is not None and profile.admission_closed:
            return out
        heap = self._heap
        nodes = self._nodes
        while heap and heap[0][0] <= now_ms:
            at, i = heapq.heappop(heap)
            node = nodes.get(i)
            if node is None or node.state != READY or at != node.ready_after:
                continue
            out.append(self._emit(i, at, now_ms))
        return out

    def on_terminal(self, request: TraceRequest, now_ms: float, *, status: str = "completed",
                    output_tokens: int | None = None) -> None:
        target = self._live.get(request.ordinal)
        if target is None:
            return  # canceled by the profile already
        order = PREP_FEEDBACK + target.index if isinstance(target, PrepRequest) else target
        self._known_next = None
        self._feedback.append((now_ms, order, request.ordinal, status,
                               request.output_length if output_tokens is None else output_tokens))

    def exhausted(self) -> bool:
        return not self._heap and not self._feedback and (
            self.prep is None or self.prep.next_ready_ms() is None)

    # -- scheduling ----------------------------------------------------------------------------

    def _start(self, play: _PlayState, lane: int | None, start_ms: float, rebase: bool) -> None:
        """A plain play starts (on a lane): its identities, its timers, its roots."""
        play.lane = lane
        nodes = self._nodes
        source = self.graph.nodes
        root = source[play.roots[0]].request_id if len(play.roots) == 1 else None
        for i in play.nodes:
            row = source[i]
            identity = {"request_id": row.request_id, "play_id": row.play_id,
                        "conversation_id": row.session_id}
            if lane is not None:
                identity["lane_id"] = f"lane:{lane}"
            if root is not None:
                identity["root_id"] = root
            parent = self._parent[i]
            if parent is not None:
                identity["parent_id"] = source[parent].request_id
            nodes[i].identity = identity
        if rebase:
            root0 = min(nodes[r].not_before for r in play.roots)
            for i in play.nodes:
                node = nodes[i]
                node.ready_after = start_ms + max(0.0, node.not_before - root0)
        for r in play.roots:
            self._schedule(r, nodes[r].ready_after)

    def _schedule(self, i: int, at: float) -> None:
        node = self._nodes[i]
        if node.state == BLOCKED:
            node.state = READY
            heapq.heappush(self._heap, (at, i))

    def _release_edges(self, edges: list[tuple[int, float]], now: float) -> None:
        nodes = self._nodes
        for target, delay in edges:
            node = nodes[target]
            if node.state != BLOCKED:
                continue
            node.remaining -= 1
            at = now + delay
            if at > node.ready_after:
                node.ready_after = at
            if node.remaining == 0:
                self._schedule(target, node.ready_after)

    def _emit(self, i: int, at: float, now: float) -> TraceRequest:
        node = self._nodes[i]
        node.state = EMITTED
        play = node.play
        play.pending += 1
        play.in_flight += 1
        play.idle_since = None
        self._client_in_flight += 1
        if play.instance is None and i in play.roots and (
                play.root_dispatch is None or now < play.root_dispatch):
            if play.root_dispatch is None:
                self._plays_started += 1
            play.root_dispatch = now
        self.lifecycle.event(now, play.play_id, node.request_id, "dispatch")
        request = TraceRequest(node.record, node.request_id, at, node.input_length,
                               node.output_length, self._prompt(node.tokens, node.input_length),
                               session_id=node.session_id)
        phase = "profile" if self.prep is not None else None
        request.agentic = (play.play_id, node.identity, phase)
        self._live[node.record] = i
        if self.profile is not None:
            self.profile.on_issue(now)
        self._release_edges(node.dispatch, now)
        return request

    def _prep_request(self, req: PrepRequest, inst: Instance, at: float) -> TraceRequest:
        ctx = self.ctx
        assert ctx is not None
        source = self.graph.nodes[req.source]
        request = TraceRequest(req.ordinal, source.request_id, at, source.input_length, 1,
                               self._prompt(ctx.tokens(inst, req.source), source.input_length),
                               session_id=req.identity["conversation_id"])
        request.agentic = (inst.play_id, req.identity, req.phase)
        self._live[req.ordinal] = req
        return request

    def _prompt(self, tokens: list[int], input_length: int) -> tuple[tuple[int, int], ...]:
        """Runs of block_size copies of each block's token, the last one cut at the input."""
        bs = self.graph.header.block_size
        full, rest = divmod(input_length, bs)
        runs = [(token, bs) for token in tokens[:full]]
        if rest and len(tokens) > full:
            runs.append((tokens[full], rest))
        return tuple(runs)

    # -- feedback ------------------------------------------------------------------------------

    def _flush(self) -> None:
        self._known_next = None
        batch = sorted(self._feedback, key=lambda f: (f[0], f[1]))
        self._feedback = []
        live = self._live
        for now, _, record, status, tokens in batch:
            target = live[record]
            if isinstance(target, PrepRequest):
                self._prep_terminal(target, now, status, tokens)
            else:
                self._causal_terminal(target, now, status)
        for now, _, record, _, _ in batch:
            target = live.pop(record)
            if isinstance(target, PrepRequest):
                assert self.prep is not None
                self.prep.on_quiescent(target, now)
            else:
                self._quiescent(target, now)

    def _prep_terminal(self, req: PrepRequest, now: float, status: str, tokens: int) -> None:
        prep = self.prep
        assert prep is not None and self.host is not None
        req.admit_ms, req.reused = self.host.admission(req.ordinal)
        prep.on_terminal(req, now, status, tokens)

    def _causal_terminal(self, i: int, now: float, status: str) -> None:
        node = self._nodes[i]
        play = node.play
        self.lifecycle.event(now, play.play_id, node.request_id, "causal_terminal", status)
        play.pending -= 1
        self._client_in_flight -= 1
        if play.max_terminal is None or now > play.max_terminal:
            play.max_terminal = now
        profile = self.profile
        if profile is not None:
            profile.on_terminal(now, status, node.ready_after)
            if play.pending == 0:
                play.idle_since = now
            if self._client_in_flight == 0:
                profile.global_idle_since = now
        if status == "completed":
            node.state = COMPLETED
            play.completed += 1
            if not play.failed:
                self._release_edges(node.completion, now)
        else:
            node.state = FAILED
            failure = (now, i, status, node.request_id)
            if play.failure is None or failure[:2] < play.failure[:2]:
                play.failure = failure
            if not play.failed:
                play.failed = True
                nodes = self._nodes
                for m in play.nodes:
                    if nodes[m].state in (BLOCKED, READY):
                        nodes[m].state = SKIPPED
                        self.lifecycle.event(now, play.play_id, nodes[m].request_id, "skipped")
        done = play.failed or play.completed == len(play.nodes) or play.censored
        if done and play.pending == 0 and not play.finished:
            play.finished = True
            if profile is None:
                self._next_play(play, now)

    def _quiescent(self, i: int, now: float) -> None:
        node = self._nodes[i]
        play = node.play
        self.lifecycle.event(now, play.play_id, node.request_id, "quiescent")
        play.in_flight -= 1
        if play.finished and play.in_flight == 0 and play.quiescent_at is None:
            self._settle(play, now)

    def _settle(self, play: _PlayState, now: float) -> None:
        """A finished play with nothing in flight settles: nothing can happen to it any more,
        so it keeps only its outcome (what the report reads: times, status, failure)."""
        play.quiescent_at = now
        self.lifecycle.event(now, play.play_id, None, "play_quiescent")
        self._plays_settled += 1
        nodes = self._nodes
        for i in play.nodes:
            del nodes[i]
        play.nodes = play.roots = ()
        play.instance = None
        self.lifecycle.forget(play.play_id)

    def _next_play(self, play: _PlayState, now: float) -> None:
        """Plain lanes: the freed lane takes the next play of the corpus, rebased to now."""
        if self.ctx is not None or play.lane is None or self._queue >= len(self._plays):
            return
        nxt = self._plays[self._queue]
        self._queue += 1
        self._start(nxt, play.lane, now, rebase=True)

    # -- the profile ---------------------------------------------------------------------------

    def _advance_profile(self, profile: Profile, now: float) -> None:
        """The cutoff, lane replacements (in lane order), then the idle caps."""
        if profile.admission_closed:
            return
        if _due(profile.cutoff, now):
            self._close_admission(profile, now)
            return
        ctx = self.ctx
        assert ctx is not None
        for lane, play in enumerate(self._active):
            if not play.finished:
                continue
            source, ordinal = profile.next_source(lane)
            try:
                inst = ctx.prepare(lane, ordinal, from_start=True, source=source)
            except SnapshotError as exc:
                raise EngineError(f"agentic profile: {exc}") from None
            fresh = self._add_instance(inst)
            self._active[lane] = fresh
            self._activate(fresh, now)
        for play in self._active:
            if play.idle_since is not None and _due(play.idle_since + profile.tree_cap, now):
                self._shift_timers(profile, [play], now, play.play_id)
        since = profile.global_idle_since
        if since is not None and _due(since + profile.global_cap, now):
            self._shift_timers(profile, self._active, now, None)

    def _shift_timers(self, profile: Profile, plays: list[_PlayState], now: float,
                      play_id: str | None) -> None:
        """Move the plays' pending timers so the earliest fires now (spacing kept)."""
        nodes = self._nodes
        pending = [i for play in plays for i in play.nodes if nodes[i].state == READY]
        if not pending:
            return
        first = min(nodes[i].ready_after for i in pending)
        shift = first - now
        if shift <= 0:
            return
        for i in pending:
            node = nodes[i]
            node.ready_after = now + (node.ready_after - first)
            heapq.heappush(self._heap, (node.ready_after, i))
        profile.idle_shifts.append({"at_ms": now, "play_id": play_id, "shifted_by_ms": shift,
                                    "timer_count": len(pending)})

    def _profile_wake(self, profile: Profile) -> float | None:
        """The next instant the profile itself must act at (cutoff, idle cap, grace)."""
        if profile.admission_closed:
            return profile.grace if self._client_in_flight and not profile.canceled else None
        wake = profile.cutoff
        nodes = self._nodes
        for play in self._active:
            if play.idle_since is not None and any(nodes[i].state == READY for i in play.nodes):
                wake = min(wake, play.idle_since + profile.tree_cap)
        since = profile.global_idle_since
        if since is not None and any(nodes[i].state == READY for p in self._active
                                     for i in p.nodes):
            wake = min(wake, since + profile.global_cap)
        return wake

    def _close_admission(self, profile: Profile, now: float) -> None:
        """The cutoff: every node not dispatched yet is censored; idle plays retire."""
        profile.admission_closed = True
        censored = 0
        for node in self._nodes.values():
            if node.state in (BLOCKED, READY):
                node.state = CENSORED
                node.play.censored = True
                censored += 1
        self._heap.clear()
        profile.never_issued += censored
        for play in self._plays:
            if play.pending == 0 and not play.finished:
                play.finished = True
                if play.in_flight == 0 and play.quiescent_at is None:
                    self._settle(play, now)


    def _cancel_in_flight(self, now: float) -> None:
        """Cancel every request the client still waits for (the grace deadline passed): each
        ends `canceled` now; one that never ran a pass settles now, the others stay unsettled
        (their server work is abandoned with the run)."""
        host = self.host
        profile = self.profile
        assert host is not None and profile is not None
        batch = sorted((target, record) for record, target in self._live.items()
                       if isinstance(target, int) and self._nodes[target].state == EMITTED)
        unsettled = {record for _, record in batch if host.cancel(record)}
        profile.canceled_requests += len(batch)
        profile.unsettled += len(unsettled)
        for i, _ in batch:
            self._causal_terminal(i, now, "canceled")
        for i, record in batch:
            del self._live[record]
            if record not in unsettled:
                self._quiescent(i, now)

    # -- report --------------------------------------------------------------------------------

    def outcomes(self) -> list[dict[str, Any]]:
        out = []
        origin = self._origin()
        for play in self._plays:
            row: dict[str, Any] = {"play_id": play.play_id}
            row["status"] = _status(play)
            causal = play.failure[0] if play.failed and play.failure else play.max_terminal
            if causal is not None:
                row["causal_terminal_ms"] = causal - origin
            if play.quiescent_at is not None:
                row["settled_at_ms"] = play.quiescent_at - origin
            if play.failed and play.failure is not None:
                row["failure_request_id"] = play.failure[3]
                row["failure_status"] = play.failure[2]
            out.append(row)
        return out

    def summary_extra(self) -> dict[str, Any]:
        """The agentic summary keys (reference names)."""
        graph = self.graph
        out: dict[str, Any] = {
            "agentic_graph": self.graph_identity(),
            "agentic_lifecycle_event_count": self.lifecycle.count,
            "agentic_lifecycle_digest": self.lifecycle.digest(),
            "agentic_play_outcomes": self.outcomes(),
            "agentic_model_projection": {"policy": "project_to_configured_target",
                                         "source_models": graph.source_models(),
                                         "target_model": self.target_model},
        }
        if graph.basis is not None:
            out["weka_nested_timestamp_basis"] = graph.basis
        if self.ctx is not None:
            out["agentic_snapshots"] = self._snapshots
        if self.prep is not None:
            from kvreplay.engine.report import uuid_for

            out["agentic_phases"] = self.prep.evidence(uuid_for)
        if self.profile is not None:
            plays = self._plays
            out["agentic_profile"] = self.profile.report(
                plays_started=len(plays),
                client_completed=sum(1 for p in plays if p.finished and not p.censored),
                retired=sum(1 for p in plays if p.finished),
                quiescent=self._plays_settled,
                in_flight=self._client_in_flight)
        out.update(_trajectories(self._plays))
        return out

    def _origin(self) -> float:
        """The warmup barrier (reported play times are relative to it), or 0."""
        prep = self.prep
        if prep is not None and prep.transition == "profile" and prep.finished_ms is not None:
            return prep.finished_ms
        return 0.0

    def observed(self, window_ms: float) -> bool:
        """The successful requests' span (first arrival to last response) from the records;
        True when it is the run's duration (a profile)."""
        if self.profile is None:
            return False
        self.profile.observation = window_ms
        return True

    def plays_progress(self) -> tuple[int, int]:
        """(plays settled, plays started) for progress displays."""
        return self._plays_settled, self._plays_started

    def progress_fraction(self, now_ms: float) -> float | None:
        """Share of the work done: the profile's window elapsed, else plays settled."""
        profile = self.profile
        if profile is not None:
            if profile.start is None:
                return 0.0
            span = profile.cutoff - profile.start
            return min(max((now_ms - profile.start) / span, 0.0), 1.0) if span > 0 else 1.0
        if not self._plays:
            return None
        return self._plays_settled / len(self._plays)


def _due(deadline: float, now: float) -> bool:
    """Whether `now` reached `deadline` on the simulation's nanosecond clock."""
    return limit_to_ns(deadline) <= ms_to_ns(now)


def _status(play: _PlayState) -> str:
    if play.quiescent_at is None or play.censored:
        return "incomplete"
    return "failed" if play.failed else "completed"


def _trajectories(plays: Sequence[_PlayState]) -> dict[str, Any]:
    """Per completed play: its last terminal minus its first root dispatch (or activation)."""
    samples = [p.max_terminal - p.root_dispatch for p in plays
               if _status(p) == "completed" and p.max_terminal is not None
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
    first = dense.setdefault  # a new hash id gets the count before it (one pass a node)
    return [[first(h, len(dense) & 0xFFFFFFFF) for h in node.hash_ids] for node in graph.nodes]
