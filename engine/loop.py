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
the reference). Phases 1-3 are the events due at T in their order (events.py); 4 and 5 follow.
With a scaling policy (scaling.py): a starting worker becomes ready before phase 1, a policy
tick due at T runs once T is otherwise settled (aggregated: after phase 5; P/D: after the
arrivals are offered, before they are placed, except at time 0), and a draining worker that
holds nothing leaves at the end of T.

The loop owns the clock, the passes and the requests' lives (arrival, placement, terminal);
it delegates the records to the ledger (ledger.py), the P/D handoff to handoff.py, and G2 to
its runtime (host_runtime.py), which acts on the loop only through its port (port.py).
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappop
from typing import Any

from kvreplay.engine.collect import no_collections
from kvreplay.engine.deployment import Pool, build_pools
from kvreplay.engine.errors import EngineError, Interrupted, ReplayStalled
from kvreplay.engine.events import (
    ACTIONS,
    AFTER_EVENTS,
    BILLED,
    G3_DONE,
    HOST_DONE,
    KV_VISIBLE,
    PASS_DONE,
    SCALING_TICK,
    TRANSFER_DONE,
    WORKER_READY,
    WORKER_UP,
    Event,
    EventKind,
    EventQueue,
)
from kvreplay.engine.g3_runtime import G3Runtime
from kvreplay.engine.handoff import Handoff
from kvreplay.engine.host_runtime import HostRuntime
from kvreplay.engine.identity import BlockIdentities
from kvreplay.engine.kv_index import DEVICE
from kvreplay.engine.ledger import Ledger
from kvreplay.engine.ranks import RankScheduler
from kvreplay.engine.records import PassSeries, RequestRecord
from kvreplay.engine.result import PoolFacts, RunFacts, RunResult
from kvreplay.engine.router import KvRouter, Overlaps
from kvreplay.engine.scaling import ScalingPolicy, ScalingRuntime
from kvreplay.engine.scheduler import PassOutcome, RankStats
from kvreplay.engine.sequence import Seq
from kvreplay.engine.simtime import check_ns, limit_to_ns, ms_to_ns, ns_to_ms
from kvreplay.engine.speculation_report import merged_draws
from kvreplay.engine.telemetry import Telemetry, pass_forwards, stretch_forwards
from kvreplay.engine.traces.request import TraceRequest, Workload
from kvreplay.engine.worker import Worker, stamp_bursts, stamp_tokens
from kvreplay.schema.spec import Spec

PROGRESS_EVERY = 2048


class Simulation:
    """One replay of a workload on a checked Spec (config.check_spec): `run()` once."""

    def __init__(self, cfg: Spec, workload: Workload, *, stepwise: bool = False,
                 progress: Callable[[float, float | None], None] | None = None,
                 sink: Callable[[RequestRecord], None] | None = None,
                 should_stop: Callable[[], bool] | None = None,
                 approximations: list[str] | None = None,
                 scaling_policy: ScalingPolicy | None = None) -> None:
        self.cfg = cfg
        self.aggregated = cfg.mode == "aggregated"
        self.workload = workload
        self.stepwise = stepwise
        self.progress = progress
        self.should_stop = should_stop
        has_host = any(role.host_offload is not None for role in cfg.roles)
        self.identities = BlockIdentities(keep_keys=has_host)
        self.stats = RankStats()
        self.pools = build_pools(cfg, self.identities, self.stats)
        self.workers: dict[int, Worker] = {w.gid: w for pool in self.pools for w in pool.workers}
        self.pool_of = {pool.name: pool for pool in self.pools}
        self.events = EventQueue()
        self.now = 0
        self.busy_until = 0  # the last engine event (the clock the report bills)
        self.cap_ns = None if cfg.max_sim_time_ms is None else limit_to_ns(cfg.max_sim_time_ms)
        self.ledger = Ledger(sink, measuring=not workload.prepares)
        self.live = 0  # released and not yet terminal
        self.notices = 0  # terminals the workload heard of (its next release may have moved)
        self.dirty: set[int] = set()  # workers to start after the instant's arrivals (gids)
        self.completed_in_place = self.round_in_place = self.instant_pass_ended = False
        # The (kind, key) of the event being handled; after every event kind while the
        # instant's arrivals and restarts run (cut() orders a stretch boundary against it).
        self.handling: tuple[int, int] = AFTER_EVENTS
        self.chains: dict[int, dict[int, list[int]]] = {}  # ordinal -> block size -> chain
        self.seq_of: dict[int, Seq] = {}  # released, not yet terminal: ordinal -> current Seq
        self.arrival_no: dict[int, int] = {}  # released, not yet terminal: ordinal -> arrival
        self.arrivals = 0
        self.facts = _run_facts(cfg, self.pools, stepwise, approximations)
        self._baseline: tuple[int, int, dict[str, Any] | None] = (0, 0, None)
        self.stopped_by_workload = False
        kv = cfg.router.policy == "kv_router"
        self.lag_ns = ms_to_ns(cfg.router.kv_event_lag_ms) if kv else 0
        # (pool, scheduler, tier) -> KV event batches published but not yet applied
        self.kv_pending: dict[tuple[str, int, int], int] = {}
        self.host = (HostRuntime(self, self.pools, self.identities, workload.dense_tokens)
                     if has_host else None)
        if self.host is not None:
            for prompt in workload.token_order():
                self.host.observe_prompt(prompt)
        self.g3 = (G3Runtime(self, self.host, self.pools) if self.host is not None
                   and any(role.g3_offload is not None for role in cfg.roles) else None)
        self.handoff = (None if self.aggregated else
                        Handoff(self, self.pools[0], self.pools[1], cfg.handoff_latency_ms))
        self.telemetry = (None if cfg.telemetry is None else
                          Telemetry(cfg.telemetry.sample_interval_ms, self.pools))
        if self.telemetry is not None:
            for worker in self.workers.values():
                worker.ticks = self.telemetry.tick_at_or_after
        # Scaling (scaling.py): the policy's ticks and the pools' fleets.
        self.scaling = (None if scaling_policy is None
                        else ScalingRuntime(self, self.pools, scaling_policy))
        self._release_state(workload)
        workload.bind(self)

    def _event_handlers(self) -> list[Callable[[Any], None]]:
        """What runs each event kind, indexed by kind."""
        host, handoff, scaling = self.host, self.handoff, self.scaling
        by_kind: dict[EventKind, Callable[[Any], None]] = {
            HOST_DONE: _unexpected if host is None else host.on_event,
            WORKER_UP: _unexpected if scaling is None else scaling.ready_event,
            G3_DONE: _unexpected if self.g3 is None else self.g3.on_event,
            PASS_DONE: self._pass_done,
            KV_VISIBLE: self._kv_visible,
            TRANSFER_DONE: _unexpected if handoff is None else handoff.transfer_done,
            ACTIONS: _unexpected if handoff is None else handoff.run_actions,
            WORKER_READY: self._start,
            SCALING_TICK: _unexpected if scaling is None else scaling.on_tick_event,
        }
        return [by_kind[kind] for kind in EventKind]

    def _release_state(self, workload: Workload) -> None:
        # The workload's next release (_ask).
        self._asked = -1  # self.notices when it was asked (-1: ask again)
        self._next_ms: float | None = None  # its answer
        self._release_ms: float | None = None
        self._release_at = 0  # ns of _release_ms
        self._always_ask = workload.acts_at_instants
        self._at_instant = workload.at_instant if workload.acts_at_instants else None
        self._total = workload.total_requests

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> RunResult:
        """Replay the workload (once). What points back at the loop (its event handlers, the
        handoff) does so only while it runs, so that a finished run (pools, caches, block
        identities) is freed at once, without the cyclic collector."""
        with no_collections():
            try:
                return self._run()
            finally:
                self.handoff = None

    def _run(self) -> RunResult:
        steps = 0
        at_instant = self._at_instant
        always_ask = self._always_ask
        heap = self.events.heap  # popped here, in the queue's order: the hot path
        handlers = self._event_handlers()
        early, settle = self._scaling_hooks()
        tail: int | None = None  # under a scaling policy: when the workload was done
        while True:
            if self.should_stop is not None and self.should_stop():
                raise Interrupted(self._result())
            if self._asked != self.notices or always_ask:
                self._ask()
            now = self._next_instant(heap)
            if now is None:
                break
            if self.cap_ns is not None and now > self.cap_ns:
                self._stop_at_cap(self.cap_ns)
                break
            if self.telemetry is not None:
                tail = self._telemetry_before(now, tail)
            self.now = check_ns(now)
            # Phases 1-3: every event due at `now`, in their order.
            while heap and heap[0][0] == now:
                _, kind, key, _, payload = heappop(heap)
                self.handling = (kind, key)
                if BILLED[kind]:
                    # The clock the report bills runs to the last engine event; router events
                    # that only land later (kv_event_lag_ms) do not extend it (as the reference).
                    self.busy_until = now
                handlers[kind](payload)
            self.handling = AFTER_EVENTS
            if self.g3 is not None and self.g3.woken:
                self.g3.drive_woken()
            if at_instant is not None and at_instant(ns_to_ms(now)):
                self.busy_until = now
                self.stopped_by_workload = True
                break
            self._after_events(now, heap, always_ask, early, settle)
            steps += 1
            if self.progress is not None and steps % PROGRESS_EVERY == 0:
                self._report_progress()
        self._check_stalled()
        if self.telemetry is not None:
            self._samples_at_end(self.now if tail is None else tail)
        if self.progress is not None:
            self._report_progress()
        return self._result()

    def _after_events(self, now: int, heap: list[Event], always_ask: bool,
                      early: Callable[[int], None] | None,
                      settle: Callable[[list[Event], int], None] | None) -> None:
        """Phases 4-5 of an instant: the workload asked and released, a P/D scaling tick, the
        workers the instant touched started, then the instant's scaling settlement."""
        asks = self._asked != self.notices or always_ask
        # The sample of an instant-pass round is taken once: here, or (when no ask and a due
        # release follow) after the release below; the call clears the flag.
        if self.instant_pass_ended and (asks or self._next_ms is None or self._release_at > now):
            self._sample_after_instant_pass(now)
        if asks:
            self._ask()
        if self._next_ms is not None and self._release_at <= now:
            self._release(now)
        if self.instant_pass_ended:
            # Arrivals announced for `now` before the instant ran count in its sample (the
            # reference counts them before it drives the workers); their gauges show after it.
            self._sample_after_instant_pass(now)
        if early is not None:
            early(now)
        self.round_in_place = False
        if self.dirty:  # phase 5
            self._start_dirty()
        if self.handoff is not None and self.handoff.held:
            self.handoff.release_held()
        if settle is not None:
            settle(heap, now)

    def _start_dirty(self) -> None:
        """Phase 5. Aggregated: a pass of no duration (one that only rejects) completes at once
        and its worker starts again, with the others it touched, before the instant's later
        arrivals (the reference's drive loop handles such completions in place)."""
        while self.dirty:
            gids = sorted(self.dirty)
            self.dirty.clear()
            for gid in gids:
                self._start(self.workers[gid])
            if not self.aggregated:
                return
            now = self.now
            done = [w for w in (self.workers[gid] for gid in gids)
                    if w.busy and not w.stretch_k and w.pass_end == now]
            if not done:
                return
            self.completed_in_place = self.round_in_place = True
            for worker in done:
                worker.version += 1  # its queued PASS_DONE is superseded
                self._pass_done((worker, worker.version))

    def _scaling_hooks(self) -> tuple[Callable[[int], None] | None,
                                      Callable[[list[Event], int], None] | None]:
        """With a scaling policy (its first tick asked for now): a P/D tick before the
        instant's placements, and the end of an instant (drained workers leave, an aggregated
        run's tick) after its pass starts."""
        scaling = self.scaling
        if scaling is None:
            return None, None
        if self.telemetry is not None:  # samples list the workers by lifecycle state
            self.telemetry.fleets = {pool.name: fleet for pool, fleet
                                     in zip(self.pools, scaling.fleets, strict=True)}
        scaling.start()
        return (None if self.aggregated else self._early_tick), self._settle_scaling

    def _early_tick(self, now: int) -> None:
        """P/D: a due tick runs after the instant's events and drained workers' removal, before
        its arrivals are placed (ref; at time 0 the reference settles the first instant, its
        arrivals included, before it seeds the ticks: an aggregated run's order then)."""
        scaling = self.scaling
        assert scaling is not None
        if not scaling.due or not now:
            return
        if scaling.draining():
            scaling.settle()
        self._sample_before_tick(now)
        scaling.tick()

    def _settle_scaling(self, heap: list[Event], now: int) -> None:
        """End of an instant with a scaling policy: drained workers leave; an aggregated run's
        due tick runs once nothing else is left at this instant, after its arrivals and pass
        starts (ref; its own effects are handled in this instant)."""
        scaling = self.scaling
        assert scaling is not None
        if scaling.draining():
            scaling.settle()
        # After a pass of no duration completed in place, the tick runs before the instant's
        # next round (the reference's loop ticks then).
        if scaling.due and (self.round_in_place or not (heap and heap[0][0] == now)):
            self._sample_before_tick(now)
            scaling.tick()
            if self.dirty:
                self._start_dirty()
            if scaling.draining():
                scaling.settle()

    # -- telemetry (telemetry.py): an instant is sampled once it has settled ------------------

    def _sample_before_tick(self, now: int) -> None:
        """The telemetry sample of the instant of a scaling tick (the baseline at time 0) is
        taken before it (ref): the workers it adds or drains show in the next sample."""
        tele = self.telemetry
        if tele is None or self.workload_done():
            return
        if not tele.started:  # a tick at time 0 comes after the baseline
            tele.settle_late()
            tele.baseline(0)
        elif tele.next_ns == now:
            tele.periodic(workload_done=False)
            tele.settle_late()

    def _telemetry_before(self, now: int, tail: int | None) -> int | None:
        """The samples before the instant `now`, unless only policy ticks or start-up ends are
        left (under a scaling policy, once the workload is done: the reference's run, and its
        samples, ended at the last instant that had work, `tail`, returned)."""
        if self.scaling is not None and tail is None and self.workload_done():
            tail = self.now
        if tail is None:
            self._samples_before(now)
        return tail

    def _samples_before(self, now: int) -> None:
        """Before the instant `now`: the baseline (after instant 0, or before anything when the
        first instant comes later), the tick of the instant just settled, then the gauges
        read there to be shown after its sample, then every tick before `now` (instants
        without events: nothing else moves then)."""
        tele = self.telemetry
        assert tele is not None
        if now == self.now:  # another round of the same instant (a pass that took no time)
            # After a pass of no duration completed in place, a tick due now is sampled before
            # the instant's next round (the reference's loop ticks then).
            if self.completed_in_place and tele.started and tele.next_ns == now:
                tele.periodic(workload_done=False)
                tele.settle_late()
            self.completed_in_place = False
            return
        self.completed_in_place = False
        if not tele.started:
            tele.settle_late()
            tele.baseline(0)
        if tele.next_ns == self.now:
            tele.periodic(workload_done=False)  # `now` comes: requests remain
        tele.settle_late()
        while tele.next_ns is not None and tele.next_ns < now:
            tele.periodic(workload_done=False)

    def _samples_at_end(self, end: int) -> None:
        """The run ended at `end`: its baseline or its tick, then the final sample."""
        tele = self.telemetry
        assert tele is not None
        if not tele.started:
            tele.settle_late()
            tele.baseline(0)
        elif tele.next_ns == end:
            tele.periodic(workload_done=True)
        tele.settle_late()
        tele.final(end)

    def _ask(self) -> None:
        """Ask the workload for its next release (ms; `_release_at` in ns, converted once per
        distinct value). It can only move when the workload releases requests or hears of a
        terminal (`notices`), or at any instant for a workload that acts at instants, so the
        loop asks again only then."""
        next_ms = self._next_ms = self.workload.next_release_ms()
        self._asked = self.notices
        if next_ms is not None and next_ms != self._release_ms:
            self._release_ms, self._release_at = next_ms, ms_to_ns(next_ms)

    def _next_instant(self, heap: list[Event]) -> int | None:
        """The earliest pending event, or the next release when it comes first (never before
        now); None when neither is left."""
        if self._next_ms is None:
            return heap[0][0] if heap else None
        release_ns = self._release_at if self._release_at > self.now else self.now
        if heap and heap[0][0] <= release_ns:
            return heap[0][0]
        return release_ns

    def _release(self, now: int) -> None:
        """Phase 4: every request the workload releases at `now` (it announced one) arrives."""
        next_ms = self._next_ms
        assert next_ms is not None
        workload = self.workload
        released = workload.release(max(next_ms, ns_to_ms(now)))
        self._asked = -1
        if released:
            self.busy_until = now
            scaling = self.scaling
            if scaling is not None:
                # Offered at arrival; a P/D run's due tick comes before they are placed (ref).
                scaling.traffic.offered += len(released)
                if not self.aggregated:
                    self.live += len(released)  # released, about to arrive: not done
                    if self.telemetry is not None:  # counted in a sample before the tick (ref)
                        self.telemetry.arriving(len(released))
                    self._early_tick(now)
                    self.live -= len(released)
            for req in released:
                self._arrive(req)
        elif self._at_instant is None:
            raise EngineError(f"the workload announced a release at {next_ms} ms but "
                              "released nothing")
        else:
            again = workload.next_release_ms()
            if again is not None and ms_to_ns(again) <= now:
                raise EngineError(f"the workload keeps announcing a release at {again} ms but "
                                  "releases nothing")

    def _stop_at_cap(self, cap_ns: int) -> None:
        if self.scaling is not None and self.workload_done():
            return  # only a policy tick was left (the reference's run was over)
        self.facts.stopped_at_time_cap = True
        # Only passes complete by the cap count their prompt tokens (as the reference).
        for worker in self.workers.values():
            if worker.busy and worker.pass_end > cap_ns:
                self.stats.committed_prompt_tokens -= worker.committed

    def _check_stalled(self) -> None:
        if not self.live or self.facts.stopped_at_time_cap or self.stopped_by_workload:
            return
        stuck = [(rank, s) for pool in self.pools for rank in pool.ranks
                 for s in (*rank.running, *rank.waiting, *getattr(rank, "connector", ()),
                           *rank.pending)]
        reasons = [stall_reason(rank, s) for rank, s in stuck[:3]]
        more = f" (and {self.live - len(reasons)} more)" if self.live > len(reasons) else ""
        raise ReplayStalled(f"{self.live} request(s) can never finish: "
                            + ("; ".join(reasons) or "requests lost in transfer") + more)

    # -- the port (port.py) and the handoff's view of the loop (handoff.py) --------------------

    def push(self, at: int, kind: EventKind, key: int, payload: Any) -> None:
        self.events.push(at, kind, key, payload)

    def wake(self, worker: Worker) -> None:
        if not worker.busy:
            self.restart(worker)
            return
        end = worker.sync(self.now)  # cut a stretch at its next boundary
        if end is not None:
            self.events.push(end, PASS_DONE, worker.order, (worker, worker.version))

    def restart(self, worker: Worker) -> None:
        """An idle worker got work outside a pass: start when its pool would."""
        if self.aggregated:
            self.dirty.add(worker.gid)
        else:
            self.events.push(self.now, WORKER_READY, worker.gid, worker)

    def publish(self, rank: RankScheduler, events: list[tuple[int, int]], visible_ns: int,
                tier: int) -> None:
        pool = self.pool_of[rank.pool_name]
        if pool.index is None:
            return
        at = visible_ns + self.lag_ns
        stream = (rank.pool_name, rank.scheduler_id, tier)
        if at <= self.now and not self.kv_pending.get(stream):
            pool.index.apply(rank.scheduler_id, events, tier)
        else:
            # Behind a batch still in flight from this rank: it lands after that one (the
            # queue keeps one rank's batches in publication order), never before.
            self.kv_pending[stream] = self.kv_pending.get(stream, 0) + 1
            self.events.push(max(at, self.now), KV_VISIBLE, pool.worker_of(rank).gid,
                             (pool, rank.scheduler_id, events, tier))

    def _kv_visible(self, payload: tuple[Pool, int, list[tuple[int, int]], int]) -> None:
        pool, scheduler_id, events, tier = payload
        assert pool.index is not None
        pool.index.apply(scheduler_id, events, tier)
        stream = (pool.name, scheduler_id, tier)
        if stream in self.kv_pending:
            self.kv_pending[stream] -= 1

    def cut(self, worker: Worker) -> None:
        end = worker.sync(self.now)
        if end is None:
            return
        if end == self.now and (PASS_DONE, worker.order) < self.handling:
            # The stretch has a pass boundary right now, and step by step that pass end would
            # have been handled before what is now touching the worker (an arrival, a handoff
            # action, a later worker's pass end): complete it here. Otherwise it is queued
            # and handled in its place in this instant.
            self._pass_done((worker, worker.version))
            return
        self.events.push(end, PASS_DONE, worker.order, (worker, worker.version))

    def settle(self, worker: Worker) -> None:
        """A later round of the instant touches the worker: a stretch with a pass boundary now
        ends there and restarts, as step by step that pass end and its restart came in the
        instant's first round (P/D)."""
        end = worker.sync(self.now)
        if end is None:
            return
        if end == self.now:
            self._pass_done((worker, worker.version))
            self._start(worker)
            return
        self.events.push(end, PASS_DONE, worker.order, (worker, worker.version))

    def poke(self, worker: Worker) -> None:
        self.cut(worker)
        self.dirty.add(worker.gid)

    def adopt(self, worker: Worker) -> None:
        """A worker added by scaling joins the loop (G2 and G3 with its role's tiers, and the
        telemetry samples)."""
        self.workers[worker.gid] = worker
        if self.host is not None:
            self.host.join_worker(self.pool_of[worker.pool_name], worker)
        if self.g3 is not None:
            self.g3.join_worker(worker)
        tele = self.telemetry
        if tele is not None:
            for rank in worker.ranks:
                tele.join(worker.pool_name, rank)
            worker.ticks = tele.tick_at_or_after

    def retire(self, worker: Worker) -> None:
        """A worker removed by scaling leaves its worker-local G3 pool."""
        if self.g3 is not None:
            self.g3.leave(worker)

    def workload_done(self) -> bool:
        """No request in flight, no G2 copy outstanding (the reference's run goes on while one
        is), and the workload releases no more."""
        if not self.drained():
            return False
        if self._asked != self.notices or self._always_ask:
            self._ask()
        return self._next_ms is None

    def bill(self) -> None:
        self.busy_until = self.now

    def arrival_number(self, ordinal: int) -> int:
        return self.arrival_no[ordinal]

    def settled(self, ordinal: int) -> None:
        self.ledger.settled(ordinal)

    def observe(self, rank: RankScheduler, destinations: int = 0, late: bool = False) -> None:
        if self.telemetry is not None:
            self.telemetry.destinations[(rank.pool_name, rank.scheduler_id)] += destinations
            self.telemetry.refresh(rank, late)

    # -- passes ------------------------------------------------------------------------------

    def _start(self, worker: Worker) -> None:
        """Phase 5 (P/D: 3): an idle worker starts its next pass, if it has one."""
        if worker.busy:
            return
        if self.g3 is not None:
            self.g3.drive(worker)
        else:
            self.start_now(worker)

    def start_now(self, worker: Worker) -> bool:
        """Start an idle worker's pass now (also for the port); False when nothing starts."""
        if self.cap_ns is not None:
            worker.time_cap = self.cap_ns
        end = worker.start_pass(self.now, self.stepwise)
        if end is None and self.handoff is not None:
            end = self._start_after_retries(worker, self.handoff)
        if end is None:
            return False
        # Same-instant completions go by worker order (P/D: prefill workers first).
        self.events.push(end, PASS_DONE, worker.order, (worker, worker.version))
        if self.host is not None:
            self.host.after_start(worker)
        return True

    def _start_after_retries(self, worker: Worker, handoff: Handoff) -> int | None:
        """A decode pass that can move nothing still ends (at once) in the reference, and its
        end retries the pending destinations of every rank of the worker; a reservation may
        unblock the waiting requests (no pending destination: FCFS admission again). With G2,
        a rank that saw a copy complete while destinations wait, and has not retried since,
        is due for a retry: its idle worker runs a pass too."""
        due = any(rank.retry_due for rank in worker.ranks)
        end = None
        while due or (worker.pool_name == "decode" and worker.has_work()):
            due = False
            before = sum(len(rank.pending) for rank in worker.ranks)
            for rank in worker.ranks:
                handoff.retry_destinations(rank)
            if sum(len(rank.pending) for rank in worker.ranks) == before:
                break
            end = worker.start_pass(self.now, self.stepwise)
            if end is not None:
                break
        return end

    def _instant_pass_ends(self) -> None:
        """P/D: a pass of no duration ended in this round of the instant (the tick due now is
        sampled after the round's events, _sample_after_instant_pass)."""
        if self.handoff is not None:
            self.instant_pass_ended = True

    def _sample_after_instant_pass(self, now: int) -> None:
        """P/D: a round of the instant ended a pass of no duration; the tick due now is sampled
        here, after what that pass changed and before what it releases (a session's next turn
        its terminal frees, the handoff actions it issued: section "Event loop", step 6). The
        reference completes such a pass inside its drive of the workers and samples once that
        iteration of its same-instant loop is over (probed: SGLang draft seeds 86, 101, 138,
        10025; TensorRT-LLM: a prompt found whole in the prefill rank's cache hands off to the
        decode rank after the sample, trtllm-pd-telemetry seed 4)."""
        self.instant_pass_ended = False
        tele = self.telemetry
        assert tele is not None
        if tele.started and tele.next_ns == now:
            tele.periodic(workload_done=False)
            tele.settle_late()

    def _pass_done(self, payload: tuple[Worker, int]) -> None:
        worker, version = payload
        if version != worker.version or not worker.busy:
            return  # superseded by a cut stretch
        now = self.now
        k = worker.stretch_k
        forwards = visible = 0
        if k:
            self.facts.fast_forwarded_passes += k
            plan = worker.mtp_plan
            if plan is None:
                forwards = visible = k * sum(len(rank.running) for rank in worker.ranks)
            else:
                forwards, visible = stretch_forwards(plan, k)
        else:
            self.facts.passes += 1
            if worker.outcome is not None:
                forwards, visible = pass_forwards(worker.outcome)
        scaling = self.scaling
        wall = -1 if scaling is None else scaling.pass_ending(worker)
        if self.telemetry is not None and worker.pass_start == now and not k:
            self._instant_pass_ends()
        outcome = worker.complete()
        if self.aggregated:
            self.dirty.add(worker.gid)  # restarts after the arrivals at `now` are queued
        else:
            # The disaggregated runtime restarts a worker before arrivals and transfers at `now`
            # (checked against the reference: they wait for the next pass).
            self.events.push(now, WORKER_READY, worker.gid, worker)
        pool = self.pool_of[worker.pool_name]
        if scaling is not None:
            scaling.pass_done(pool, worker, wall, k, outcome, (forwards, visible))
        if outcome is not None:
            self._deliver_pass(pool, worker, outcome)
        if pool.index is not None:
            for rank in worker.ranks:
                events = rank.take_events()
                if events:
                    self.publish(rank, events, now, DEVICE)
        if self.host is not None:
            self.host.at_boundary(worker)
        tele = self.telemetry
        if tele is not None:  # the pass end as the ranks see it, G2 completions included
            for rank in worker.ranks:
                tele.refresh(rank)
                tele.pass_ended(rank)
            tele.decoded(forwards, visible)
        if self.handoff is not None:
            self._handoff_at_pass_end(pool, worker, self.handoff)

    def _deliver_pass(self, pool: Pool, worker: Worker, outcome: PassOutcome) -> None:
        """Deliver a single pass's outcome; P/D: the handoff actions a pass of no duration
        issues wait until the instant's drive of the workers is over (handoff.release_held)."""
        handoff = self.handoff
        if handoff is None or worker.pass_start != self.now:
            self._deliver(pool, outcome, worker.series)
            return
        handoff.holding = True
        try:
            self._deliver(pool, outcome, worker.series)
        finally:
            handoff.holding = False

    @staticmethod
    def _handoff_at_pass_end(pool: Pool, worker: Worker, handoff: Handoff) -> None:
        """P/D at a pass end: a decode rank retries its pending destinations, then the commands
        held for this pass end rejoin the handoff action queue."""
        if pool.name == "decode":
            for rank in worker.ranks:
                handoff.retry_destinations(rank)
        if worker.deferred:
            deferred, worker.deferred = worker.deferred, []
            for action in deferred:
                handoff.enqueue(action)

    def _deliver(self, pool: Pool, outcome: PassOutcome, series: PassSeries) -> None:
        router = pool.router

        def first_token(seq: Seq) -> None:
            router.first_token(seq)
            self.drain(pool)

        if outcome.tokens:
            stamp_tokens(outcome.tokens, self.now, first_token, series)
        if outcome.bursts:
            stamp_bursts(outcome.bursts, self.now, first_token)
        for seq in outcome.rejected:
            self.terminal(pool, seq, "rejected")
            if seq.hidden and self.handoff is not None and self.handoff.destination_first:
                self.handoff.source_rejected(seq)
        for seq in outcome.finished:
            self.terminal(pool, seq, "completed")
        if outcome.held:
            assert self.handoff is not None  # only a prefill pool holds
            for seq in outcome.held:
                self.handoff.source_held(seq)

    # -- a request's life: arrival, placement, terminal ----------------------------------------

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
        self.ledger.opened(rec)
        self.live += 1
        self.facts.requests_released += 1
        if self.telemetry is not None:
            self.telemetry.arrived()
        handoff = self.handoff
        if handoff is not None and handoff.destination_first:
            handoff.arrive(req, rec)
            return
        pool = self.pools[0]
        hidden = pool.name == "prefill"
        self.submit(pool, req, rec, 1 if hidden else req.output_length, hidden)

    def submit(self, pool: Pool, req: TraceRequest, rec: RequestRecord, max_output: int,
               hidden: bool) -> Seq | None:
        """Route a request onto the pool, through its router queue when it has one (None:
        queued)."""
        now = self.now
        queue = pool.queue
        if queue is not None and (queue or pool.router.all_busy()):
            # The overlaps are looked up once, at arrival: a queued request is routed later
            # with current loads but these overlaps (checked against the reference).
            seen = pool.router.overlaps(self._chain(req, pool.block_size))
            queue.push(req.ordinal, (req, rec, max_output, hidden, now, seen),
                       rec.arrival_time_ms, req.input_length, max(seen[0]) * pool.block_size)
            return None
        return self.place(pool, req, rec, max_output, hidden)

    def drain(self, pool: Pool, placed: list[int] | None = None) -> None:
        queue = pool.queue
        if queue is None:
            return
        while queue and not pool.router.all_busy():
            req, rec, max_output, hidden, entered, seen = queue.pop()
            self.place(pool, req, rec, max_output, hidden, seen)
            if placed is not None:
                placed.append(req.ordinal)
            decision = rec.routing_history[-1]
            decision.outcome = "queued"
            decision.queue_entered_at_ms = ns_to_ms(entered)
            decision.queue_wait_ms = ns_to_ms(self.now - entered)

    def place(self, pool: Pool, req: TraceRequest, rec: RequestRecord, max_output: int,
              hidden: bool, seen: Overlaps | None = None) -> Seq:
        chain = self._chain(req, pool.block_size)
        rank, decision = pool.router.route(chain, req.input_length, seen)
        rec.routing_history.append(decision)
        if self.scaling is not None and isinstance(pool.router, KvRouter) \
                and pool.index is not None:
            self.scaling.traffic.admitted(decision.selected_overlap_blocks or 0,
                                          -(-req.input_length // pool.block_size))
        tele = self.telemetry
        seq = Seq(req, rec, list(chain), max_output, hidden, rank)
        self.seq_of[req.ordinal] = seq
        pool.router.placed(seq, chain)
        if pool.name != "decode":
            rank.waiting.append(seq)
            if tele is not None:
                if decision.selected_overlap_blocks is not None:
                    tele.placed(decision.selected_overlap_blocks,
                                -(-req.input_length // pool.block_size))
                handoff = self.handoff
                tele.refresh(rank, late=handoff is not None and (
                    handoff.arriving or not handoff.destination_first))
            self.poke(pool.worker_of(rank))
        return seq

    def terminal(self, pool: Pool, seq: Seq, status: str) -> None:
        rec = seq.rec
        rec.terminal_time_ms = ns_to_ms(self.now)
        rec.terminal_status = status
        if self.telemetry is not None and status == "completed":
            self.telemetry.completed(rec)
        if self.scaling is not None and status == "completed":
            self.scaling.traffic.completed(*_shape(rec))
        pool.router.release(seq)
        self.drain(pool)
        self.seq_of.pop(seq.req.ordinal, None)
        self._ended(rec)
        self.workload.on_terminal(seq.req, ns_to_ms(self.now), status=status,
                                  output_tokens=rec.output_length)
        self.notices += 1  # the workload may release a follow-up: ask it again

    def _ended(self, rec: RequestRecord) -> None:
        """A record has its terminal time and status: the request leaves the loop."""
        self.live -= 1
        self.facts.requests_terminal += 1
        self.chains.pop(rec.ordinal, None)
        self.arrival_no.pop(rec.ordinal, None)
        self.ledger.finished(rec)

    # -- the workload's view (traces/request.Host: agentic warmup, profile, cancellation) ------

    def drained(self) -> bool:
        """No request in flight and no G2 copy outstanding (the warmup barrier's server side)."""
        if self.live:
            return False
        if self.g3 is not None and self.g3.in_flight():
            return False
        return self.host is None or not any(pool.transfers for pool in self.host.pools)

    def open_measurement(self) -> None:
        """The warmup barrier: what ran so far is preparation, measured from here on.

        Records so far leave the report; committed tokens, preemptions and G2 copy totals count
        from here; reported times become relative to now; engine, router and KV state stay."""
        self.ledger.open_measurement(self.now)
        host = None
        if self.host is not None:
            host = self.host.totals()
            self.host.timeline.restart(self.now)
        self._baseline = (self.stats.committed_prompt_tokens, self.stats.preemptions, host)
        if self.cap_ns is not None:
            self.cap_ns += self.now

    def drop_records(self) -> None:
        """The warmup aborted: what ran was preparation, and nothing will be measured."""
        self.ledger.drop()

    def admission(self, ordinal: int) -> tuple[float | None, int | None]:
        return self.ledger.admission(ordinal)

    def cancel(self, ordinal: int) -> bool:
        """Cancel a released request now; True when a pass already committed work for it
        (that server work stays unsettled). A request that never ran leaves its queue, and a
        pending G2 restore is withdrawn with its G1 destination blocks."""
        seq = self.seq_of.pop(ordinal, None)
        if seq is None:  # still in the router queue
            queue = self.pools[0].queue
            if queue is None or not queue.remove(ordinal):
                raise EngineError(f"cancel: request #{ordinal} is neither placed nor queued")
            self._end_canceled(self.ledger.open[ordinal])
            return False
        rec = seq.rec
        committed = bool(rec.admission_history)
        rank = seq.scheduler
        pool = self.pool_of[rank.pool_name]
        if not committed:
            rank.unqueue(seq)
            if self.host is not None:
                self.host.withdraw(rank, seq)
            rank.drop(seq)
            pool.router.release(seq)
            self.drain(pool)
        self._end_canceled(rec)
        return committed

    def _end_canceled(self, rec: RequestRecord) -> None:
        rec.terminal_time_ms = ns_to_ms(self.now)
        rec.terminal_status = "canceled"
        self._ended(rec)

    # -- progress and the result -------------------------------------------------------------

    def _report_progress(self) -> None:
        """Call `progress(sim_ms, fraction)`; a display with a `counts` attribute also gets
        the requests done and, for agentic workloads, the plays settled and started."""
        progress = self.progress
        assert progress is not None
        now_ms = ns_to_ms(self.now)
        terminal = self.facts.requests_terminal
        fraction = self.workload.progress_fraction(now_ms)
        if fraction is None and self._total:
            fraction = min(terminal / self._total, 1.0)
        if hasattr(progress, "counts"):
            counts = {"requests": terminal}
            plays = self.workload.plays_progress()
            if plays is not None:
                counts["plays"], counts["plays_started"] = plays
            progress.counts = counts
        progress(now_ms, fraction)

    def _result(self) -> RunResult:
        facts = self.facts
        ledger = self.ledger
        committed, preemptions, host_base = self._baseline
        records = ledger.records()
        facts.end_ms = ns_to_ms(self.busy_until) - ns_to_ms(ledger.origin_ns)
        facts.committed_prefill_tokens = self.stats.committed_prompt_tokens - committed
        facts.preemptions_total = self.stats.preemptions - preemptions
        facts.duration_ms = ledger.duration_ms()
        window = ledger.window_ms()
        if self.workload.observed(window):
            # A continuous profile reports the successful requests' span as its duration.
            facts.reported_duration_ms = window
        facts.workload_summary = self.workload.summary_extra()
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
        if self.telemetry is not None:
            facts.telemetry = self.telemetry.to_json()
        if self.scaling is not None:
            facts.scaling = self.scaling.finish(self.busy_until)
        if self.g3 is not None:
            facts.g3_offload = self.g3.g3_offload()
            facts.g3_timeline = self.g3.g3_timeline(self.busy_until)
        draws = merged_draws(rank.mtp.accepted_hist for pool in self.pools
                             for rank in pool.ranks if rank.mtp is not None and not rank.is_prefill)
        if draws is not None:
            facts.speculation_draws = tuple(draws)
        return RunResult(records, facts, streamed=ledger.streamed)


def _shape(rec: RequestRecord) -> tuple[int, int, float | None, float | None]:
    """A completed request as the scaling traffic window counts it: prompt and output
    lengths, TTFT and mean ITL (ms; None without tokens)."""
    first, last = rec.first_token_ms, rec.last_token_ms
    if first is None or last is None:
        return rec.input_length, rec.output_length, None, None
    itl = (last - first) / (rec.output_length - 1) if rec.output_length > 1 else None
    return rec.input_length, rec.output_length, first - rec.arrival_time_ms, itl


def _unexpected(payload: Any) -> None:
    raise EngineError(f"an event this deployment never schedules: {payload!r}")


def _run_facts(cfg: Spec, pools: list[Pool], stepwise: bool,
               approximations: list[str] | None) -> RunFacts:
    facts = RunFacts()
    facts.stepwise = stepwise
    facts.mode = cfg.mode
    facts.router = cfg.router.policy
    facts.approximations = list(approximations or [])
    facts.max_sim_time_ms = cfg.max_sim_time_ms
    for pool in pools:
        r = pool.role
        facts.pools.append(PoolFacts(pool.name, r.workers, r.dp_size, r.tensor_parallel_size,
                                     r.pipeline_parallel_size, r.backend, r.block_size,
                                     r.num_gpu_blocks))
    return facts


def stall_reason(rank: RankScheduler, seq: Seq) -> str:
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
    connector: list[Seq] = getattr(rank, "connector", [])
    if seq.activated and seq in connector and connector[0] is not seq:
        # Without G3 the reference aborts such a run too ("an effect-free zero-duration pass").
        head = connector[0].req.request_id or f"request #{connector[0].req.ordinal}"
        return (f"{name} on {where}: its G2 restore completed, and it waits in the connector "
                f"queue behind {head}, which waits for the G1 blocks this restore holds "
                f"({rank.num_blocks} blocks of {bs} tokens)")
    if blocks > rank.num_blocks:
        upto = known + 1 if seq.generated < seq.max_output else known
        return (f"{name} on {where}: its sequence reaches {upto} tokens, {blocks} KV blocks of "
                f"{bs} tokens, and the rank has {rank.num_blocks}")
    return (f"{name} on {where}: waiting for KV capacity that never frees "
            f"({known} tokens, {rank.num_blocks} blocks of {bs} tokens)")
