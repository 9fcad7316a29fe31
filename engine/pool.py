"""One rank's G1 block pool: fixed capacity, prefix cache by block identity, LRU eviction.

A physical block ("copy", a small int handle; freed handles are reused) is private (being
filled, or never full) or cached under an identity with a reference count. A cached copy nobody
references sits in the inactive LRU (head = evicted first). Allocation takes free capacity
first, then evicts LRU heads. Duplicate copies of one identity are allowed; lookups use the
oldest. Releases go tail-first, so a sequence's suffix blocks are evicted before
its prefix (checked against the reference).

Router-visible events (prompt identities only; output identities never match another request):
`Stored` when an identity gets its first cached copy on the rank, `Removed` when its last copy is
evicted. They are buffered in `events` when a KV router consumes them.
"""

from __future__ import annotations

STORED = 1
REMOVED = 0
_LRU = 0  # index of the LRU list's sentinel in `older`/`newer`; handles start at 1


class EventLog:
    """The router-visible KV events a rank's cache buffers (`events`; None: no KV router reads
    the rank): the block pool's and SGLang's radix cache's."""

    __slots__ = ("events",)

    def __init__(self, record_events: bool) -> None:
        self.events: list[tuple[int, int]] | None = [] if record_events else None

    def take_events(self) -> list[tuple[int, int]]:
        """The events since the last call."""
        events = self.events
        if not events:
            return []
        self.events = []
        return events


class BlockPool(EventLog):
    __slots__ = ("blank", "by_ident", "capacity", "dep", "free_handles", "free_slots",
                 "ident", "idle", "later_copies", "n_copies", "newer", "older", "pending", "refs")

    def __init__(self, capacity: int, record_events: bool) -> None:
        super().__init__(record_events)
        self.capacity = capacity
        self.n_copies = 0
        # Per handle: the cached identity (None: private, or free) and the reference count.
        # Handles are minted as needed (index 0 is the LRU sentinel), so memory follows the
        # blocks in use, not the capacity; freed ones are reused from a stack.
        self.ident: list[int | None] = [None]
        self.refs: list[int] = [0]
        self.free_handles: list[int] = []
        # Cached copies by identity: the oldest (the one lookups use), and the later
        # duplicates in registration order when there are any.
        self.by_ident: dict[int, int] = {}
        self.later_copies: dict[int, list[int]] = {}
        # The inactive LRU: a doubly linked list through `older`/`newer` (indexed by handle),
        # closed by the sentinel _LRU: newer[_LRU] is the head (evicted first), older[_LRU]
        # the tail. `idle` counts its members.
        self.older = [_LRU]
        self.newer = [_LRU]
        self.idle = 0
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
        return self.n_copies - self.idle

    def lookup(self, block_ids: list[int], limit: int) -> tuple[int, int]:
        """Longest cached prefix of block_ids[:limit]: (hit blocks, of which active)."""
        by_ident = self.by_ident
        refs = self.refs
        hits = active = 0
        for ident in block_ids[:limit]:
            handle = by_ident.get(ident)
            if handle is None:
                break
            hits += 1
            if refs[handle] > 0:
                active += 1
        return hits, active

    def can_allocate(self, fresh: int, hit_ids: list[int]) -> bool:
        """Whether `fresh` new blocks fit once the hit copies are pinned (no longer evictable)."""
        short = fresh - (self.capacity - self.n_copies)
        if short <= 0:
            return True
        by_ident = self.by_ident
        refs = self.refs
        # A cached copy nobody references is in the LRU.
        inactive_hits = sum(1 for ident in hit_ids if refs[by_ident[ident]] == 0)
        return short <= self.idle - inactive_hits

    # -- mutations -----------------------------------------------------------------------------

    def make_room(self, count: int) -> bool:
        """Reserve `count` blocks of free capacity, evicting LRU heads now (an MTP step's
        reservation: what it does not use stays free); False when they do not fit."""
        if not self.can_allocate(count, []):
            return False
        short = count - (self.capacity - self.n_copies)
        if short > 0:
            self._evict(short)
        return True

    def acquire_hits(self, hit_ids: list[int], into: list[int]) -> None:
        """Reference the first copy of each hit identity (in order), appending handles to `into`."""
        by_ident = self.by_ident
        refs = self.refs
        older = self.older
        newer = self.newer
        for ident in hit_ids:
            handle = by_ident[ident]
            if refs[handle] == 0:  # out of the LRU
                before, after = older[handle], newer[handle]
                newer[before] = after
                older[after] = before
                self.idle -= 1
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
        refs = self.refs
        handles = self.free_handles
        for _ in range(fresh):
            if handles:
                handle = handles.pop()
                refs[handle] = 1
            else:
                handle = self._mint()
            into.append(handle)
        self.n_copies += fresh

    def _mint(self) -> int:
        """A new handle, referenced once (no freed handle is left to reuse)."""
        handle = len(self.refs)
        self.refs.append(1)
        self.ident.append(None)
        self.older.append(_LRU)
        self.newer.append(_LRU)
        return handle

    def _evict(self, count: int) -> None:
        """evict_one() `count` times (no G2 copy tracking: the pool has no pending copies)."""
        ident_of = self.ident
        by_ident = self.by_ident
        events = self.events
        free = self.free_handles
        older = self.older
        newer = self.newer
        later = self.later_copies
        handle = _LRU
        for _ in range(count):
            handle = newer[handle]  # the next LRU head
            ident = ident_of[handle]
            ident_of[handle] = None
            free.append(handle)
            assert ident is not None
            if later and ident in later:
                self._drop_copy(handle, ident)
            else:
                del by_ident[ident]
                if events is not None and ident >= 0:
                    events.append((REMOVED, ident))
        head = newer[handle]  # unlink the evicted run at once
        newer[_LRU] = head
        older[head] = _LRU
        self.idle -= count
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
            if self.free_handles:
                handle = self.free_handles.pop()
                self.refs[handle] = 1
            else:
                handle = self._mint()
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
        if ident not in self.by_ident:
            self.by_ident[ident] = handle
            if self.events is not None and ident >= 0:
                self.events.append((STORED, ident))
        else:
            self.later_copies.setdefault(ident, []).append(handle)

    def unregister(self, handle: int) -> None:
        """A referenced cached block leaves the prefix cache and turns private (a hybrid
        rank's working state, before it is written past its published checkpoint)."""
        ident = self.ident[handle]
        assert ident is not None and self.refs[handle] > 0
        self.ident[handle] = None
        if ident in self.later_copies:
            self._drop_copy(handle, ident)
        else:
            del self.by_ident[ident]

    def discard_idle(self, handle: int, ident: int) -> None:
        """Free a cached block nobody references if it is still cached under `ident` (a
        hybrid rank's superseded checkpoint; one evicted since is left alone)."""
        if self.ident[handle] != ident or self.refs[handle] != 0:
            return
        before, after = self.older[handle], self.newer[handle]
        self.newer[before] = after
        self.older[after] = before
        self.idle -= 1
        self.ident[handle] = None
        if ident in self.later_copies:
            self._drop_copy(handle, ident)
        else:
            del self.by_ident[ident]
        self.free_handles.append(handle)
        self.n_copies -= 1

    def _drop_copy(self, handle: int, ident: int) -> None:
        """Forget one of several cached copies of `ident` (the next oldest becomes the first)."""
        later = self.later_copies[ident]
        if self.by_ident[ident] == handle:
            self.by_ident[ident] = later.pop(0)
        else:
            later.remove(handle)
        if not later:
            del self.later_copies[ident]

    def release(self, handles: list[int]) -> None:
        """Drop one reference to each block, tail first: private blocks free, cached ones idle."""
        ident = self.ident
        refs = self.refs
        older = self.older
        newer = self.newer
        for handle in reversed(handles):
            if ident[handle] is None:
                left = refs[handle] - 1
                refs[handle] = left
                if left:
                    continue
                self.free_handles.append(handle)
                self.n_copies -= 1
                if self.pending is not None:
                    self.free_slots.append(self._slot_dep(handle))
                continue
            left = refs[handle] - 1
            refs[handle] = left
            if left == 0:  # to the LRU tail
                tail = older[_LRU]
                newer[tail] = handle
                older[handle] = tail
                newer[handle] = _LRU
                older[_LRU] = handle
                self.idle += 1

    def evict_one(self) -> int | None:
        """Evict the LRU head; return the store id still copying out of it (private G2)."""
        handle = self.newer[_LRU]  # the LRU head
        head = self.newer[handle]
        self.newer[_LRU] = head
        self.older[head] = _LRU
        self.idle -= 1
        ident = self.ident[handle]
        self.ident[handle] = None
        self.free_handles.append(handle)
        self.n_copies -= 1
        assert ident is not None
        if ident in self.later_copies:
            self._drop_copy(handle, ident)
        else:
            del self.by_ident[ident]
            if self.events is not None and ident >= 0:
                self.events.append((REMOVED, ident))
        return self._slot_dep(handle) if self.dep else None

    def check(self) -> None:
        """Invariants (tests): copies within capacity, LRU = cached copies nobody references."""
        assert 0 <= self.n_copies <= self.capacity, (self.n_copies, self.capacity)
        if self.pending is not None:
            assert len(self.free_slots) + self.blank == self.capacity - self.n_copies
        minted = len(self.refs)
        assert len(self.ident) == len(self.older) == len(self.newer) == minted
        free = set(self.free_handles)
        assert len(free) == len(self.free_handles) == minted - 1 - self.n_copies
        assert _LRU not in free and all(0 < h < minted for h in free)
        assert all(self.refs[h] == 0 and self.ident[h] is None for h in free), "free but in use"
        live = [h for h in range(1, minted) if h not in free]
        idle = {h for h in live if self.refs[h] == 0}
        lru = []
        handle = self.newer[_LRU]
        while handle != _LRU:
            assert self.older[self.newer[handle]] == handle, "LRU links broken"
            lru.append(handle)
            handle = self.newer[handle]
        assert len(lru) == self.idle and len(set(lru)) == len(lru), "LRU length"
        assert idle == set(lru), "LRU must hold exactly the unreferenced cached copies"
        for handle in idle:
            assert self.ident[handle] is not None, "an unreferenced private block must be freed"
        copies = {i: [first, *self.later_copies.get(i, ())] for i, first in self.by_ident.items()}
        assert set(self.later_copies) <= set(copies)
        assert all(self.later_copies.values()), "an empty duplicate list"
        cached = sum(len(c) for c in copies.values())
        assert cached == sum(1 for h in live if self.ident[h] is not None)
        assert all(h not in free and self.ident[h] == i for i, c in copies.items() for h in c)
