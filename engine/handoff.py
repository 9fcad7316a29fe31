"""The prefill -> decode handoff of a disaggregated deployment (engine.md section 4).

A request's prefill side finishes its prompt and holds its KV (the source); the request is
placed on the decode pool, whose rank accepts it as a destination, reserves blocks for the
prompt (reusing a resident prefix) when it can, and receives the KV after the transfer delay;
the destination then waits to be admitted with its prompt computed, and the source lets go.

The steps run as handoff actions, FIFO, after the instant's pass and transfer completions and
before the workers restart (the reference's pending-action queue); a step that is a command of
a busy worker (activate, release) waits for that worker's pass end.

SGLang runs the handoff destination first (the reference's `HandoffOrder::DestinationFirst`):
an arriving request is placed on the decode pool at once, its rank reserves the prompt's pages,
and only then is the prefill submitted; when the source is held the transfer starts.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from kvreplay.engine.events import ACTIONS, TRANSFER_DONE, EventKind
from kvreplay.engine.records import RequestRecord
from kvreplay.engine.sequence import Seq
from kvreplay.engine.simtime import ms_to_ns, ns_to_ms

if TYPE_CHECKING:
    from kvreplay.engine.deployment import Pool
    from kvreplay.engine.ranks import RankScheduler
    from kvreplay.engine.traces.request import TraceRequest
    from kvreplay.engine.worker import Worker

Action = Callable[[], None]


class HandoffLoop(Protocol):
    """What the handoff does through the event loop."""

    @property
    def now(self) -> int: ...

    def push(self, at: int, kind: EventKind, key: int, payload: Any) -> None: ...

    def place(self, pool: Pool, req: TraceRequest, rec: RequestRecord, max_output: int,
              hidden: bool) -> Seq:
        """Route a request onto one of the pool's ranks."""
        ...

    def drain(self, pool: Pool) -> None:
        """Route what the pool's router queue holds while some scheduler is not busy."""
        ...

    def submit(self, pool: Pool, req: TraceRequest, rec: RequestRecord, max_output: int,
               hidden: bool) -> Seq | None:
        """Route a request onto the pool, through its router queue when it has one (None:
        queued)."""
        ...

    def terminal(self, pool: Pool, seq: Seq, status: str) -> None: ...

    def cut(self, worker: Worker) -> None:
        """Something for a busy worker at `now`: a stretch in flight ends at its next boundary."""
        ...

    def settle(self, worker: Worker) -> None:
        """A later round of the instant touches the worker: a stretch boundary now ends and
        restarts there."""
        ...

    def poke(self, worker: Worker) -> None:
        """The worker has new work at `now`: cut a stretch in flight, or start at `now`."""
        ...

    def restart(self, worker: Worker) -> None:
        """An idle worker starts with the instant's other restarts, before the arrivals."""
        ...

    def arrival_number(self, ordinal: int) -> int:
        """How many requests arrived before this one (same-instant transfer order)."""
        ...

    def settled(self, ordinal: int) -> None:
        """The request's source KV is released (its record may be reported now)."""
        ...

    def observe(self, rank: RankScheduler, destinations: int = 0, late: bool = False) -> None:
        """A handoff command reached the rank (telemetry reads its gauges then); `destinations`
        counts the ones accepted there (+1) or activated or rejected (-1); `late`: shown after
        this instant's sample."""
        ...


class Handoff:
    __slots__ = ("actions", "actions_due", "arriving", "decode", "destination_first", "held",
                 "holding", "latency_ms", "loop", "prefill", "reserved", "settled_at")

    def __init__(self, loop: HandoffLoop, prefill: Pool, decode: Pool,
                 latency_ms: float) -> None:
        self.loop = loop
        self.prefill = prefill
        self.decode = decode
        self.latency_ms = latency_ms
        self.actions: deque[Action] = deque()
        self.actions_due = False
        # SGLang: the destination is reserved before the prefill is submitted (engine.md
        # section "SGLang"); `reserved` holds each such destination's fresh pages until its
        # source is held (the transfer's size).
        self.destination_first = decode.role.backend == "sglang"
        self.reserved: dict[int, tuple[Seq, int]] = {}
        self.settled_at = -1  # the instant whose stretches arrivals last settled
        # Destination first: an arrival's placement on the decode pool comes after the
        # reference samples the instant (its gauges show from the next sample on).
        self.arriving = False
        # A pass of no duration is completing (`holding`): the actions it issues wait in `held`
        # until the instant's drive of the workers is over (release_held).
        self.holding = False
        self.held: list[Action] = []

    # -- the action queue --------------------------------------------------------------------

    def enqueue(self, action: Action) -> None:
        """A handoff action (accept a destination, activate it, release a source, or a command
        held until a pass end): run in FIFO order after the instant's pass completions and
        transfer completions, before the workers restart."""
        if self.holding:
            self.held.append(action)
            return
        self.actions.append(action)
        if not self.actions_due:
            self.actions_due = True
            self.loop.push(self.loop.now, ACTIONS, 0, None)

    def release_held(self) -> None:
        """The instant's drive of the workers is over (every worker restarted at it has started
        a pass with duration or gone idle): the actions the passes of no duration issued join
        the queue, in a later round of the instant. The reference completes such a pass inside
        its drive of the workers and runs the handoff actions it issues (a rejection's cancel,
        a cached prompt's handoff) in the next iteration of its same-instant loop, so a command
        reaching a worker that the drive started meets it busy *(ref: disagg.rs
        `drain_current_timestamp`, `drive_prefill_workers`)*."""
        held, self.held = self.held, []
        for pool in (self.prefill, self.decode):
            for worker in pool.workers:
                if worker.busy:  # a stretch boundary now: that pass ended and restarted first
                    self.loop.settle(worker)
        for action in held:
            self.enqueue(action)

    def run_actions(self, _: None) -> None:
        """The ACTIONS event: every action queued so far, and those they queue, in order."""
        self.actions_due = False
        actions = self.actions
        while actions:
            actions.popleft()()

    def command(self, worker: Worker, action: Action) -> None:
        """Apply a command to a worker's schedulers now, or when its pass in flight ends.

        The reference applies handoff commands (reserve, activate, release) only between
        passes: a transfer that completes mid-pass activates at the pass end.
        """
        if worker.busy:
            worker.deferred.append(action)
            self.loop.cut(worker)
        else:
            action()

    # -- the steps ---------------------------------------------------------------------------

    def source_held(self, seq: Seq) -> None:
        """The prefill side finished: hold its KV, place the request on the decode pool."""
        loop = self.loop
        rec = seq.rec
        rec.source_held_ms = ns_to_ms(loop.now)
        seq.scheduler.holding += 1
        self.prefill.router.release(seq)
        loop.drain(self.prefill)
        if self.destination_first:
            dseq, fresh = self.reserved.pop(rec.ordinal)
            dseq.partner = seq
            self.enqueue(lambda: self._transfer(dseq, fresh))
            return
        if self.holding:  # placed on the decode pool when the held actions run
            self.held.append(lambda: self._place_source(seq))
            return
        self._place_source(seq)

    def _place_source(self, seq: Seq) -> None:
        """The held source's request is placed on the decode pool; its rank accepts it as a
        destination (an action)."""
        dseq = self.loop.place(self.decode, seq.req, seq.rec, seq.req.output_length, False)
        dseq.partner = seq
        rank = dseq.scheduler
        dseq.waiting_order = rank.next_order
        rank.next_order += 1
        self.enqueue(lambda: self._accept_destination(dseq))

    def arrive(self, req: TraceRequest, rec: RequestRecord) -> None:
        """Destination first: an arriving request's destination is placed and accepted (a
        handoff action, behind the actions already queued at this instant, in a later round of
        it: a worker's stretch boundary now is a pass end and restart that came before)."""
        now = self.loop.now
        if self.settled_at != now:
            self.settled_at = now
            for pool in (self.prefill, self.decode):
                for worker in pool.workers:
                    if worker.busy:
                        self.loop.settle(worker)
        self.enqueue(lambda: self._place_destination(req, rec))

    def _place_destination(self, req: TraceRequest, rec: RequestRecord) -> None:
        dseq = self.loop.place(self.decode, req, rec, req.output_length, False)
        rank = dseq.scheduler
        dseq.waiting_order = rank.next_order
        rank.next_order += 1
        self.arriving = True
        try:
            self._accept_destination(dseq)
        finally:
            self.arriving = False

    def _accept_destination(self, dseq: Seq) -> None:
        """The decode rank takes the destination (a handoff action)."""
        rank = dseq.scheduler
        worker = self.decode.worker_of(rank)
        if not rank.accepts_destination(dseq):
            # The reference fails the handoff (its reserve action fails): the request ends
            # `failed` (its session with it) and the source lets go.
            self.loop.terminal(self.decode, dseq, "failed")
            if not self.destination_first:
                self._hand_back_source(_source_of(dseq), released=False)
            return
        rank.pending.append(dseq)
        if worker.busy:
            # Queued now; the worker's pass end makes one reservation attempt for the queue.
            self._observe(rank, 1)
            self.loop.cut(worker)
            return
        self.retry_destinations(rank)
        self._observe(rank, 1)
        if rank.pending:
            # A pending destination changes what the rank admits (only handoffs whose KV has
            # arrived): an idle decode worker with waiting requests runs a pass.
            self.loop.poke(worker)

    def retry_destinations(self, rank: RankScheduler) -> None:
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
        tried = front.last_attempt_gen == gen
        front.last_attempt_gen = gen
        if tried or rank.destination_blocked():
            return
        if self._reserve(rank, front):
            pending.popleft()
        self._observe(rank)

    def _observe(self, rank: RankScheduler, destinations: int = 0) -> None:
        self.loop.observe(rank, destinations, self.arriving)

    def _reserve(self, rank: RankScheduler, dseq: Seq) -> bool:
        """Reserve destination blocks and start the transfer; False: no room yet."""
        if rank.destination_never_fits(dseq):
            # The reference aborts the whole run here; kvreplay rejects just this request.
            dseq.rec.rejection = ("decode_kv_cache", rank.num_blocks * rank.block_size)
            self._observe(rank, -1)
            self.loop.terminal(self.decode, dseq, "rejected")
            if not self.destination_first:
                self._hand_back_source(_source_of(dseq))
            return True
        fresh = rank.reserve_destination(dseq)
        if fresh < 0:
            return False
        dseq.rec.destination_reserved_ms = ns_to_ms(self.loop.now)
        if self.destination_first:
            # The prefill is submitted once the destination is reserved (an action); the
            # transfer starts when its source is held.
            arriving = self.arriving
            self.enqueue(lambda: self._submit_prefill(dseq, fresh, arriving))
            return True
        self._transfer(dseq, fresh)
        return True

    def _submit_prefill(self, dseq: Seq, fresh: int, arriving: bool) -> None:
        """Destination first: the reserved request's prefill goes to the prefill pool (the
        transfer starts when its source is held); reserved on its arrival, it reaches the
        prefill rank after the instant's sample, else before it."""
        self.reserved[dseq.req.ordinal] = (dseq, fresh)
        self.arriving = arriving
        try:
            self.loop.submit(self.prefill, dseq.req, dseq.rec, 1, True)
        finally:
            self.arriving = False

    def _transfer(self, dseq: Seq, fresh: int) -> None:
        """Start the KV transfer to a reserved destination (`fresh` pages were taken)."""
        rank = dseq.scheduler
        now = self.loop.now
        source = self.prefill.role
        delay_ms = self.latency_ms
        per_token = source.kv_transfer_bytes_per_token
        bandwidth = source.kv_transfer_bandwidth
        if per_token and bandwidth:
            tokens = (dseq.input_length if source.kv_transfer_timing_mode == "full_prompt"
                      else fresh * rank.block_size)
            delay_ms += tokens * per_token / (bandwidth * 1e6)
        self.loop.push(now + ms_to_ns(delay_ms), TRANSFER_DONE,
                       self.loop.arrival_number(dseq.req.ordinal), dseq)

    def source_rejected(self, seq: Seq) -> None:
        """Destination first: the prefill side rejected the request; its reserved destination
        is canceled (a command of the decode worker) and lets go of its pages."""
        entry = self.reserved.pop(seq.rec.ordinal, None)
        if entry is None:
            return
        dseq = entry[0]
        rank = dseq.scheduler
        worker = self.decode.worker_of(rank)

        def cancel() -> None:
            rank.drop(dseq)
            rank.capacity_gen += 1
            self.decode.router.release(dseq)
            self.retry_destinations(rank)
            self._observe(rank, -1)
            self.loop.poke(worker)

        self.enqueue(lambda: self.command(worker, cancel))

    def transfer_done(self, dseq: Seq) -> None:
        """The TRANSFER_DONE event: activate the destination (a command of its worker)."""
        worker = self.decode.worker_of(dseq.scheduler)
        self.enqueue(lambda: self.command(worker, lambda: self._activate(dseq)))

    def _activate(self, dseq: Seq) -> None:
        """KV arrived: the destination holds the prompt and waits for admission; the source
        lets go of it (a release queued behind the actions already pending)."""
        rank = dseq.scheduler
        rank.activate_destination(dseq)
        dseq.rec.destination_activated_ms = ns_to_ms(self.loop.now)
        self.retry_destinations(rank)
        self._observe(rank, -1)
        self.loop.poke(self.decode.worker_of(rank))
        source = _source_of(dseq)
        self.enqueue(lambda: self._hand_back_source(source))

    def _hand_back_source(self, seq: Seq, released: bool = True) -> None:
        """Release the source KV: a command of the prefill worker, applied at once when it is
        idle, else at its pass end (and reported then, as the reference does; a canceled
        source, `released` False, is not reported)."""
        rank = seq.scheduler
        worker = self.prefill.worker_of(rank)
        loop = self.loop

        def release() -> None:
            rank.release_source(seq)
            rank.holding -= 1
            if released:
                seq.rec.source_released_ms = ns_to_ms(loop.now)
            loop.observe(rank)
            loop.settled(seq.rec.ordinal)
            loop.restart(worker)

        self.command(worker, release)


def _source_of(dseq: Seq) -> Seq:
    source = dseq.partner
    if source is None:  # pragma: no cover - every destination is placed with its source
        raise AssertionError(f"destination without a source: {dseq!r}")
    return source
