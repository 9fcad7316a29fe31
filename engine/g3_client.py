"""One worker's side of the G3 tier: write-through from G2, promotions at lookup, deliveries.

What its G2 client (host_client.py) calls, after the reference's `VllmG3OffloadAdapter`
(aisimulate-core 0.13.0, engine/scheduler/vllm/g3_offload.rs; engine.md, "G3"):

- `store` when the worker sees one of its G2 stores complete (the stored G2 entries stay pinned
  from the copy's completion until then, host_pool.HostPool.complete): the leading keys the
  worker's G3 pool lacks that fit are written (evicting its oldest resident unpinned entries
  outside the cohort), their G2 entries stay pinned until the write completes, the others are
  let go at once.
- `stage` at a fresh admission's G2 lookup, over the prompt's full blocks beyond the G1 hit:
  for each key, a G2 hit is skipped, a pending G2 entry defers; a G2 miss is probed in G3: a
  resident entry is promoted (a pending G2 reservation, evicting the oldest unpinned G2 entry),
  a pending one defers, a miss ends the scan, and so does a reservation that finds nothing to
  evict. The keys promoted in one lookup form one read. True defers the request.
- `consume` at every engine boundary of the worker: its completed writes unpin their G2
  entries, its completed reads fill their reservations.

A request whose promotions keep evicting each other (the prefix is larger than G2 can hold)
stops restoring from G3 after 1,024 consecutive restore rounds (lookups that submitted a read)
in which its rank scheduled no work; it is then admitted with what G1 and G2 hold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvreplay.engine.g3_tier import MISS, PENDING, RESIDENT, WRITE, G3Tier, Job
from kvreplay.engine.host_pool import RESIDENT as G2_RESIDENT

if TYPE_CHECKING:
    from kvreplay.engine.g3_runtime import G3Runtime
    from kvreplay.engine.host_client import HostClient
    from kvreplay.engine.host_pool import Transfer
    from kvreplay.engine.sequence import Seq

BYPASS_ROUNDS = 1024


class RestoreState:
    """A waiting request's G3 restore rounds, and what its G2 restore brought up from G3."""

    __slots__ = ("bypassed", "mark", "promoted", "rounds")

    def __init__(self, mark: int) -> None:
        self.rounds = 0
        self.mark = mark  # the rank's progress count when the rounds started
        self.bypassed = False
        self.promoted: list[bool] = []  # per restored G2 key: it came up from G3


class G3Client:
    __slots__ = ("attempted", "attempted_at", "completed", "host", "progress", "runtime",
                 "seen_epoch", "tier", "worker")

    def __init__(self, runtime: G3Runtime, tier: G3Tier, worker: int, host: HostClient) -> None:
        self.runtime = runtime
        self.tier = tier
        self.worker = worker
        self.host = host
        self.completed: list[Job] = []  # this worker's finished copies, not yet consumed
        self.seen_epoch = 0  # the tier's completion count at this worker's last boundary
        self.progress = 0  # passes of the rank that scheduled work
        self.attempted_at = -1
        self.attempted: set[tuple[int, int]] = set()  # (request, key) promoted at attempted_at

    # -- write-through -----------------------------------------------------------------------

    def store(self, transfer: Transfer) -> None:
        """The worker saw its G2 store complete (its blocks held since): write what G3 lacks;
        the blocks written stay held until the write completes, the others are let go."""
        now = self.runtime.advance()
        job = self.tier.submit_write(self.worker, transfer.keys, now)
        written = set() if job is None else set(job.keys)
        declined = [key for key in transfer.keys if key not in written]
        if declined:
            self.host.pool.unpin(declined)
        if job is not None:
            job.g2_keys = job.keys
            self.runtime.submitted(job)

    # -- promotions --------------------------------------------------------------------------

    def restore_state(self, seq: Seq) -> RestoreState:
        state = seq.g3
        if state is None:
            state = seq.g3 = RestoreState(self.progress)
        elif state.mark != self.progress:  # the rank scheduled work since: start over
            state.rounds = 0
            state.mark = self.progress
        return state

    def bypassed(self, seq: Seq) -> bool:
        """Whether the request no longer restores from G3 (counted once, when it stops)."""
        state = self.restore_state(seq)
        if not state.bypassed and state.rounds >= BYPASS_ROUNDS:
            state.bypassed = True
            self.tier.stats.bypassed_restores += 1
        return state.bypassed

    def stage(self, seq: Seq, keys: list[int]) -> bool:
        """Promote what G3 holds of `keys` beyond G2 (see the module); True: defer. Probes
        read the tier as it is (the reference's do not move its clock; its read does)."""
        now = self.runtime.port.now
        if now > self.attempted_at:
            self.attempted_at = now
            self.attempted.clear()
        pool = self.host.pool
        entries = pool.entries
        tier = self.tier
        worker = self.worker
        owner = seq.req.ordinal
        reservations: list[Transfer] = []
        missing: list[int] = []
        deferred = False
        for key in keys:
            state = entries.get(key)
            if state is not None:
                if state != G2_RESIDENT:
                    deferred = True
                continue
            probe = tier.probe(worker, key)
            if probe == RESIDENT:
                if (owner, key) in self.attempted and not pool.can_reserve(
                        self._recoverable(keys)):
                    break
                reserved = pool.reserve_external(self.host, key)
                if reserved is None:
                    break
                missing.append(key)
                reservations.append(reserved)
            elif probe == PENDING:
                deferred = True
            else:
                assert probe == MISS
                break
        if not missing:
            return deferred
        self.runtime.advance()
        job = tier.submit_read(worker, missing, now)
        assert job is not None  # every key was just probed resident, and reads do not evict
        job.stage = list(reservations)
        for key in missing:
            self.attempted.add((owner, key))
        self.restore_state(seq).rounds += 1
        self.runtime.submitted(job)
        return True

    def _recoverable(self, keys: list[int]) -> list[int]:
        """The prefix of `keys` that G2 or G3 holds (a same-instant re-promotion is only tried
        when G2 could take all of it)."""
        entries = self.host.pool.entries
        out = []
        for key in keys:
            if key not in entries and not self.tier.contains(self.worker, key):
                break
            out.append(key)
        return out

    # -- deliveries --------------------------------------------------------------------------

    def consume(self) -> bool:
        """The worker's boundary: its finished copies take effect in G2. True when a copy
        finished anywhere in the tier since its last boundary (its requests waiting on
        transfer progress wake)."""
        self.runtime.advance()
        epoch = self.tier.epoch
        progressed = epoch != self.seen_epoch
        self.seen_epoch = epoch
        if self.completed:
            pool = self.host.pool
            for job in self.completed:
                if job.direction == WRITE:
                    if job.g2_keys:
                        pool.unpin(job.g2_keys)
                else:
                    for reservation in job.stage:
                        pool.complete_external(reservation)
            self.completed = []
        return progressed

    def quiet(self) -> bool:
        return not self.completed
