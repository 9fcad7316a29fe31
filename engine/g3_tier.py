"""The G3 tier of a deployment: its pools, their LRU, the copies in flight (engine.md, "G3").

One tier per replay, as the reference's `G3Tier` (aisimulate-core 0.13.0,
engine/g3_offload/tier.rs): `worker_local` gives every worker its own pool of `num_g3_blocks`,
`cluster_shared` one pool of that many for the deployment. Keys are the G2 keys (full prompt
blocks' identities). An entry is *pending* (a write reserved it; its copy has not completed)
or resident; reads pin resident entries. Only resident, unpinned entries can be evicted, oldest
first; every probe of a resident entry touches it (a new epoch), and the blocks of one finished
copy share one epoch, tied by the smaller reference block hash (the reference sorts victims by
(touched ordinal, key)).

Copies (`Job`) are a fluid per direction (writes and reads apart): every copy past its first
byte moves at its worker's bandwidth over that worker's moving copies, capped in a shared pool by
the pool's bandwidth over all moving copies (host_transfer.FairShare, the same service G2's
shared pool uses). A copy's physical completion applies to the tier at once (residency, pins,
counters) and is queued for its owner, which consumes it at its next engine boundary.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from kvreplay.engine.host_pool import release_pins
from kvreplay.engine.host_transfer import FairShare

if TYPE_CHECKING:
    from kvreplay.engine.host_pool import Transfer

MISS, PENDING, RESIDENT = 0, 1, 2
WRITE, READ = 0, 1  # FairShare directions


class Job:
    """One copy between a worker's G2 and the tier."""

    __slots__ = ("direction", "evicted", "g2_keys", "id", "keys", "owner", "stage", "submitted")

    def __init__(self, ident: int, direction: int, keys: list[int], owner: int,
                 submitted: int) -> None:
        self.id = ident
        self.direction = direction
        self.keys = keys
        self.owner = owner  # the worker (its index in the tier)
        self.submitted = submitted  # ns
        self.g2_keys: list[int] = []  # a write: the G2 entries it pinned
        self.stage: list[Transfer] = []  # a read: the G2 reservations it fills (g3_client.py)
        self.evicted = 0  # a write: the entries it evicted


class IoStats:
    """One direction's counters (the reference's `G3IoStats`)."""

    __slots__ = ("cancelled_jobs", "completed_bytes", "completed_jobs", "submitted_jobs",
                 "transfer_ns")

    def __init__(self) -> None:
        self.submitted_jobs = 0
        self.completed_jobs = 0
        self.cancelled_jobs = 0
        self.completed_bytes = 0
        self.transfer_ns = 0  # summed submit-to-completion times, first byte included


class G3Stats:
    __slots__ = ("bypassed_restores", "cross_worker_read_blocks", "evictions", "lookup_hits",
                 "lookup_pending", "lookup_probes", "read", "write")

    def __init__(self) -> None:
        self.lookup_probes = 0
        self.lookup_hits = 0
        self.lookup_pending = 0
        self.read = IoStats()
        self.write = IoStats()
        self.evictions = 0
        self.cross_worker_read_blocks = 0
        self.bypassed_restores = 0


class G3Pool:
    """One pool's entries: key -> pending write's job id, or RESIDENT_ID; pins; writers; LRU."""

    __slots__ = ("entries", "lru", "pins", "writer")

    def __init__(self) -> None:
        self.entries: dict[int, int] = {}
        self.pins: dict[int, int] = {}
        self.writer: dict[int, int] = {}  # the worker whose write made the entry
        self.lru: OrderedDict[int, None] = OrderedDict()

    def resident(self) -> int:
        return sum(1 for state in self.entries.values() if state == RESIDENT_ID)


RESIDENT_ID = -1


class G3Tier:
    __slots__ = ("block_bytes", "capacity", "epoch", "fair", "hash_of", "jobs", "next_id",
                 "pools", "rates", "shared", "stats", "ttfb_ns")

    def __init__(self, *, shared: bool, workers: int, capacity: int, block_bytes: int,
                 read_gbps: float, write_gbps: float, shared_read_gbps: float,
                 shared_write_gbps: float, ttfb_ns: int, hash_of: Callable[[int], int]) -> None:
        self.shared = shared
        self.capacity = capacity
        self.block_bytes = block_bytes
        self.ttfb_ns = ttfb_ns
        self.hash_of = hash_of
        self.pools = [G3Pool() for _ in range(1 if shared else workers)]
        # worker_local ignores the pool caps (0 = unlimited).
        self.fair = FairShare(shared_write_gbps if shared else 0.0,
                              shared_read_gbps if shared else 0.0)
        self.rates = (write_gbps, read_gbps)
        self.jobs: dict[int, Job] = {}
        self.next_id = 0
        self.epoch = 0  # completions so far (every worker sees each one: g3_runtime.py)
        self.stats = G3Stats()

    def pool(self, worker: int) -> G3Pool:
        return self.pools[0 if self.shared else worker]

    # -- lookups -----------------------------------------------------------------------------

    def contains(self, worker: int, key: int) -> bool:
        """Whether the worker's pool has the key, pending or not (no touch, no count)."""
        return key in self.pool(worker).entries

    def probe(self, worker: int, key: int) -> int:
        """MISS | PENDING | RESIDENT; counted, and a resident entry is touched."""
        stats = self.stats
        stats.lookup_probes += 1
        pool = self.pool(worker)
        state = pool.entries.get(key)
        if state is None:
            return MISS
        if state != RESIDENT_ID:
            stats.lookup_pending += 1
            return PENDING
        stats.lookup_hits += 1
        lru = pool.lru
        if key in lru:  # a pinned entry is touched again when its read finishes
            lru.move_to_end(key)
        return RESIDENT

    # -- copies ------------------------------------------------------------------------------

    def submit_write(self, worker: int, keys: Sequence[int], now_ns: int) -> Job | None:
        """Reserve the leading keys the pool lacks that fit, evicting its oldest resident
        unpinned entries outside `keys`; None when none is missing or none fits (nothing
        changes then). The caller advanced the tier to now."""
        pool = self.pool(worker)
        entries = pool.entries
        missing = [key for key in keys if key not in entries]
        if not missing:
            return None
        free = self.capacity - len(entries)
        victims: list[int] = []
        if len(missing) > free:
            protected = set(keys)
            want = len(missing) - free
            for key in pool.lru:
                if key not in protected:
                    victims.append(key)
                    if len(victims) == want:
                        break
            del missing[free + len(victims):]
            if not missing:
                return None
            for key in victims:
                del pool.lru[key]
                del entries[key]
                del pool.writer[key]
            self.stats.evictions += len(victims)
        job = self._job(worker, WRITE, missing, now_ns)
        job.evicted = len(victims)
        for key in missing:
            entries[key] = job.id
            pool.writer[key] = worker
        return job

    def submit_read(self, worker: int, keys: list[int], now_ns: int) -> Job | None:
        """Pin resident keys for a copy up to G2; None when one is not resident."""
        pool = self.pool(worker)
        entries = pool.entries
        for key in keys:
            if entries.get(key) != RESIDENT_ID:
                return None
        pins = pool.pins
        for key in keys:
            n = pins.get(key, 0)
            if n == 0:
                pool.lru.pop(key, None)
            pins[key] = n + 1
        return self._job(worker, READ, keys, now_ns)

    def _job(self, worker: int, direction: int, keys: list[int], now_ns: int) -> Job:
        job = Job(self.next_id, direction, keys, worker, now_ns)
        self.next_id += 1
        self.jobs[job.id] = job
        io = self.stats.write if direction == WRITE else self.stats.read
        io.submitted_jobs += 1
        self.fair.submit(job.id, direction, worker, self.rates[direction],
                         len(keys) * self.block_bytes, now_ns, self.ttfb_ns)
        return job

    def advance(self, now_ns: int) -> list[Job]:
        """Progress every copy to now; apply and return the ones that finished, in order."""
        finished = []
        for ident, at in self.fair.advance_timed(now_ns):
            job = self.jobs.pop(ident)
            self._finish(job, at)
            finished.append(job)
        return finished

    def next_event(self) -> int | None:
        return self.fair.next_event()

    def started_at(self, now_ns: int) -> bool:
        """Whether a copy submitted earlier moves its first byte now."""
        jobs = self.jobs
        return any(job.ready == now_ns and jobs[ident].submitted < now_ns
                   for ident, job in self.fair.jobs.items())

    def _finish(self, job: Job, at_ns: int) -> None:
        self.epoch += 1
        pool = self.pool(job.owner)
        keys = job.keys
        if job.direction == WRITE:
            entries = pool.entries
            for key in keys:
                entries[key] = RESIDENT_ID
            self._touch_cohort(pool, keys)
            io = self.stats.write
        else:
            writer, owner = pool.writer, job.owner
            self.stats.cross_worker_read_blocks += sum(1 for key in keys if writer[key] != owner)
            freed = release_pins(pool.pins, keys)
            if freed:
                self._touch_cohort(pool, freed)
            io = self.stats.read
        io.completed_jobs += 1
        io.completed_bytes += len(keys) * self.block_bytes
        io.transfer_ns += at_ns - job.submitted

    def _touch_cohort(self, pool: G3Pool, keys: Sequence[int]) -> None:
        """One new epoch for keys entering (or already in) the LRU, tied by block hash."""
        lru = pool.lru
        if len(keys) > 1:
            keys = sorted(keys, key=self.hash_of)
        for key in keys:
            lru[key] = None
            lru.move_to_end(key)

    # -- report ------------------------------------------------------------------------------

    def resident_blocks(self) -> int:
        return sum(pool.resident() for pool in self.pools)

    def pending_blocks(self) -> int:
        return sum(len(pool.entries) for pool in self.pools) - self.resident_blocks()

    def check(self) -> None:
        for pool in self.pools:
            assert len(pool.entries) <= self.capacity
            for key in pool.lru:
                assert pool.entries.get(key) == RESIDENT_ID and key not in pool.pins, key
            for key, state in pool.entries.items():
                if state == RESIDENT_ID:
                    assert (key in pool.lru) != (key in pool.pins), key
                else:
                    assert state in self.jobs, key
