"""The G2 pool and its copy timing in isolation: LRU epochs, atomic cohorts, pins, lanes, shares.

Scenarios follow the reference engine's own unit tests of its host tier (1 MB blocks, 1 GB/s
links, so a block moves in 1 ms = 1,000,000 ns).
"""

from __future__ import annotations

from typing import Any

import pytest

from kvreplay.engine.host_pool import RESIDENT, RETRY_CAPACITY, HostPool, Transfer, by_hash
from kvreplay.engine.host_transfer import D2H, H2D, FairShare, FifoLanes

MS = 1_000_000
MB = 1_000_000


class Owner:
    """The slice of a rank's client the pool talks to."""

    def __init__(self, pool: HostPool, subscribe: bool = False) -> None:
        self.progress = False
        self.serial = 0
        self.events: list[tuple[int, int]] | None = [] if subscribe else None
        pool.clients.append(self)  # type: ignore[arg-type]

    def advance(self) -> None:
        self.progress = True
        self.serial += 1


def pool(capacity: int, hash_of: Any = None) -> tuple[HostPool, Any]:
    p = HostPool(0, capacity, MB, False, hash_of or (lambda key: key))
    return p, Owner(p)


def store(p: HostPool, owner: Any, keys: list[int]) -> Transfer:
    transfer = p.reserve_store(owner, keys, [k for k in keys if k not in p.entries])
    assert isinstance(transfer, Transfer)
    p.complete(transfer)
    return transfer


def test_pending_entries_are_used_but_not_evictable() -> None:
    """A reserved store counts against capacity at once; its keys become resident (and
    evictable) only when the copy completes."""
    p, owner = pool(2)
    transfer = p.reserve_store(owner, [1, 2], [1, 2])
    assert isinstance(transfer, Transfer)
    assert (p.used(), p.resident(), list(p.lru)) == (2, 0, [])
    assert p.reserve_store(owner, [3], [3]) == RETRY_CAPACITY
    p.complete(transfer)
    assert (p.used(), p.resident(), p.entries[1]) == (2, 2, RESIDENT)
    p.check()


def test_a_completed_cohort_shares_one_epoch_ordered_by_block_hash() -> None:
    """Keys of one completed store tie; the smaller block hash is evicted first."""
    p, owner = pool(2, hash_of=lambda key: {1: 20, 2: 10}[key] if key < 3 else key)
    store(p, owner, [1, 2])
    victim_free = p.reserve_store(owner, [3], [3])
    assert isinstance(victim_free, Transfer)
    assert 2 not in p.entries and 1 in p.entries  # hash(2) = 10 < hash(1) = 20


class CachingHasher:
    """A hasher with a SequenceHasher's cache, counting the keys it had to hash; hashes tie."""

    def __init__(self) -> None:
        self.cache: dict[int, int] = {}
        self.hashed: list[int] = []

    def __call__(self, key: int) -> int:
        if key not in self.cache:
            self.hashed.append(key)
            self.cache[key] = (key * 7919) % 5  # few values: many ties
        return self.cache[key]


def test_cohorts_sort_by_hash_as_sorted_does_hashing_each_key_once() -> None:
    """by_hash orders keys as sorted(keys, key=hash_of), ties in their order, asking the
    hasher only for keys it has not cached (once each), then reading its cache; without a
    cache it sorts by the hasher."""
    hasher = CachingHasher()
    cohorts = [[9, 3, 12, 4, 1, 30], [3, 12, 40, 2, 41], [5], [], [41, 40, 9, 44, 8, 3]]
    seen: set[int] = set()
    for keys in cohorts:
        expected = sorted(keys, key=lambda k: (k * 7919) % 5)
        fresh = [k for k in dict.fromkeys(keys) if k not in seen]
        before = len(hasher.hashed)
        assert by_hash(keys, hasher) == expected
        assert hasher.hashed[before:] == fresh
        seen.update(keys)
    assert by_hash([3, 1, 2], lambda k: -k) == [3, 2, 1]


def test_older_cohorts_are_evicted_before_newer_ones() -> None:
    """Cohort [1, 2] then [3]: storing 4 evicts 1, then storing 5 evicts 2."""
    p, owner = pool(3)
    store(p, owner, [1, 2])
    store(p, owner, [3])
    store(p, owner, [4])
    assert sorted(p.entries) == [2, 3, 4]
    store(p, owner, [5])
    assert sorted(p.entries) == [3, 4, 5]


def test_a_cohort_protects_its_present_keys() -> None:
    """Resident [1, 2], 1 touched: storing [1, 3] reserves only 3 and evicts 2, never 1."""
    p, owner = pool(2)
    store(p, owner, [1, 2])
    p.touch_reversed([1])
    transfer = p.reserve_store(owner, [1, 3], [3])
    assert isinstance(transfer, Transfer) and transfer.keys == [3]
    assert sorted(p.entries) == [1, 3]


def test_an_unfittable_cohort_changes_nothing() -> None:
    """Two blocks never fit one: retry, no entry, no transfer id used."""
    p, owner = pool(1)
    assert p.reserve_store(owner, [1, 2], [1, 2]) == RETRY_CAPACITY
    assert (p.used(), p.next_id) == (0, 0)


def test_pinned_load_sources_are_never_victims() -> None:
    """Loading 1 pins it: storing 3 evicts 2; when the load ends 1 is evictable again."""
    p, owner = pool(2)
    store(p, owner, [1, 2])
    load = p.schedule_load(owner, [1])
    assert load is not None
    store(p, owner, [3])
    assert sorted(p.entries) == [1, 3]
    p.check()
    p.complete(load)
    assert 1 in p.lru
    p.check()


def test_a_cancelled_load_unpins_as_one_newer_cohort() -> None:
    """Cohorts [1, 2] then [3]; loading [1, 2] then cancelling puts both after 3 in the LRU."""
    p, owner = pool(3)
    store(p, owner, [1, 2])
    store(p, owner, [3])
    load = p.schedule_load(owner, [1, 2])
    assert load is not None
    p.touch_reversed([1])  # pinned: ignored
    p.cancel_load(load)
    assert list(p.lru) == [3, 1, 2]
    store(p, owner, [4])
    assert 3 not in p.entries


def test_a_load_of_keys_no_longer_resident_is_refused() -> None:
    """schedule_load needs every key resident (pending or evicted keys: retry)."""
    p, owner = pool(2)
    p.reserve_store(owner, [1], [1])
    assert p.schedule_load(owner, [1]) is None
    assert p.schedule_load(owner, [9]) is None


def test_subscribers_get_stored_and_removed_events() -> None:
    """Stored at completion, Removed (one event per victim list) when a reservation evicts."""
    p = HostPool(0, 2, MB, True, lambda key: key)
    first, second = Owner(p, subscribe=True), Owner(p, subscribe=True)
    store(p, first, [1, 2])
    store(p, first, [3])
    assert first.events == second.events == [(1, 1), (1, 2), (0, 1), (1, 3)]
    assert first.progress and second.progress


# -- copy timing -----------------------------------------------------------------------------------

def test_private_lanes_are_fifo_and_independent() -> None:
    """Two stores and two loads submitted at once: each lane finishes at +1 and +2 ms."""
    lanes = FifoLanes(1.0, 1.0, 0)
    assert [lanes.submit(D2H, MB, 0), lanes.submit(D2H, MB, 0)] == [1 * MS, 2 * MS]
    assert [lanes.submit(H2D, MB, 0), lanes.submit(H2D, MB, 0)] == [1 * MS, 2 * MS]


def test_private_lane_first_byte_latency_and_unlimited_bandwidth() -> None:
    """Start = max(tail, not_before + latency); 0 GB/s means no copy time."""
    lanes = FifoLanes(1.0, 0.0, 5 * MS)
    assert lanes.submit(D2H, 2 * MB, 200 * MS) == 207 * MS
    assert lanes.submit(D2H, MB, 200 * MS) == 208 * MS  # queued behind the first
    assert lanes.submit(H2D, 8 * MB, 0) == 5 * MS


def test_shared_pool_cap_is_shared_equally() -> None:
    """Two clients' 1 MB stores under a 1 GB/s pool cap both finish at 2 ms; uncapped, at 1."""
    for cap, done in ((1.0, 2 * MS), (0.0, 1 * MS)):
        fair = FairShare(cap, cap)
        fair.submit(1, D2H, 1, 1.0, MB, 0, 0)
        fair.submit(2, D2H, 2, 1.0, MB, 0, 0)
        assert fair.next_event() == done
        assert fair.advance(done) == [1, 2]


def test_shared_directions_are_independent() -> None:
    """A store and a load at 1 GB/s each complete after 1 ms."""
    fair = FairShare(1.0, 1.0)
    fair.submit(1, D2H, 1, 1.0, MB, 0, 0)
    fair.submit(2, H2D, 1, 1.0, MB, 0, 0)
    assert fair.advance(MS) == [1, 2]


def test_shared_copies_reflow_on_cancel() -> None:
    """Two 1 MB copies of one client at 1 GB/s: at 1 ms each has 0.5 MB left; cancelling one
    gives the other the whole link, so it completes at 1.5 ms (2 ms without the cancel)."""
    fair = FairShare(0.0, 0.0)
    fair.submit(1, H2D, 1, 1.0, MB, 0, 0)
    fair.submit(2, H2D, 1, 1.0, MB, 0, 0)
    assert fair.advance(MS) == []
    fair.cancel(2)
    assert fair.next_event() == MS + MS // 2
    assert fair.advance(2 * MS) == [1]


def test_shared_copy_uses_nothing_before_its_first_byte() -> None:
    """A copy ready at 1 ms (first byte) does not slow one that runs from 0 to 1 ms."""
    fair = FairShare(1.0, 1.0)
    fair.submit(1, D2H, 1, 1.0, MB, 0, 0)
    fair.submit(2, D2H, 2, 0.0, 0, 0, MS)
    assert fair.advance(MS) == [1, 2]


def test_a_peer_joining_halves_a_copys_share() -> None:
    """A 1 MB copy alone at a 1 GB/s cap; a peer joins at 0.5 ms: the first completes at 1.5."""
    fair = FairShare(1.0, 1.0)
    fair.submit(1, D2H, 1, 1.0, MB, 0, 0)
    assert fair.advance(MS // 2) == []
    fair.submit(2, D2H, 2, 1.0, MB, MS // 2, 0)
    assert fair.next_event() == MS + MS // 2
    assert fair.advance(MS + MS // 2) == [1]


@pytest.mark.parametrize("gbps", [0.1, 0.3, 1.0, 7.0])
def test_copy_time_is_bytes_over_rate(gbps: float) -> None:
    """Decimal GB/s: a 1 MB block takes 1 / gbps ms, rounded to the nanosecond."""
    assert FifoLanes(gbps, gbps, 0).submit(D2H, MB, 0) == round(MB / gbps)
