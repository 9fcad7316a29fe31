"""One rank's side of a G2 pool: restores at admission, write-through stores, deliveries.

What the scheduler calls (engine.md section 3, settled against the reference engine):

- `lookup` at admission, after the G1 prefix lookup: scan the pool over the prompt's full
  blocks beyond the raw G1 hit (the block-aligned last block included) until the first miss. A
  pending entry counts as matched but defers the request, and so does a block this rank is
  already loading. Every lookup that gets that far touches the prompt's keys in reverse order.
  A request still loading, or whose own latest store is still copying (a preempted request
  being readmitted), defers without touching anything.
- `start_load` on a hit the admission check accepted: pin the raw G1 prefix, reserve fresh G1
  destination blocks (none free: stop admitting this pass), pin the pool's entries and queue
  the H2D copy at the pass start (private pools: not before the D2H copies still reading the
  reserved capacity). The request then waits in the connector queue.
- `observe_stores` after the pass is scheduled: each scheduled request's complete prompt
  blocks from its store cursor to what this pass computes form one cohort of the keys missing
  from the pool (G1 hits included), reserved atomically now and submitted at the pass end; when
  it does not fit, or a block's capacity is still being copied out, the cursor stays and the
  cohort is retried on a later pass.
- `tick` at every engine boundary of the rank (pass end, or an idle rank's wake-up): deliver
  the completed copies this rank owns (a store releases its G1 fence or hold, a load activates
  its request), and wake the requests sleeping on transfer progress when anything completed in
  the pool since the last tick.

A private pool fences G1 capacity a D2H copy still reads (its blocks stay cached and hit-able;
reusing the capacity waits for the copy's fixed completion); a shared pool holds those blocks
in use until the copy completes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvreplay.engine.host_pool import (
    LOAD,
    RETRY_CAPACITY,
    STORE,
    HostPool,
    Transfer,
)
from kvreplay.engine.host_transfer import FifoLanes

if TYPE_CHECKING:
    from kvreplay.engine.g3_client import G3Client
    from kvreplay.engine.scheduler import Rank
    from kvreplay.engine.sequence import Seq

MISS, DEFER, HIT = 0, 1, 2
QUEUED, DEFERRED, RETRY, CAPACITY_BLOCKED = 0, 1, 2, 3


class HostClient:
    """A rank's membership in one pool (private: the only member)."""

    __slots__ = ("d2h_gbps", "delivered", "events", "fifo", "g3", "h2d_gbps", "load_by_key",
                 "outbox", "pending", "pool", "prepared", "progress", "rank", "saw_copy",
                 "serial", "ttfb_ns")

    def __init__(self, pool: HostPool, rank: Rank, d2h_gbps: float, h2d_gbps: float,
                 ttfb_ns: int, subscribe: bool) -> None:
        self.pool = pool
        self.rank = rank
        self.d2h_gbps = d2h_gbps
        self.h2d_gbps = h2d_gbps
        self.ttfb_ns = ttfb_ns
        self.fifo = None if pool.shared else FifoLanes(d2h_gbps, h2d_gbps, ttfb_ns)
        self.load_by_key: dict[int, int] = {}
        self.pending: dict[int, int] = {}  # private stores not yet delivered -> completion time
        self.prepared: list[Transfer] = []  # stores reserved this pass, submitted at its end
        self.outbox: list[tuple[Transfer, int]] = []  # (copy, not before) for the loop to submit
        self.delivered: list[Transfer] = []  # completed copies of this rank, not yet seen
        self.progress = False  # something completed in the pool since this rank's last tick
        # Progress events so far: a request asleep on transfer progress wakes only for one
        # after it fell asleep (Seq.slept_at), not for one its rank had not yet seen then (the
        # reference's waiters compare completion counts).
        self.serial = 0
        # A copy completed in the pool and this rank has not seen it yet (P/D destinations; an
        # idle rank sees it at once, a busy one at its pass end).
        self.saw_copy = False
        self.events: list[tuple[int, int]] | None = [] if subscribe else None
        self.g3: G3Client | None = None  # the worker's side of the G3 tier below (g3_runtime.py)
        pool.clients.append(self)

    # -- restores ----------------------------------------------------------------------------

    def lookup(self, seq: Seq, raw_g1_tokens: int) -> tuple[int, int, int]:
        """(MISS | DEFER | HIT, first pool block index, matched blocks) for a fresh admission."""
        if seq.load is not None:
            return DEFER, 0, 0
        latest = seq.latest_store
        if latest is not None:
            if not latest.done:
                return DEFER, 0, 0
            seq.latest_store = None
        pool = self.pool
        bs = self.rank.block_size
        nkeys = seq.input_length // bs
        keys = seq.block_ids
        base = raw_g1_tokens // bs
        outcome = MISS
        matched = 0
        g3 = self.g3
        if base < nkeys and g3 is not None and not g3.bypassed(seq) \
                and g3.stage(seq, keys[base:nkeys]):
            pool.touch_reversed(keys[:nkeys])
            return DEFER, base, 0
        if base < nkeys:
            entries = pool.entries
            loading = self.load_by_key
            deferred = False
            for i in range(base, nkeys):
                state = entries.get(keys[i])
                if state is None:
                    break
                if state >= 0 or keys[i] in loading:  # pending store, or loading here already
                    deferred = True
                matched += 1
            if matched:
                outcome = DEFER if deferred else HIT
        pool.touch_reversed(keys[:nkeys])
        return outcome, base, matched

    def start_load(self, seq: Seq, base: int, matched: int, raw_g1_tokens: int,
                   now_ns: int) -> int:
        """Reserve G1 destinations and queue the H2D copy; QUEUED | DEFERRED | RETRY | BLOCKED."""
        keys = seq.block_ids[base:base + matched]
        loading = self.load_by_key
        for key in keys:
            if key in loading:
                return DEFERRED
        g1 = self.rank.pool
        base_ids = seq.block_ids[:base]
        if not g1.can_allocate(matched, base_ids):
            return CAPACITY_BLOCKED
        blocks: list[int] = []
        g1.acquire_hits(base_ids, blocks)
        not_before = now_ns
        if g1.pending is not None:
            pending = self.pending
            for store_id in g1.allocate_tracked(matched, blocks):
                deadline = pending[store_id]
                if deadline > not_before:
                    not_before = deadline
        else:
            g1.allocate(matched, blocks)
        transfer = self.pool.schedule_load(self, keys)
        if transfer is None:
            g1.release(blocks)
            return RETRY
        transfer.seq = seq
        for key in keys:
            loading[key] = transfer.id
        if self.g3 is not None:
            promoted = self.pool.promoted
            self.g3.restore_state(seq).promoted = [key in promoted for key in keys]
        seq.blocks = blocks
        seq.registered = base
        seq.load = transfer
        seq.orig_g1_tokens = raw_g1_tokens
        seq.loaded_prefix = base + matched
        self.outbox.append((transfer, not_before))
        return QUEUED

    # -- stores ------------------------------------------------------------------------------

    def observe_stores(self, scheduled: dict[Seq, tuple[int, int, int]]) -> None:
        """Write-through cohorts of the requests this pass scheduled, in running order."""
        rank = self.rank
        bs = rank.block_size
        pool = self.pool
        entries = pool.entries
        g1 = rank.pool
        tracked = g1.pending is not None
        if scheduled and self.g3 is not None:
            self.g3.progress += 1  # the rank scheduled work: restore rounds start over
        for seq in rank.running:
            start = seq.store_cursor
            nkeys = seq.input_length // bs
            if start >= nkeys or seq not in scheduled:
                continue
            computed = seq.computed if seq.computed < seq.input_length else seq.input_length
            end = computed // bs
            if end <= start:
                continue
            ids = seq.block_ids
            missing = [i for i in range(start, end) if ids[i] not in entries]
            if not missing:
                seq.store_cursor = end
                continue
            if tracked and any(g1.copy_pending(seq.blocks[i]) for i in missing):
                continue  # its capacity is still being copied out: retry on a later pass
            transfer = pool.reserve_store(self, ids[start:end], [ids[i] for i in missing])
            if transfer == RETRY_CAPACITY:
                pool.stats.cohorts_retried += 1
                continue
            assert isinstance(transfer, Transfer)
            handles = [seq.blocks[i] for i in missing]
            if pool.shared:
                g1.hold(handles)
                transfer.handles = handles
            else:
                self.pending[transfer.id] = -1  # known once submitted at the pass end
                for handle in handles:
                    g1.mark_copying(handle, transfer.id)
            seq.latest_store = transfer
            seq.store_cursor = end
            pool.touch_reversed(ids[:nkeys])
            self.prepared.append(transfer)

    def submit_prepared(self, now_ns: int) -> None:
        """The pass ended: its stores go to the outbox (D2H not before now)."""
        if self.prepared:
            for transfer in self.prepared:
                self.outbox.append((transfer, now_ns))
            self.prepared = []

    # -- deliveries --------------------------------------------------------------------------

    def tick(self) -> list[Seq]:
        """Deliver this rank's completed copies; return the requests whose load completed."""
        activated: list[Seq] = []
        rank = self.rank
        if rank.pending and (self.delivered or self.saw_copy):
            # A copy completed in the pool (any participant's, in a shared pool): a rank with
            # destinations waiting moves its capacity generation and is due for a retry
            # (checked against the reference).
            rank.capacity_gen += 1
            rank.retry_due = True
        self.saw_copy = False
        if self.g3 is not None:
            return self._tick_g3(self.g3)
        if self.delivered:
            g1 = rank.pool
            for transfer in self.delivered:
                if transfer.kind == STORE:
                    if transfer.handles:
                        g1.release(transfer.handles)
                        transfer.handles = []
                    self.pending.pop(transfer.id, None)
                elif not transfer.cancelled:
                    seq = transfer.seq
                    assert seq is not None
                    self._activate(seq, transfer)
                    activated.append(seq)
            self.delivered = []
        if self.progress:
            self.progress = False
            self._wake()
        return activated

    def _tick_g3(self, g3: G3Client) -> list[Seq]:
        """`tick` with G3 below (the reference's order): the stores seen complete are written
        through to G3, then the worker's finished G3 copies apply, then restores activate."""
        activated: list[Seq] = []
        delivered, self.delivered = self.delivered, []
        g1 = self.rank.pool
        for transfer in delivered:
            if transfer.kind == STORE:
                if transfer.handles:
                    g1.release(transfer.handles)
                    transfer.handles = []
                self.pending.pop(transfer.id, None)
                g3.store(transfer)
        if g3.consume():
            self.advance()
        for transfer in delivered:
            if transfer.kind != STORE and not transfer.cancelled:
                seq = transfer.seq
                assert seq is not None
                self._activate(seq, transfer)
                activated.append(seq)
        if self.progress:
            self.progress = False
            self._wake()
        return activated

    def g3_reused(self, seq: Seq, host_tokens: int) -> int | None:
        """At a first admission with G3 below: how many of the host-restored tokens came up
        from G3 (None without G3); the request's restore rounds end."""
        g3 = self.g3
        if g3 is None:
            return None
        state = seq.g3
        seq.g3 = None
        if state is None or not host_tokens:
            return 0
        bs = self.rank.block_size
        return bs * sum(state.promoted[:host_tokens // bs])

    def _activate(self, seq: Seq, transfer: Transfer) -> None:
        """The restored blocks are in G1: cache them; the request is ready to be admitted."""
        loading = self.load_by_key
        for key in transfer.keys:
            if loading.get(key) == transfer.id:
                del loading[key]
        rank = self.rank
        g1 = rank.pool
        start = seq.registered
        for i, key in enumerate(transfer.keys):
            g1.register(seq.blocks[start + i], key)
        seq.registered = start + len(transfer.keys)
        seq.load = None
        seq.activated = True

    def deliver(self, transfer: Transfer) -> None:
        """A copy this rank owns completed physically; it is seen at the rank's next tick."""
        self.delivered.append(transfer)

    def quiet(self, running: list[Seq]) -> bool:
        """Whether pure decode passes of these requests leave the pool alone: no cohort left
        to (re)try, nothing to deliver (else the passes run one by one)."""
        if self.delivered or self.prepared or self.outbox or (
                self.g3 is not None and not self.g3.quiet()):
            return False
        bs = self.rank.block_size
        return all(seq.store_cursor >= seq.input_length // bs for seq in running)

    def advance(self) -> None:
        """Something completed that wakes this rank's requests asleep on transfer progress."""
        self.progress = True
        self.serial += 1

    def wakes(self) -> bool:
        """Whether the rank's next tick wakes a request (progress after it fell asleep)."""
        serial = self.serial
        return self.progress and any(s.sleeping and s.slept_at < serial
                                     for s in self.rank.connector)

    def _wake(self) -> None:
        serial = self.serial
        for seq in self.rank.connector:
            if seq.slept_at < serial:
                seq.sleeping = False

    def has_deliveries(self) -> bool:
        return bool(self.delivered) or self.wakes()


def direction_of(transfer: Transfer) -> int:
    """D2H (0) for stores, H2D (1) for loads."""
    return 0 if transfer.kind == STORE else 1


__all__ = ["CAPACITY_BLOCKED", "DEFER", "DEFERRED", "HIT", "LOAD", "MISS", "QUEUED", "RETRY",
           "STORE", "HostClient", "direction_of"]
