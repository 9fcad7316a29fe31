"""The event loop: one clock for every pool, router and handoff (engine.md sections 4, 5, 8).

At each timestamp T, in this order (the reference's equal-time phases):
1. pass completions (by worker identity; P/D: prefill workers before decode workers, whenever
   their passes started): tokens and terminals, KV events (a lag of 0 applies them with their
   pass), a decode rank's reservation retry, then commands held for that worker until its pass
   ended (P/D: they join the action queue);
2. router-visible KV events due at T, then P/D transfer completions (by request arrival);
3. P/D only: the handoff actions queued at T, FIFO (destination acceptance, activation,
   source release, commands released by a pass end); then the workers that completed at T
   restart;
4. arrivals: every request the workload releases at T is routed and queued, in its order;
5. every idle worker with work starts a pass (by worker identity).
So events completing at T are seen by arrivals at T, and in aggregated replay arrivals at T
join the passes starting at T, while a P/D worker restarts before them (both checked against
the reference).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from typing import Any

from kvreplay.engine.collect import fewer_collections
from kvreplay.engine.errors import EngineError, Interrupted, ReplayStalled
from kvreplay.engine.host_runtime import HostRuntime
from kvreplay.engine.identity import BlockIdentities
from kvreplay.engine.kv_index import DEVICE, KvIndex
from kvreplay.engine.records import RequestRecord, shift_times
from kvreplay.engine.result import PoolFacts, RunFacts, RunResult
from kvreplay.engine.router import KvRouter, Overlaps, RoundRobinRouter
from kvreplay.engine.router_queue import RouterQueue
from kvreplay.engine.scheduler import PassOutcome, Rank, RankStats
from kvreplay.engine.sequence import WAITING, Seq
from kvreplay.engine.simtime import check_ns, limit_to_ns, ms_to_ns, ns_to_ms
from kvreplay.engine.traces.request import TraceRequest, Workload
from kvreplay.engine.worker import Worker, stamp_tokens
from kvreplay.schema.spec import Role, Spec

# Event kinds, in their order at one instant (G2 copies complete before pass completions).
# P/D handoff actions (ACTIONS) run after the instant's completions and transfers, before the
# workers restart.
HOST_DONE, PASS_DONE, KV_VISIBLE, TRANSFER_DONE, ACTIONS, WORKER_READY = 0, 1, 2, 3, 4, 5
PROGRESS_EVERY = 2048

Router = RoundRobinRouter | KvRouter
# A request waiting in the router queue: what placing it needs, and when it queued (ns).
Queued = tuple[TraceRequest, RequestRecord, int, bool, int, Overlaps]


class Pool:
    """One role's workers, their schedulers (worker * dp_size + rank) and router."""

    __slots__ = ("block_size", "index", "name", "queue", "ranks", "role", "router", "workers")

    def __init__(self, role: Role, first_gid: int, identities: BlockIdentities,
                 stats: RankStats, record_events: bool) -> None:
        self.name = "agg" if role.name == "aggregated" else role.name
        self.role = role
        self.block_size = role.block_size
        self.ranks: list[Rank] = []
        self.workers: list[Worker] = []
        for w in range(role.workers):
            ranks = [Rank(role, self.name, w, r, w * role.dp_size + r, identities,
                          record_events, stats) for r in range(role.dp_size)]
            self.ranks.extend(ranks)
            self.workers.append(Worker(first_gid + w, self.name, w, ranks,
                                       role.prefill_schedule_interval))
        self.index: KvIndex | None = None
        self.queue: RouterQueue[Queued] | None = None  # the KV router's queue (first pool)
        self.router: Router = RoundRobinRouter(self.name, self.ranks, role.workers, role.dp_size,
                                               flattened=role.name != "aggregated")


class Simulation:
    def __init__(self, cfg: Spec, workload: Workload, *, stepwise: bool = False,
                 progress: Callable[[float, float | None], None] | None = None,
                 sink: Callable[[RequestRecord], None] | None = None,
                 should_stop: Callable[[], bool] | None = None,
                 approximations: list[str] | None = None) -> None:
        self.cfg = cfg
        self.aggregated = cfg.mode == "aggregated"
        self.workload = workload
        self.stepwise = stepwise
        self.progress = progress
        self.should_stop = should_stop
        has_host = any(role.host_offload is not None for role in cfg.roles)
        self.identities = BlockIdentities(keep_keys=has_host)
        self.stats = RankStats()
        kv = cfg.router.policy == "kv_router"
        self.pools: list[Pool] = []
        gid = 0
        for role in cfg.roles:
            # Only schedulers whose KV feeds an overlap-aware router publish events.
            events = kv and role.name != "decode"
            pool = Pool(role, gid, self.identities, self.stats, events)
            gid += role.workers
            if kv:
                self._kv_router(pool)
            self.pools.append(pool)
        self.workers: list[Worker] = [w for pool in self.pools for w in pool.workers]
        self.pool_of = {pool.name: pool for pool in self.pools}
        self.host = HostRuntime(self) if has_host else None
        self.lag_ns = ms_to_ns(cfg.router.kv_event_lag_ms) if kv else 0
        # (pool, scheduler, tier) -> KV event batches published but not yet applied
        self.kv_pending: dict[tuple[str, int, int], int] = {}
        self.heap: list[tuple[int, int, int, int, int, Any]] = []
        self.seq_no = 0
        self.arrival_no: dict[int, int] = {}  # released, not yet terminal: ordinal -> arrival
        self.arrivals = 0
        self.actions: deque[Callable[[], None]] = deque()  # P/D handoff actions, FIFO
        self.actions_due = False
        self.now = 0
        self.busy_until = 0
        self.cap_ns = None if cfg.max_sim_time_ms is None else limit_to_ns(cfg.max_sim_time_ms)
        # Records: `open` released and not yet terminal, `done` terminal and measured (kept
        # unless a `sink` takes each one as it ends, so memory follows the requests in flight).
        self.open: dict[int, RequestRecord] = {}
        self.done: list[RequestRecord] = []
        self.sink = sink
        # A workload with a warmup measures from its barrier (open_measurement): records end
        # up in the report, and may be streamed, only from then on.
        self.measuring = not getattr(workload, "prepares", False)
        self.unsettled: dict[int, RequestRecord] = {}  # terminal, source release still to come
        self.streamed = 0  # records handed to the sink
        self._last_terminal: float | None = None  # ms, measured records
        self._window: tuple[float, float] | None = None  # (first arrival, last end), completed
        self.live = 0  # released and not yet terminal
        self.notices = 0  # terminals the workload heard of (its next release may have moved)
        self.dirty: set[int] = set()
        self.chains: dict[int, dict[int, list[int]]] = {}
        self.facts = RunFacts()
        self.facts.stepwise = stepwise
        self.facts.mode = cfg.mode
        self.facts.router = cfg.router.policy
        self.facts.approximations = list(approximations or [])
        self.facts.max_sim_time_ms = cfg.max_sim_time_ms
        for pool in self.pools:
            r = pool.role
            self.facts.pools.append(PoolFacts(pool.name, r.workers, r.dp_size,
                                              r.tensor_parallel_size, r.pipeline_parallel_size,
                                              r.backend, r.block_size, r.num_gpu_blocks))
        self._total = getattr(workload, "total_requests", None)
        # Workload hooks (agentic): end-of-instant work that may stop the run, and a binding
        # to this simulation (drained check, measurement window, cancellation).
        self._at_instant: Callable[[float], bool] | None = getattr(workload, "at_instant", None)
        self.seq_of: dict[int, Seq] = {}  # released, not yet terminal: ordinal -> current Seq
        self.origin_ns = 0  # start of the measured window (the warmup barrier)
        self.prep_records: list[RequestRecord] = []
        self._baseline: tuple[int, int, dict[str, Any] | None] = (0, 0, None)
        self.stopped_by_workload = False
        bind = getattr(workload, "bind", None)
        if bind is not None:
            bind(self)

    def _kv_router(self, pool: Pool) -> None:
        role = pool.role
        cfg = self.cfg.router
        if role.name == "decode":
            # Decode placement is load-only: no overlap credit, no prefill tracking.
            pool.router = KvRouter(pool.name, pool.ranks, role.dp_size, pool.block_size, cfg,
                                   None, track_prefill=False, track_blocks=True,
                                   assume_reuse=False)
            return
        pool.index = KvIndex()
        pool.router = KvRouter(pool.name, pool.ranks, role.dp_size, pool.block_size, cfg,
                               pool.index, track_prefill=True,
                               track_blocks=role.name == "aggregated", assume_reuse=True)
        if cfg.queue_threshold is not None:
            pool.queue = RouterQueue(cfg.queue_policy)

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> RunResult:
        with fewer_collections():
            return self._run()

    def _run(self) -> RunResult:
        workload = self.workload
        heap = self.heap
        steps = 0
        # The workload's next release time, converted once per distinct value. It can only
        # change when the workload releases requests or hears of a terminal (or, agentic, at an
        # instant's end), so it is asked again only then.
        release_ms: float | None = None
        release_at = 0
        next_release: float | None = None
        asked = -1  # self.notices when next_release was asked (-1: ask again)
        always_ask = self._at_instant is not None
        while True:
            if self.should_stop is not None and self.should_stop():
                raise Interrupted(self._result())
            if asked != self.notices or always_ask:
                next_release = workload.next_release_ms()
                asked = self.notices
            if next_release is not None and next_release != release_ms:
                release_ms, release_at = next_release, ms_to_ns(next_release)
            release_ns = None if next_release is None else max(release_at, self.now)
            if heap and (release_ns is None or heap[0][0] <= release_ns):
                now = heap[0][0]
            elif release_ns is not None:
                now = release_ns
            else:
                break
            if self.cap_ns is not None and now > self.cap_ns:
                self.facts.stopped_at_time_cap = True
                # Only passes complete by the cap count their prompt tokens (as the reference).
                for worker in self.workers:
                    if worker.busy and worker.pass_end > self.cap_ns:
                        self.stats.committed_prompt_tokens -= worker.committed
                break
            self.now = check_ns(now)
            while heap and heap[0][0] == now:
                _, kind, _, _, _, payload = heapq.heappop(heap)
                if kind != KV_VISIBLE:
                    # The clock the report bills runs to the last engine event; router events
                    # that only land later (kv_event_lag_ms) do not extend it (as the reference).
                    self.busy_until = now
                if kind == PASS_DONE:
                    self._pass_done(payload)
                elif kind == HOST_DONE:
                    assert self.host is not None
                    self.host.on_event(payload)
                elif kind == WORKER_READY:
                    self._start(payload)
                elif kind == ACTIONS:
                    self._run_actions()
                elif kind == KV_VISIBLE:
                    pool, scheduler_id, events, tier = payload
                    pool.index.apply(scheduler_id, events, tier)
                    stream = (pool.name, scheduler_id, tier)
                    if stream in self.kv_pending:
                        self.kv_pending[stream] -= 1
                else:
                    self._transfer_done(payload)
            if self._at_instant is not None and self._at_instant(ns_to_ms(now)):
                self.busy_until = now
                self.stopped_by_workload = True
                break
            if asked != self.notices or always_ask:
                next_release = workload.next_release_ms()
                asked = self.notices
            if next_release is not None and next_release != release_ms:
                release_ms, release_at = next_release, ms_to_ns(next_release)
            if next_release is not None and release_at <= now:
                released = workload.release(max(next_release, ns_to_ms(now)))
                asked = -1
                if released:
                    self.busy_until = now
                    for req in released:
                        self._arrive(req)
                elif self._at_instant is None:
                    raise EngineError(f"the workload announced a release at {next_release} ms "
                                      "but released nothing")
                else:
                    again = workload.next_release_ms()
                    if again is not None and ms_to_ns(again) <= now:
                        raise EngineError(f"the workload keeps announcing a release at {again} "
                                          "ms but releases nothing")
            if self.dirty:
                for gid in sorted(self.dirty):
                    self._start(self.workers[gid])
                self.dirty.clear()
            steps += 1
            if self.progress is not None and steps % PROGRESS_EVERY == 0:
                self._report_progress()
        if self.live and not self.facts.stopped_at_time_cap and not self.stopped_by_workload:
            stuck = [(rank, s) for pool in self.pools for rank in pool.ranks
                     for s in (*rank.running, *rank.waiting, *rank.pending)]
            reasons = [stall_reason(rank, s) for rank, s in stuck[:3]]
            more = f" (and {self.live - len(reasons)} more)" if self.live > len(reasons) else ""
            raise ReplayStalled(f"{self.live} request(s) can never finish: "
                                + ("; ".join(reasons) or "requests lost in transfer") + more)
        if self.progress is not None:
            self._report_progress()
        return self._result()

    # -- the workload's view (agentic warmup and profile) ----------------------------------------

    def drained(self) -> bool:
        """No request in flight and no G2 copy outstanding (the warmup barrier's server side)."""
        if self.live:
            return False
        return self.host is None or not any(pool.transfers for pool in self.host.pools)

    def open_measurement(self) -> None:
        """The warmup barrier: what ran so far is preparation, measured from here on.

        Records so far leave the report; committed tokens, preemptions and G2 copy totals count
        from here; reported times become relative to now; engine, router and KV state stay."""
        self.origin_ns = self.now
        self.measuring = True
        self.prep_records, self.done = [*self.done, *self.open.values()], []
        self.open = {}
        self._last_terminal = self._window = None
        host = None
        if self.host is not None:
            host = self.host.totals()
            self.host.timeline.restart(self.now)
        self._baseline = (self.stats.committed_prompt_tokens, self.stats.preemptions, host)
        if self.cap_ns is not None:
            self.cap_ns += self.now

    def drop_records(self) -> None:
        """The warmup aborted: what ran was preparation, and nothing will be measured."""
        self.prep_records.extend([*self.done, *self.open.values()])
        self.done, self.open = [], {}
        self._last_terminal = self._window = None

    def admission(self, ordinal: int) -> tuple[float | None, int | None]:
        """(first admission time, tokens it reused) of a recent request (preparation)."""
        for rec in (self.open.get(ordinal), *reversed(self.done)):
            if rec is not None and rec.ordinal == ordinal:
                first = rec.admission_history[0] if rec.admission_history else None
                return rec.first_admit_ms, None if first is None else first.reused_input_tokens
        return None, None

    def cancel(self, ordinal: int) -> bool:
        """Cancel a released request now; True when a pass already committed work for it
        (that server work stays unsettled). A request that never ran leaves its queue, and a
        pending G2 restore is withdrawn with its G1 destination blocks."""
        seq = self.seq_of.pop(ordinal, None)
        if seq is None:  # still in the router queue
            queue = self.pools[0].queue
            if queue is None or not queue.remove(ordinal):
                raise EngineError(f"cancel: request #{ordinal} is neither placed nor queued")
            self._end_canceled(self.open[ordinal], ordinal)
            return False
        rec = seq.rec
        committed = bool(rec.admission_history)
        rank: Rank = seq.scheduler  # type: ignore[assignment]
        pool = self.pool_of[rank.pool_name]
        if not committed:
            rank.unqueue(seq)
            if self.host is not None:
                self.host.withdraw(rank, seq)
            if seq.blocks:
                rank.pool.release(seq.blocks)
                seq.blocks = []
            pool.router.release(seq)
            self._drain(pool)
        self._end_canceled(rec, ordinal)
        return committed

    def _end_canceled(self, rec: RequestRecord, ordinal: int) -> None:
        rec.terminal_time_ms = ns_to_ms(self.now)
        rec.terminal_status = "canceled"
        self.live -= 1
        self.facts.requests_terminal += 1
        self.chains.pop(ordinal, None)
        self.arrival_no.pop(ordinal, None)
        self._finished(rec)

    def _finished(self, rec: RequestRecord) -> None:
        """A record is terminal: measured (kept or streamed), unless preparation dropped it."""
        if self.open.pop(rec.ordinal, None) is None:
            return  # released before an aborted warmup: not measured
        end = rec.terminal_time_ms
        assert end is not None
        if self._last_terminal is None or end > self._last_terminal:
            self._last_terminal = end
        if rec.terminal_status == "completed" and rec.first_admit_ms is not None:
            first, last = self._window or (rec.arrival_time_ms, end)
            self._window = (min(first, rec.arrival_time_ms), max(last, end))
        if self.sink is None or not self.measuring:
            self.done.append(rec)
        elif rec.source_held_ms is not None and rec.source_released_ms is None:
            self.unsettled[rec.ordinal] = rec  # the prefill side reports its release later
        else:
            self._stream(rec)

    def _stream(self, rec: RequestRecord) -> None:
        assert self.sink is not None
        if self.origin_ns:
            shift_times(rec, ns_to_ms(self.origin_ns))
        self.streamed += 1
        self.sink(rec)

    def _report_progress(self) -> None:
        """Call `progress(sim_ms, fraction)`; a display with a `counts` attribute also gets
        the requests done and, for agentic workloads, the plays settled and started."""
        progress = self.progress
        assert progress is not None
        now_ms = ns_to_ms(self.now)
        fraction = None
        of_workload = getattr(self.workload, "progress_fraction", None)
        if of_workload is not None:
            fraction = of_workload(now_ms)
        elif self._total:
            fraction = min(self.facts.requests_terminal / self._total, 1.0)
        if hasattr(progress, "counts"):
            counts = {"requests": self.facts.requests_terminal}
            plays = getattr(self.workload, "plays_progress", None)
            if plays is not None:
                counts["plays"], counts["plays_started"] = plays()
            progress.counts = counts
        progress(now_ms, fraction)

    def _result(self) -> RunResult:
        facts = self.facts
        committed, preemptions, host_base = self._baseline
        origin = ns_to_ms(self.origin_ns)
        records = sorted([*self.done, *self.open.values(), *self.unsettled.values()],
                         key=lambda r: r.ordinal)
        if self.origin_ns:
            for rec in records:
                shift_times(rec, origin)
        facts.end_ms = ns_to_ms(self.busy_until) - origin
        facts.committed_prefill_tokens = self.stats.committed_prompt_tokens - committed
        facts.preemptions_total = self.stats.preemptions - preemptions
        last = self._last_terminal
        facts.duration_ms = 0.0 if last is None else last - origin if self.origin_ns else last
        observed = getattr(self.workload, "observed", None)
        if observed is not None:
            # A continuous profile reports the successful requests' span as its duration.
            window = 0.0
            if self._window is not None:
                first, end = self._window
                window = (end - origin) - (first - origin) if self.origin_ns else end - first
            if observed(max(window, 0.0)):
                facts.reported_duration_ms = max(window, 0.0)
        extra = getattr(self.workload, "summary_extra", None)
        if extra is not None:
            facts.workload_summary = extra()
        if self.host is not None:
            facts.has_host_tier = True
            facts.g2_domains = self.host.g2_domains()
            totals = self.host.totals()
            if host_base is not None:
                for key, value in host_base.items():
                    if isinstance(value, int) and key != "pools":
                        totals[key] -= value
            facts.host_transfers = totals
            facts.g2_timeline = self.host.g2_timeline(self.busy_until)
        return RunResult(records, facts, streamed=self.streamed)

    def _start(self, worker: Worker) -> None:
        if not worker.busy:
            end = worker.start_pass(self.now, self.stepwise)
            # With G2, a rank that saw a copy complete while destinations wait, and has not
            # retried since, is due for a retry: its idle worker runs a pass too.
            due = any(rank.retry_due for rank in worker.ranks)
            while end is None and (due or (worker.pool_name == "decode" and worker.has_work())):
                # A decode pass that can move nothing still ends (at once) in the reference,
                # and its end retries the pending destinations of every rank of the worker; a
                # reservation may unblock the waiting requests (no pending destination: FCFS
                # admission again).
                due = False
                before = sum(len(rank.pending) for rank in worker.ranks)
                for rank in worker.ranks:
                    self._retry_destinations(rank)
                if sum(len(rank.pending) for rank in worker.ranks) == before:
                    break
                end = worker.start_pass(self.now, self.stepwise)
            if end is not None:
                self._push(end, PASS_DONE, self._pass_key(worker, end), (worker, worker.version))
                if self.host is not None:
                    self.host.after_start(worker)

    def _enqueue(self, action: Callable[[], None]) -> None:
        """A P/D handoff action (accept a destination, activate it, release a source, or a
        command held until a pass end): run in FIFO order after the instant's pass completions
        and transfer completions, before the workers restart (the reference's pending-action
        queue)."""
        self.actions.append(action)
        if not self.actions_due:
            self.actions_due = True
            self._push(self.now, ACTIONS, 0, None)

    def _run_actions(self) -> None:
        self.actions_due = False
        actions = self.actions
        while actions:
            actions.popleft()()

    def _pass_key(self, worker: Worker, end: int) -> int:
        """Same-instant order of pass completions: by worker identity (P/D: every prefill
        worker before every decode worker, whenever their passes started; checked against
        the reference)."""
        return worker.order

    def _wake(self, worker: Worker) -> None:
        """An idle worker got work outside a pass (a G2 completion): start when its pool would."""
        if self.cfg.mode == "aggregated":
            self.dirty.add(worker.gid)
        else:
            self._push(self.now, WORKER_READY, worker.gid, worker)

    def _publish(self, rank: Rank, events: list[tuple[int, int]], visible_ns: int,
                 tier: int) -> None:
        """Router-visible KV events of a rank, published at `visible_ns` (+ the event lag)."""
        pool = self.pool_of[rank.pool_name]
        if pool.index is None:
            return
        at = visible_ns + self.lag_ns
        stream = (rank.pool_name, rank.scheduler_id, tier)
        if at <= self.now and not self.kv_pending.get(stream):
            pool.index.apply(rank.scheduler_id, events, tier)
        else:
            # Behind a batch still in flight from this rank: it lands after that one (the heap
            # keeps one rank's batches in publication order), never before.
            self.kv_pending[stream] = self.kv_pending.get(stream, 0) + 1
            self._push(max(at, self.now), KV_VISIBLE, self.workers_of_rank(rank),
                       (pool, rank.scheduler_id, events, tier))

    def workers_of_rank(self, rank: Rank) -> int:
        return self.pool_of[rank.pool_name].workers[rank.worker_id].gid

    def _push(self, at: int, kind: int, key: int, payload: Any) -> None:
        self.seq_no += 1
        heapq.heappush(self.heap, (at, kind, key, self.seq_no, 0, payload))

    # -- arrivals and placement ------------------------------------------------------------------

    def _chain(self, req: TraceRequest, block_size: int) -> list[int]:
        by_size = self.chains.setdefault(req.ordinal, {})
        chain = by_size.get(block_size)
        if chain is None:
            chain = self.identities.prompt_blocks(req.prompt, req.input_length, block_size)
            by_size[block_size] = chain
        return chain

    def _arrive(self, req: TraceRequest) -> None:
        now = self.now
        if self.host is not None:
            self.host.observe_prompt(req.prompt)
        rec = RequestRecord(req.ordinal, req.request_id, ns_to_ms(now), req.input_length,
                            req.output_length, req.session_id, req.turn_index)
        self.arrival_no[req.ordinal] = self.arrivals
        self.arrivals += 1
        if req.agentic is not None:
            rec.play_id, rec.agentic, rec.agentic_phase = req.agentic
            rec.dispatched_at_ms = rec.arrival_time_ms
        self.open[rec.ordinal] = rec
        self.live += 1
        self.facts.requests_released += 1
        pool = self.pools[0]
        hidden = pool.name == "prefill"
        max_output = 1 if hidden else req.output_length
        queue = pool.queue
        if queue is not None and (queue or pool.router.all_busy()):  # type: ignore[union-attr]
            # The overlaps are looked up once, at arrival: a queued request is routed later
            # with current loads but these overlaps (checked against the reference).
            seen = pool.router.overlaps(self._chain(req, pool.block_size))  # type: ignore
            queue.push(req.ordinal, (req, rec, max_output, hidden, now, seen),
                       rec.arrival_time_ms, req.input_length, max(seen[0]) * pool.block_size)
            return
        self._place(pool, req, rec, max_output, hidden)

    def _drain(self, pool: Pool) -> None:
        """Route queued requests while some scheduler of the pool is not busy."""
        queue = pool.queue
        if queue is None:
            return
        while queue and not pool.router.all_busy():  # type: ignore[union-attr]
            req, rec, max_output, hidden, entered, seen = queue.pop()
            self._place(pool, req, rec, max_output, hidden, seen)
            decision = rec.routing_history[-1]
            decision.outcome = "queued"
            decision.queue_entered_at_ms = ns_to_ms(entered)
            decision.queue_wait_ms = ns_to_ms(self.now - entered)

    def _place(self, pool: Pool, req: TraceRequest, rec: RequestRecord, max_output: int,
               hidden: bool, seen: Overlaps | None = None) -> Seq:
        chain = self._chain(req, pool.block_size)
        rank, decision = pool.router.route(chain, req.input_length, seen)
        rec.routing_history.append(decision)
        seq = Seq(req, rec, list(chain), max_output, hidden)
        seq.scheduler = rank
        self.seq_of[req.ordinal] = seq
        pool.router.placed(seq, chain)
        if pool.name != "decode":
            rank.waiting.append(seq)
            self._poke(pool.workers[rank.worker_id])
        return seq

    def _cut(self, worker: Worker) -> None:
        """Something for the worker at `now`: a stretch in flight ends at its next boundary."""
        end = worker.sync(self.now)
        if end is None:
            return
        if end == self.now and self.cfg.mode != "aggregated":
            # The stretch has a pass boundary right now: step by step, that pass end was
            # handled before whatever is now touching the worker, so complete it here.
            self._pass_done((worker, worker.version))
            return
        self._push(end, PASS_DONE, self._pass_key(worker, end), (worker, worker.version))

    def _poke(self, worker: Worker) -> None:
        """The worker has new work at `now`: cut a stretch in flight, or start at `now`."""
        self._cut(worker)
        self.dirty.add(worker.gid)

    # -- pass completion -------------------------------------------------------------------------

    def _pass_done(self, payload: tuple[Worker, int]) -> None:
        worker, version = payload
        if version != worker.version or not worker.busy:
            return  # superseded by a cut stretch
        now = self.now
        if worker.stretch_k:
            self.facts.fast_forwarded_passes += worker.stretch_k
        else:
            self.facts.passes += 1
        outcome = worker.complete()
        if self.aggregated:
            self.dirty.add(worker.gid)  # restarts after the arrivals at `now` are queued
        else:
            # The disaggregated runtime restarts a worker before arrivals and transfers at `now`
            # (checked against the reference: they wait for the next pass).
            self._push(now, WORKER_READY, worker.gid, worker)
        pool = self.pool_of[worker.pool_name]
        if outcome is not None:
            self._deliver(pool, outcome)
        if pool.index is not None:
            for rank in worker.ranks:
                events = rank.pool.take_events()
                if events:
                    self._publish(rank, events, now, DEVICE)
        if self.host is not None:
            self.host.at_boundary(worker)
        if pool.name == "decode":
            for rank in worker.ranks:
                self._retry_destinations(rank)
        if worker.deferred:
            # Commands held for this pass end rejoin the handoff action queue.
            deferred, worker.deferred = worker.deferred, []
            for action in deferred:
                self._enqueue(action)

    def _deliver(self, pool: Pool, outcome: PassOutcome) -> None:
        router = pool.router

        def first_token(seq: Seq) -> None:
            router.first_token(seq)
            self._drain(pool)

        if outcome.tokens:
            stamp_tokens(outcome.tokens, self.now, first_token)
        for seq in outcome.rejected:
            self._terminal(pool, seq, "rejected")
        for seq in outcome.finished:
            self._terminal(pool, seq, "completed")
        for seq in outcome.held:
            self._source_held(pool, seq)

    def _terminal(self, pool: Pool, seq: Seq, status: str) -> None:
        rec = seq.rec
        rec.terminal_time_ms = ns_to_ms(self.now)
        rec.terminal_status = status
        pool.router.release(seq)
        self._drain(pool)
        self.live -= 1
        self.facts.requests_terminal += 1
        self.chains.pop(seq.req.ordinal, None)
        self.seq_of.pop(seq.req.ordinal, None)
        self.arrival_no.pop(seq.req.ordinal, None)
        self._finished(rec)
        self.workload.on_terminal(seq.req, ns_to_ms(self.now), status=status,
                                  output_tokens=rec.output_length)
        self.notices += 1  # the workload may release a follow-up: ask it again

    # -- scheduler commands ------------------------------------------------------------------------

    def _command(self, worker: Worker, action: Callable[[], None]) -> None:
        """Apply a command to a worker's schedulers now, or when its pass in flight ends.

        The reference applies handoff commands (reserve, activate, release) only between
        passes: a transfer that completes mid-pass activates at the pass end.
        """
        if worker.busy:
            worker.deferred.append(action)
            self._cut(worker)
        else:
            action()

    # -- prefill/decode handoff (engine.md section 4) ---------------------------------------------

    def _source_held(self, prefill: Pool, seq: Seq) -> None:
        """The prefill side finished: hold its KV, place the request on the decode pool."""
        rec = seq.rec
        rec.source_held_ms = ns_to_ms(self.now)
        prefill.router.release(seq)
        self._drain(prefill)
        decode = self.pools[1]
        dseq = self._place(decode, seq.req, rec, seq.req.output_length, False)
        dseq.partner = seq
        rank: Rank = dseq.scheduler  # type: ignore[assignment]
        dseq.waiting_order = rank.next_order
        rank.next_order += 1
        self._enqueue(lambda: self._accept_destination(dseq))

    def _accept_destination(self, dseq: Seq) -> None:
        """The decode rank takes the destination (a handoff action)."""
        rank: Rank = dseq.scheduler  # type: ignore[assignment]
        worker = self.pools[1].workers[rank.worker_id]
        if worker.busy:
            # Queued now; the worker's pass end makes one reservation attempt for the queue.
            rank.pending.append(dseq)
            self._cut(worker)
        else:
            self._request_destination(dseq)
            if rank.pending:
                # A pending destination changes what the rank admits (only handoffs whose KV
                # has arrived): an idle decode worker with waiting requests runs a pass.
                self._poke(worker)

    def _request_destination(self, dseq: Seq) -> None:
        rank: Rank = dseq.scheduler  # type: ignore[assignment]
        rank.pending.append(dseq)
        self._retry_destinations(rank)

    def _reserve(self, rank: Rank, dseq: Seq) -> bool:
        """Reserve destination blocks (reusing a resident prefix); start the transfer."""
        bs = rank.block_size
        need = -(-dseq.input_length // bs)
        if need > rank.num_blocks:
            # The reference aborts the whole run here; kvreplay rejects just this request.
            dseq.rec.rejection = ("decode_kv_cache", rank.num_blocks * bs)
            self._terminal(self.pools[1], dseq, "rejected")
            self._hand_back_source(dseq.partner)  # type: ignore[arg-type]
            return True
        pool = rank.pool
        hits = pool.lookup(dseq.block_ids, len(dseq.block_ids))[0] if rank.caching else 0
        hit_ids = dseq.block_ids[:hits]
        fresh = need - hits
        if not pool.can_allocate(fresh, hit_ids):
            return False
        pool.acquire_hits(hit_ids, dseq.blocks)
        if pool.pending is not None and pool.allocate_tracked(fresh, dseq.blocks):
            # Handoff KV is never received into capacity a D2H copy still reads: cancel, and
            # retry once the rank sees the copy complete (checked against the reference).
            pool.release(dseq.blocks)
            dseq.blocks = []
            return False
        if pool.pending is None:
            pool.allocate(fresh, dseq.blocks)
        dseq.registered = hits
        now = self.now
        dseq.rec.destination_reserved_ms = ns_to_ms(now)
        source = self.pools[0].role
        delay_ms = self.cfg.handoff_latency_ms
        per_token = source.kv_transfer_bytes_per_token
        bandwidth = source.kv_transfer_bandwidth
        if per_token and bandwidth:
            tokens = (dseq.input_length if source.kv_transfer_timing_mode == "full_prompt"
                      else fresh * bs)
            delay_ms += tokens * per_token / (bandwidth * 1e6)
        # Same-instant transfer completions come in the requests' arrival order (the reference's
        # handoff ids), not in reservation order (checked against the reference).
        self._push(now + ms_to_ns(delay_ms), TRANSFER_DONE, self.arrival_no[dseq.req.ordinal],
                   dseq)
        return True

    def _retry_destinations(self, rank: Rank) -> None:
        """Try to reserve for the oldest waiting destination (one per call).

        Tried when a destination reaches an idle rank, at each activation (after the arrived
        blocks are registered), at each pass end of the rank (before the commands held for
        it) and when an idle decode pass could move nothing. The head is tried once per
        capacity generation of the rank (a finish, rejection, preemption or G2 copy moves it),
        and not while the running slots are full (checked against the reference).
        """
        rank.retry_due = False
        pending = rank.pending
        if not pending:
            return
        front = pending[0]
        gen = rank.capacity_gen
        if len(rank.running) >= rank.max_seqs or front.last_attempt_gen == gen:
            front.last_attempt_gen = gen
            return
        front.last_attempt_gen = gen
        if self._reserve(rank, front):
            pending.popleft()

    def _transfer_done(self, dseq: Seq) -> None:
        rank: Rank = dseq.scheduler  # type: ignore[assignment]
        worker = self.pools[1].workers[rank.worker_id]
        self._enqueue(lambda: self._command(worker, lambda: self._activate(dseq)))

    def _activate(self, dseq: Seq) -> None:
        """KV arrived: the destination holds the prompt; the source lets go of it (a release
        queued behind the actions already pending). The arrived blocks become prefix hits
        before the rank retries its waiting destination."""
        rank: Rank = dseq.scheduler  # type: ignore[assignment]
        if rank.caching:
            full = dseq.input_length // rank.block_size
            if full > dseq.registered:
                rank._register_through(dseq, full)
        dseq.computed = dseq.input_length
        dseq.materialized = True
        dseq.status = WAITING
        # Back into the waiting queue by acceptance order: ahead of any request the rank
        # accepted later (a preempted one included), behind the rest.
        order = dseq.waiting_order
        waiting = rank.waiting
        at = len(waiting)
        for i, queued in enumerate(waiting):
            if queued.waiting_order > order:
                at = i
                break
        waiting.insert(at, dseq)
        dseq.rec.destination_activated_ms = ns_to_ms(self.now)
        self._retry_destinations(rank)
        self._poke(self.pools[1].workers[rank.worker_id])
        partner = dseq.partner
        self._enqueue(lambda: self._hand_back_source(partner))  # type: ignore[arg-type]

    def _hand_back_source(self, seq: Seq) -> None:
        """Release the source KV: a command of the prefill worker, applied at once when it is
        idle, else at its pass end (and reported then, as the reference does)."""
        rank: Rank = seq.scheduler  # type: ignore[assignment]
        worker = self.pools[0].workers[rank.worker_id]

        def release() -> None:
            rank.pool.release(seq.blocks)
            seq.blocks = []
            seq.rec.source_released_ms = ns_to_ms(self.now)
            settled = self.unsettled.pop(seq.rec.ordinal, None)
            if settled is not None:
                self._stream(settled)
            # The prefill worker restarts with the instant's other restarts, before arrivals.
            self._wake(worker)

        self._command(worker, release)


def stall_reason(rank: Rank, seq: Seq) -> str:
    """Why a request left on a rank can never move, with the numbers."""
    name = seq.req.request_id or f"request #{seq.req.ordinal}"
    where = f"{rank.pool_name} worker {rank.worker_id} rank {rank.dp_rank}"
    bs = rank.block_size
    known = seq.input_length + seq.generated
    blocks = -(-(known + (1 if seq.generated < seq.max_output else 0)) // bs)
    if seq in rank.pending:
        need = -(-seq.input_length // bs)
        return (f"{name} on {where}: its {seq.input_length}-token prompt needs {need} decode "
                f"blocks, and the rank never had them free ({rank.num_blocks} blocks, "
                f"max_num_seqs {rank.max_seqs})")
    if not rank.chunked and seq.input_length - min(seq.computed, seq.input_length) > rank.budget:
        return (f"{name} on {where}: its {seq.input_length}-token prompt exceeds "
                f"max_num_batched_tokens {rank.budget} with chunked prefill off")
    if blocks > rank.num_blocks:
        upto = known + 1 if seq.generated < seq.max_output else known
        return (f"{name} on {where}: its sequence reaches {upto} tokens, {blocks} KV blocks of "
                f"{bs} tokens, and the rank has {rank.num_blocks}")
    return (f"{name} on {where}: waiting for KV capacity that never frees "
            f"({known} tokens, {rank.num_blocks} blocks of {bs} tokens)")
