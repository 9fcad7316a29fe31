"""One rank's G1 block pool: fixed capacity, prefix cache by block identity, LRU eviction.

A physical block ("copy", an int handle) is private (being filled, or never full) or cached
under an identity with a reference count. A cached copy nobody references sits in the inactive
LRU (head = evicted first). Allocation takes free capacity first, then evicts LRU heads.
Duplicate copies of one identity are allowed; lookups use the oldest. Releases go tail-first,
so a sequence's suffix blocks are evicted before its prefix (checked against the reference).

Router-visible events (prompt identities only; output identities never match another request):
`Stored` when an identity gets its first cached copy on the rank, `Removed` when its last copy is
evicted. They are buffered in `events` when a KV router consumes them.
"""

from __future__ import annotations

from collections import OrderedDict

STORED = 1
REMOVED = 0


class BlockPool:
    __slots__ = ("blank", "by_ident", "capacity", "dep", "events", "free_slots", "ident", "lru",
                 "n_copies", "next_handle", "pending", "refs")

    def __init__(self, capacity: int, record_events: bool) -> None:
        self.capacity = capacity
        self.n_copies = 0
        self.next_handle = 0
        self.ident: dict[int, int | None] = {}
        self.refs: dict[int, int] = {}
        self.by_ident: dict[int, list[int]] = {}
        self.lru: OrderedDict[int, None] = OrderedDict()
        self.events: list[tuple[int, int]] | None = [] if record_events else None
        # Private G2 only (track_copies): a physical block whose contents a D2H copy still reads
        # carries that store's transfer id; reusing its capacity before the copy completes must
        # wait for it. Free capacity is then a stack of slots, each with the copy it waits on
        # (as the reference's pool: released capacity is pushed, reservations take the top).
        self.pending: dict[int, int] | None = None  # store id -> completion time (ns)
        self.dep: dict[int, int] = {}
        self.free_slots: list[int | None] = []
        self.blank = 0  # never-used free slots under free_slots (no copy waits on them)

    def track_copies(self, pending: dict[int, int]) -> None:
        """Track D2H copies reading G1 blocks (`pending`: store id -> deadline, owned by the
        rank's G2 client, entries removed when the copy's completion is delivered)."""
        self.pending = pending
        # Implicit, not a list of None: a schema-valid capacity of billions of blocks fits.
        self.blank = self.capacity - self.n_copies
        self.free_slots = []

    # -- queries -------------------------------------------------------------------------------

    def num_active(self) -> int:
        """Blocks in use: everything but free capacity and the inactive LRU."""
        return self.n_copies - len(self.lru)

    def free_capacity(self) -> int:
        return self.capacity - self.n_copies

    def lookup(self, block_ids: list[int], limit: int) -> tuple[int, int]:
        """Longest cached prefix of block_ids[:limit]: (hit blocks, of which active)."""
        by_ident = self.by_ident
        refs = self.refs
        hits = active = 0
        for ident in block_ids[:limit]:
            copies = by_ident.get(ident)
            if copies is None:
                break
            hits += 1
            if refs[copies[0]] > 0:
                active += 1
        return hits, active

    def can_allocate(self, fresh: int, hit_ids: list[int]) -> bool:
        """Whether `fresh` new blocks fit once the hit copies are pinned (no longer evictable)."""
        short = fresh - (self.capacity - self.n_copies)
        if short <= 0:
            return True
        lru = self.lru
        by_ident = self.by_ident
        inactive_hits = sum(1 for ident in hit_ids if by_ident[ident][0] in lru)
        return short <= len(lru) - inactive_hits

    # -- mutations -----------------------------------------------------------------------------

    def acquire_hits(self, hit_ids: list[int], into: list[int]) -> None:
        """Reference the first copy of each hit identity (in order), appending handles to `into`."""
        by_ident = self.by_ident
        refs = self.refs
        lru = self.lru
        for ident in hit_ids:
            handle = by_ident[ident][0]
            if refs[handle] == 0:
                del lru[handle]
            refs[handle] += 1
            into.append(handle)

    def allocate(self, fresh: int, into: list[int]) -> None:
        """Append `fresh` private blocks to `into` (caller checked can_allocate)."""
        if self.pending is not None:
            self.allocate_tracked(fresh, into)
            return
        if fresh <= 0:
            return
        free = self.capacity - self.n_copies
        if free < fresh:
            self._evict(fresh - free)
        ident = self.ident
        refs = self.refs
        first = self.next_handle
        for handle in range(first, first + fresh):
            ident[handle] = None
            refs[handle] = 1
            into.append(handle)
        self.next_handle = first + fresh
        self.n_copies += fresh

    def _evict(self, count: int) -> None:
        """evict_one() `count` times (no G2 copy tracking: the pool has no pending copies)."""
        lru = self.lru
        ident_of = self.ident
        refs = self.refs
        by_ident = self.by_ident
        events = self.events
        for _ in range(count):
            handle, _ = lru.popitem(last=False)
            ident = ident_of.pop(handle)
            del refs[handle]
            assert ident is not None
            copies = by_ident[ident]
            if len(copies) == 1:
                del by_ident[ident]
                if events is not None and ident >= 0:
                    events.append((REMOVED, ident))
            else:
                copies.remove(handle)
        self.n_copies -= count

    def allocate_tracked(self, fresh: int, into: list[int]) -> list[int]:
        """allocate(), returning the store ids still copying out of the reused capacity.

        As the reference reserves capacity: the top of the free stack, then evicted LRU heads,
        handed out last-reserved first (so evicted capacity is written before free capacity).
        """
        pending = self.pending
        assert pending is not None
        waits: list[int] = []
        dep = self.dep
        free = self.free_slots
        take = fresh if fresh <= len(free) else len(free)
        reserved = free[len(free) - take:]
        del free[len(free) - take:]
        blank = min(fresh - take, self.blank)
        if blank:
            reserved[:0] = [None] * blank
            self.blank -= blank
            take += blank
        for _ in range(fresh - take):
            reserved.append(self.evict_one())
        for slot in reversed(reserved):
            handle = self.next_handle
            self.next_handle = handle + 1
            self.ident[handle] = None
            self.refs[handle] = 1
            self.n_copies += 1
            if slot is not None and slot in pending:
                dep[handle] = slot
                waits.append(slot)
            into.append(handle)
        return waits

    def mark_copying(self, handle: int, store_id: int) -> None:
        self.dep[handle] = store_id

    def copy_pending(self, handle: int) -> bool:
        """Whether a D2H copy still reads this block or the capacity it was allocated over."""
        store_id = self.dep.get(handle)
        if store_id is None:
            return False
        assert self.pending is not None
        if store_id in self.pending:
            return True
        del self.dep[handle]
        return False

    def _slot_dep(self, handle: int) -> int | None:
        store_id = self.dep.pop(handle, None)
        if store_id is not None and self.pending is not None and store_id in self.pending:
            return store_id
        return None

    def hold(self, handles: list[int]) -> None:
        """A shared-pool store keeps the blocks it copies in use until the copy completes."""
        refs = self.refs
        for handle in handles:
            refs[handle] += 1

    def register(self, handle: int, ident: int) -> None:
        """A private block became full and computed: enter the prefix cache under `ident`."""
        self.ident[handle] = ident
        copies = self.by_ident.get(ident)
        if copies is None:
            self.by_ident[ident] = [handle]
            if self.events is not None and ident >= 0:
                self.events.append((STORED, ident))
        else:
            copies.append(handle)

    def release(self, handles: list[int]) -> None:
        """Drop one reference to each block, tail first: private blocks free, cached ones idle."""
        ident = self.ident
        refs = self.refs
        lru = self.lru
        for handle in reversed(handles):
            if ident[handle] is None:
                left = refs[handle] - 1
                if left:
                    refs[handle] = left
                    continue
                del ident[handle]
                del refs[handle]
                self.n_copies -= 1
                if self.pending is not None:
                    self.free_slots.append(self._slot_dep(handle))
                continue
            left = refs[handle] - 1
            refs[handle] = left
            if left == 0:
                lru[handle] = None

    def evict_one(self) -> int | None:
        """Evict the LRU head; return the store id still copying out of it (private G2)."""
        handle, _ = self.lru.popitem(last=False)
        ident = self.ident.pop(handle)
        del self.refs[handle]
        self.n_copies -= 1
        assert ident is not None
        copies = self.by_ident[ident]
        copies.remove(handle)
        if not copies:
            del self.by_ident[ident]
            if self.events is not None and ident >= 0:
                self.events.append((REMOVED, ident))
        return self._slot_dep(handle) if self.dep else None

    def take_events(self) -> list[tuple[int, int]]:
        events = self.events
        if not events:
            return []
        self.events = []
        return events

    def check(self) -> None:
        """Invariants (tests): copies within capacity, LRU = cached copies nobody references."""
        assert 0 <= self.n_copies <= self.capacity, (self.n_copies, self.capacity)
        if self.pending is not None:
            assert len(self.free_slots) + self.blank == self.capacity - self.n_copies
        assert len(self.ident) == len(self.refs) == self.n_copies
        idle = {h for h, r in self.refs.items() if r == 0}
        assert idle == set(self.lru), "LRU must hold exactly the unreferenced cached copies"
        for handle in idle:
            assert self.ident[handle] is not None, "an unreferenced private block must be freed"
        cached = sum(len(c) for c in self.by_ident.values())
        assert cached == sum(1 for i in self.ident.values() if i is not None)
