"""A G2 (host-pinned) pool: entries, LRU, copies in flight, router events (engine.md section 3).

Keys are block identities of full prompt blocks. An entry is *pending* (a store reserved it; its
D2H copy has not completed) or *resident*. Resident entries may be pinned by loads in flight;
only resident, unpinned entries sit in the LRU and can be evicted. Capacity counts every entry
(`used`), pending ones included.

LRU order is (epoch, block hash): every touch takes a new epoch, and blocks that become resident
or unpinned together (one completed store, one finished or cancelled load) share one epoch, tied
by the smaller reference block hash (block_hash.py). Because epochs only grow, appending to an
ordered dict keeps that order.

A store cohort is atomic: the missing keys are reserved at once, evicting the oldest unpinned
resident entries outside the cohort, or nothing happens and the caller retries later. One
transfer-id counter per pool numbers stores and loads alike.

Router events (tier host_pinned): `Removed` when a reservation evicts (one event, LRU order),
`Stored` when a store's copy completes. A private pool publishes to its owner, a shared one to
every subscribed rank.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from kvreplay.engine.pool import REMOVED, STORED

if TYPE_CHECKING:
    from kvreplay.engine.host_client import HostClient
    from kvreplay.engine.host_timeline import HostTimeline
    from kvreplay.engine.sequence import Seq

RESIDENT = -1
STORE, LOAD, EXTERNAL = 0, 1, 2  # EXTERNAL: a G3 promotion's reservation (no D2H copy)
RETRY_CAPACITY = -2



def release_pins(pins: dict[int, int], keys: Sequence[int]) -> list[int]:
    """Drop one pin of each key (G2 and G3 pools count pins alike); the keys whose last pin
    went, in `keys` order."""
    freed = []
    for key in keys:
        n = pins[key] - 1
        if n:
            pins[key] = n
        else:
            del pins[key]
            freed.append(key)
    return freed

def by_hash(keys: Sequence[int], hash_of: Callable[[int], int]) -> list[int]:
    """`keys` sorted by block hash, ties in their order. A SequenceHasher's cache is filled
    first, then read by the sort itself (no Python call per comparison key)."""
    known: dict[int, int] | None = getattr(hash_of, "cache", None)  # its values so far
    if known is not None:
        for key in keys:
            if key not in known:
                hash_of(key)
        try:
            return sorted(keys, key=known.__getitem__)
        except KeyError:  # a hasher that does not cache every key it is asked for
            pass
    return sorted(keys, key=hash_of)


class Transfer:
    """One copy between a rank's G1 and the pool."""

    __slots__ = ("cancelled", "deadline", "done", "handles", "id", "keys", "kind", "owner", "seq")

    def __init__(self, ident: int, kind: int, keys: list[int], owner: HostClient) -> None:
        self.id = ident
        self.kind = kind
        self.keys = keys
        self.owner = owner
        self.seq: Seq | None = None  # the request a load restores into
        self.handles: list[int] = []  # G1 blocks a shared store holds until it completes
        self.deadline: int | None = None  # private pools: fixed at submit
        self.done = False  # physically complete
        self.cancelled = False


class HostStats:
    """Counters of one pool (summed into the report)."""

    __slots__ = (
        "cohorts_retried",
        "evicted_blocks",
        "loaded_blocks",
        "loads",
        "restores_deferred",
        "stored_blocks",
        "stores",
    )

    def __init__(self) -> None:
        self.stores = 0
        self.stored_blocks = 0
        self.loads = 0
        self.loaded_blocks = 0
        self.cohorts_retried = 0
        self.restores_deferred = 0
        self.evicted_blocks = 0


class HostPool:
    __slots__ = ("block_bytes", "capacity", "clients", "entries", "evicted", "hash_of",
                 "holds_stores", "index", "lru", "next_id", "pins", "promoted", "published",
                 "shared", "stats", "timeline", "transfers")

    def __init__(self, index: int, capacity: int, block_bytes: int, shared: bool,
                 hash_of: Callable[[int], int]) -> None:
        self.index = index  # position among the run's pools (orders same-time completions)
        self.capacity = capacity
        self.block_bytes = block_bytes
        self.shared = shared
        self.hash_of = hash_of
        self.entries: dict[int, int] = {}  # key -> RESIDENT or the pending store's transfer id
        self.pins: dict[int, int] = {}
        self.lru: OrderedDict[int, None] = OrderedDict()
        self.next_id = 0
        self.clients: list[HostClient] = []
        self.transfers: dict[int, Transfer] = {}  # not yet physically complete
        self.stats = HostStats()
        self.published = False  # router events queued on a client since the runtime looked
        self.evicted = False  # a reservation evicted entries since the runtime looked
        self.timeline: HostTimeline | None = None  # the run's traffic over time (host_runtime.py)
        self.promoted: set[int] = set()  # resident entries a G3 read brought up (g3_client.py)
        # G3 below: a completed store's blocks stay pinned until its owner hands them to G3.
        self.holds_stores = False

    # -- queries ---------------------------------------------------------------------------------

    def used(self) -> int:
        return len(self.entries)

    def resident(self) -> int:
        return len(self.entries) - sum(1 for s in self.entries.values() if s != RESIDENT)

    def in_flight(self, transfer_id: int) -> bool:
        return transfer_id in self.transfers

    # -- recency ---------------------------------------------------------------------------------

    def touch_reversed(self, keys: Sequence[int]) -> None:
        """A new epoch for each resident, unpinned key, the last first (keys[0] ends most
        recent); other keys ignore touches."""
        lru = self.lru
        for key in reversed(keys):
            if key in lru:
                lru.move_to_end(key)

    def _touch_cohort(self, keys: Sequence[int]) -> None:
        """One new epoch for entries entering (or already in) the LRU, tied by block hash."""
        lru = self.lru
        if len(keys) > 1:
            keys = by_hash(keys, self.hash_of)
        for key in keys:
            if key in lru:  # (entries enter the LRU here: their keys are rarely in it)
                lru.move_to_end(key)
            else:
                lru[key] = None

    # -- stores ----------------------------------------------------------------------------------

    def reserve_store(self, owner: HostClient, protected: Sequence[int],
                      missing: list[int]) -> Transfer | int:
        """Reserve `missing` (keys of `protected` absent from the pool) atomically.

        Returns the new store Transfer, or RETRY_CAPACITY (nothing changed). Evicts the oldest
        unpinned resident entries outside `protected` as needed.
        """
        needed = len(missing) - (self.capacity - len(self.entries))
        victims: list[int] = []
        if needed > 0:
            keep = set(protected)
            for key in self.lru:
                if key not in keep:
                    victims.append(key)
                    if len(victims) == needed:
                        break
            if len(victims) < needed:
                return RETRY_CAPACITY
            self._evict(victims)
        transfer = Transfer(self.next_id, STORE, missing, owner)
        self.next_id += 1
        for key in missing:
            self.entries[key] = transfer.id
        self.transfers[transfer.id] = transfer
        self.stats.stores += 1
        self.stats.stored_blocks += len(missing)
        if self.timeline is not None:
            self.timeline.stored(self, len(missing), len(victims))
        return transfer

    def _evict(self, victims: list[int]) -> None:
        entries = self.entries
        lru = self.lru
        promoted = self.promoted
        for key in victims:
            del entries[key]
            del lru[key]
            promoted.discard(key)
        self.stats.evicted_blocks += len(victims)
        self.evicted = True
        self._publish(REMOVED, victims)

    # -- G3 promotions (g3_client.py) --------------------------------------------------------

    def reserve_external(self, owner: HostClient, key: int) -> Transfer | None:
        """Reserve one missing key for a G3 read (a pending entry, evicting the oldest unpinned
        resident entry when full); None when nothing can be evicted."""
        victims: list[int] = []
        if len(self.entries) >= self.capacity:
            for victim in self.lru:
                victims.append(victim)
                break
            if not victims:
                return None
            self._evict(victims)
        transfer = Transfer(self.next_id, EXTERNAL, [key], owner)
        self.next_id += 1
        self.entries[key] = transfer.id
        self.transfers[transfer.id] = transfer
        if self.timeline is not None:
            self.timeline.stored(self, 0, len(victims))
        return transfer

    def complete_external(self, transfer: Transfer) -> None:
        """A G3 read filled the reservation: the entry is resident (touched when unpinned)."""
        key = transfer.keys[0]
        del self.transfers[transfer.id]
        self.entries[key] = RESIDENT
        if key not in self.pins:
            self.lru[key] = None
            self.lru.move_to_end(key)
        self.promoted.add(key)
        self._publish(STORED, transfer.keys)

    def can_reserve(self, keys: Sequence[int]) -> bool:
        """Whether the keys' missing ones could all be reserved now, evicting only entries
        outside them (nothing changes)."""
        protected = set(keys)
        missing = sum(1 for key in protected if key not in self.entries)
        needed = missing - (self.capacity - len(self.entries))
        if needed <= 0:
            return True
        found = 0
        for key in self.lru:
            if key not in protected:
                found += 1
                if found == needed:
                    return True
        return False

    def unpin(self, keys: list[int]) -> None:
        self._unpin(keys)

    # -- loads -----------------------------------------------------------------------------------

    def schedule_load(self, owner: HostClient, keys: list[int]) -> Transfer | None:
        """Pin resident `keys` for a copy into G1; None when one is no longer resident."""
        entries = self.entries
        if not keys or len(keys) > self.capacity:
            return None
        for key in keys:
            if entries.get(key) != RESIDENT:
                return None
        pins = self.pins
        lru = self.lru
        for key in keys:
            n = pins.get(key, 0)
            if n == 0:
                lru.pop(key, None)
            pins[key] = n + 1
        transfer = Transfer(self.next_id, LOAD, keys, owner)
        self.next_id += 1
        self.transfers[transfer.id] = transfer
        self.stats.loads += 1
        self.stats.loaded_blocks += len(keys)
        if self.timeline is not None:
            self.timeline.loaded(self, len(keys))
        return transfer

    def _unpin(self, keys: list[int]) -> None:
        entries = self.entries
        freed = [key for key in release_pins(self.pins, keys) if entries.get(key) == RESIDENT]
        if freed:
            self._touch_cohort(freed)

    def cancel_load(self, transfer: Transfer) -> None:
        """Withdraw a load: its pins go (one epoch), delivery is withdrawn."""
        transfer.cancelled = True
        if not transfer.done:
            self.transfers.pop(transfer.id, None)
            self._unpin(transfer.keys)

    # -- physical completion --------------------------------------------------------------------

    def complete(self, transfer: Transfer) -> None:
        """The copy finished: apply its effect on the pool (whoever advanced the clock)."""
        transfer.done = True
        del self.transfers[transfer.id]
        if transfer.kind == STORE:
            entries = self.entries
            for key in transfer.keys:
                entries[key] = RESIDENT
            if self.holds_stores:
                # With G3 below, the stored blocks stay pinned until their owner hands them
                # to G3 (g3_client.G3Client.store), so no peer evicts them in between.
                pins = self.pins
                for key in transfer.keys:
                    pins[key] = pins.get(key, 0) + 1
            else:
                self._touch_cohort(transfer.keys)
            self._publish(STORED, transfer.keys)
        else:
            self._unpin(transfer.keys)
        # Progress wakes requests asleep on transfers: the owner's; in a shared pool a store
        # wakes every participant's too (entries they found pending turned resident), a load
        # only its owner's (checked against the reference with G3, which counts the lookups).
        transfer.owner.advance()
        for client in self.clients:
            client.saw_copy = True
            if transfer.kind == STORE and client is not transfer.owner:
                client.advance()

    def _publish(self, kind: int, keys: list[int]) -> None:
        self.published = True
        for client in self.clients:
            events = client.events
            if events is not None:
                for key in keys:
                    events.append((kind, key))

    # -- invariants (tests) ----------------------------------------------------------------------

    def check(self) -> None:
        assert len(self.entries) <= self.capacity, (len(self.entries), self.capacity)
        for key in self.lru:
            assert self.entries.get(key) == RESIDENT and key not in self.pins, key
        for key, n in self.pins.items():
            assert n > 0 and self.entries.get(key) == RESIDENT, key
        for key, state in self.entries.items():
            if state == RESIDENT:
                assert (key in self.lru) != (key in self.pins), key
            else:
                assert state in self.transfers, key
