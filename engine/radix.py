"""SGLang's radix-tree prefix cache, as the reference models it (engine.md section "SGLang").

Pages of `page_size` tokens (the rank's block size) are the unit of capacity, matching and
eviction. An edge holds a run of pages (their chained identities, as the whole engine keys full
blocks: equal exactly when the token prefixes are), children are keyed by their first page.
A match walks from the root and splits an edge where the match ends inside it (the capped
matches of admission split too); it stamps every node it fully traverses with one access time,
and the match-and-lock form locks the node where it ended and all its ancestors. An insert
stamps the path from its start node to the root, extends an unlocked leaf (or the start node
when only its inserter holds it) in place, else creates a child with a fresh time; pages that
found an existing node are the inserter's duplicates (the caller frees them). Eviction takes
unlocked leaves oldest access first; a leaf with more pages than needed loses only its newest
tail pages (it keeps its time), a leaf that goes whole may leave its parent an evictable leaf.
Access times are a counter ticking at each of the reference's clock reads (its wall-clock
Instants order the same way).

Router-visible events (`events`, when a KV router reads this rank): a page publishes its
identity when it becomes complete while a request owns it, and withdraws it when it is freed
(evicted, a duplicate dropped, a partial or retracted suffix released); STORED/REMOVED go out
when the count of live pages of an identity moves 0 -> 1 / 1 -> 0, as the reference's block-hash
reference counts do. Only identities >= 0 are published (generated-token pages can match no
other request, as in the vLLM pool).

Costs: a match or insert walks the path's nodes and compares an edge by binary search (chained
identities make "equal at i" imply "equal before i"), eviction pops a heap of (time, node)
entries (stale ones skipped, the heap rebuilt when it outgrows the live leaves), so the cost of
a request does not grow with the cache size.
"""

from __future__ import annotations

from heapq import heapify, heappop, heappush

from kvreplay.engine.pool import REMOVED, STORED, EventLog


class Node:
    """One edge of the tree: its pages' identities, lock count and last access time."""

    __slots__ = ("children", "key", "live", "lock", "order", "parent", "queued", "time")

    def __init__(self, parent: Node | None, key: list[int], time: int, order: int) -> None:
        self.parent = parent
        self.key = key
        self.children: dict[int, Node] = {}
        self.lock = 0
        self.time = time
        self.order = order  # creation order: a deterministic tie-break of equal times
        self.queued = -1  # the time of this node's live heap entry (-1: none)
        self.live = True

    def __repr__(self) -> str:
        return f"Node({len(self.key)} pages, lock={self.lock}, t={self.time})"


def common_length(key: list[int], chain: list[int], start: int, limit: int) -> int:
    """How many leading pages of `key` equal chain[start:limit] (key[0] == chain[start])."""
    n = len(key)
    room = limit - start
    if room < n:
        n = room
    if key[n - 1] == chain[start + n - 1]:
        return n
    lo, hi = 1, n - 1  # key[lo - 1] matches, key[hi] does not
    while lo < hi:
        mid = (lo + hi) // 2
        if key[mid] == chain[start + mid]:
            lo = mid + 1
        else:
            hi = mid
    return lo


class RadixCache(EventLog):
    """The tree, the page pool it draws from, and the evictable-leaf index."""

    __slots__ = (
        "_clock",
        "_heap",
        "_nodes",
        "_order",
        "evictable",
        "free",
        "page_size",
        "protected",
        "refs",
        "root",
        "total",
    )

    def __init__(self, total_pages: int, page_size: int, record_events: bool) -> None:
        super().__init__(record_events)
        self.page_size = page_size
        self.total = total_pages
        self.free = total_pages  # pages in no node and held by no request
        self.evictable = 0  # pages in unlocked nodes
        self.protected = 0  # pages in locked nodes
        self._clock = 0
        self._order = 0
        self.root = Node(None, [], 0, 0)
        self._heap: list[tuple[int, int, Node]] = []
        self._nodes = 1
        self.refs: dict[int, int] = {}  # identity -> live pages holding it (events only)

    def now(self) -> int:
        self._clock += 1
        return self._clock

    # -- matching ------------------------------------------------------------------------------

    def peek(self, chain: list[int], limit: int) -> int:
        """Pages of chain[:limit] the tree holds (read-only: no split, no access)."""
        node = self.root
        p = 0
        while p < limit:
            child = node.children.get(chain[p])
            if child is None:
                break
            n = common_length(child.key, chain, p, limit)
            p += n
            if n < len(child.key):
                break
            node = child
        return p

    def match(self, chain: list[int], limit: int, lock: bool) -> tuple[int, Node]:
        """Match chain[:limit] (splitting an edge it ends inside), stamp the nodes it fully
        traverses; `lock`: lock where it ended. Returns (pages matched, that node)."""
        now = self.now()
        root = self.root
        root.time = now
        node = root
        p = 0
        pending: Node | None = None
        while p < limit:
            child = node.children.get(chain[p])
            if child is None:
                break
            if pending is not None:
                self._touch(pending, now)
                pending = None
            n = common_length(child.key, chain, p, limit)
            p += n
            if n < len(child.key):
                node = self._split(child, n)
                break
            node = child
            pending = child
        if pending is not None:
            pending.time = now
            if not lock:
                self._index(pending)
        if lock:
            self.inc_lock(node)
        return p, node

    # -- locks ---------------------------------------------------------------------------------

    def inc_lock(self, node: Node) -> None:
        root = self.root
        current: Node | None = node
        while current is not None and current is not root:
            if current.lock == 0:
                pages = len(current.key)
                self.evictable -= pages
                self.protected += pages
            current.lock += 1
            current = current.parent

    def dec_lock(self, node: Node) -> None:
        root = self.root
        current: Node | None = node
        while current is not None and current is not root:
            current.lock -= 1
            if current.lock == 0:
                pages = len(current.key)
                self.protected -= pages
                self.evictable += pages
                if not current.children:
                    self._index(current)
            current = current.parent

    # -- inserting -----------------------------------------------------------------------------

    def insert(self, start: Node, keys: list[int]) -> tuple[Node, int]:
        """Insert `keys` below `start` (the inserter's locked node, or the root); return the
        node they end in and how many of them became new pages of the tree (the rest found
        existing pages: the inserter's copies are duplicates)."""
        if not keys:
            return start, 0
        now = self.now()
        current: Node | None = start
        while current is not None:  # the path from start to the root
            self._touch(current, now)
            current = current.parent
        root = self.root
        node = start
        off = 0
        total = len(keys)
        while off < total:
            if node is not root and not node.children and (
                    node.lock == 0 or (node is start and node.lock == 1)):
                self._extend(node, keys, off, now)
                return node, total - off
            child = node.children.get(keys[off])
            if child is None:
                return self._child(node, keys[off:]), total - off
            n = common_length(child.key, keys, off, total)
            off += n
            if n == len(child.key):
                node = child
                self._touch(child, now)
                continue
            middle = self._split(child, n)
            if off < total:
                return self._child(middle, keys[off:]), total - off
            return middle, 0
        return node, 0

    def _extend(self, node: Node, keys: list[int], off: int, now: int) -> None:
        added = len(keys) - off
        node.key.extend(keys[off:])
        if node.lock == 0:
            self.evictable += added
        else:
            self.protected += added
        node.time = now
        self._index(node)

    def _child(self, parent: Node, keys: list[int]) -> Node:
        self._order += 1
        node = Node(parent, keys, self.now(), self._order)
        parent.children[keys[0]] = node
        self._nodes += 1
        self.evictable += len(keys)
        self._index(node)
        return node

    def _split(self, child: Node, n: int) -> Node:
        """Split child's edge after n pages: the prefix becomes a new node above it, with its
        lock count and time (the suffix keeps the child's identity and heap entry)."""
        parent = child.parent
        assert parent is not None
        self._order += 1
        middle = Node(parent, child.key[:n], child.time, self._order)
        middle.lock = child.lock
        del child.key[:n]
        middle.children[child.key[0]] = child
        child.parent = middle
        parent.children[middle.key[0]] = middle
        self._nodes += 1
        return middle

    # -- access times and the evictable-leaf index ---------------------------------------------

    def _touch(self, node: Node, now: int) -> None:
        node.time = now
        self._index(node)

    def _index(self, node: Node) -> None:
        """Queue an unlocked leaf under its current time (once)."""
        if node.lock == 0 and not node.children and node is not self.root and (
                node.queued != node.time):
            node.queued = node.time
            heap = self._heap
            heappush(heap, (node.time, node.order, node))
            if len(heap) > 2 * self._nodes + 64:
                self._compact()

    def _compact(self) -> None:
        live = [entry for entry in self._heap
                if entry[2].live and entry[2].queued == entry[0] == entry[2].time]
        heapify(live)
        self._heap = live

    # -- eviction ------------------------------------------------------------------------------

    def evict(self, tokens: int) -> None:
        """Free at least `tokens` tokens (whole pages) of unlocked leaves, oldest first, while
        there are any."""
        bs = self.page_size
        heap = self._heap
        left = tokens
        while left > 0 and heap:
            time, _, node = heappop(heap)
            if not node.live or node.time != time or node.queued != time:
                continue  # superseded by a later access, or already evicted
            node.queued = -1
            if node.lock or node.children:
                continue
            pages = len(node.key)
            want = -(-left // bs)
            if want < pages:
                self._free_pages(node.key[pages - want:])
                del node.key[pages - want:]
                self.evictable -= want
                left -= want * bs
                self._index(node)
                continue
            self._free_pages(node.key)
            self.evictable -= pages
            left -= pages * bs
            node.live = False
            self._nodes -= 1
            parent = node.parent
            assert parent is not None
            del parent.children[node.key[0]]
            if parent is not self.root and not parent.children and parent.lock == 0:
                self._index(parent)

    def _free_pages(self, keys: list[int]) -> None:
        self.free += len(keys)
        if self.events is not None:
            for ident in keys:
                self.withdraw(ident)

    # -- pages and events ----------------------------------------------------------------------

    def publish(self, ident: int) -> None:
        """A page holding `ident` became complete (events only)."""
        events = self.events
        if events is None or ident < 0:
            return
        refs = self.refs
        count = refs.get(ident, 0)
        refs[ident] = count + 1
        if count == 0:
            events.append((STORED, ident))

    def withdraw(self, ident: int) -> None:
        """A complete page holding `ident` was freed (events only)."""
        events = self.events
        if events is None or ident < 0:
            return
        refs = self.refs
        count = refs[ident] - 1
        if count:
            refs[ident] = count
        else:
            del refs[ident]
            events.append((REMOVED, ident))

    def check(self) -> None:
        """Invariants (tests): page counts, lock sums, sizes, the evictable index."""
        evictable = protected = nodes = 0
        stack = [self.root]
        while stack:
            node = stack.pop()
            nodes += 1
            for first, child in node.children.items():
                assert child.live and child.parent is node and child.key[0] == first
                assert child.key, "an empty edge"
                assert child.lock <= node.lock or node is self.root, "a child locked more"
                if child.lock:
                    protected += len(child.key)
                else:
                    evictable += len(child.key)
                if not child.lock and not child.children:
                    assert child.queued == child.time, "an evictable leaf outside the index"
                stack.append(child)
        assert (evictable, protected, nodes) == (self.evictable, self.protected, self._nodes)
        assert 0 <= self.free <= self.total - evictable - protected
