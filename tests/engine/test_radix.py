"""SGLang's radix-tree prefix cache (engine/radix.py): matching, locks, inserts and eviction keep
the tree's page counts and evictable-leaf index consistent, and eviction takes the oldest
unlocked leaf first, newest pages first."""

from __future__ import annotations

import random

from kvreplay.engine.radix import RadixCache


def store(cache: RadixCache, chain: list[int]) -> int:
    """A request computes `chain`'s pages (taking free ones) and caches them, as a finished
    SGLang request does; returns how many were new to the tree."""
    matched, node = cache.match(chain, len(chain), lock=True)
    fresh = len(chain) - matched
    if fresh > cache.free:
        cache.evict((fresh - cache.free) * cache.page_size)
    fresh = min(fresh, cache.free)
    cache.free -= fresh
    _, adopted = cache.insert(node, chain[matched:matched + fresh])
    cache.free += fresh - adopted
    cache.dec_lock(node)
    return adopted


def test_random_operations_keep_the_invariants() -> None:
    """Shared prefixes, splits inside edges, locks held across evictions: the counts add up."""
    rng = random.Random(7)
    cache = RadixCache(64, 4, record_events=False)
    held = []
    for _ in range(2000):
        prefix = rng.choice([[1], [1, 2], [3], []])
        chain = prefix + [rng.randrange(100, 130) for _ in range(rng.randrange(1, 6))]
        # Chained identities: a page's identity names its whole prefix.
        chain = [hash(tuple(chain[:k + 1])) & 0xFFFFFF for k in range(len(chain))]
        action = rng.random()
        if action < 0.5:
            store(cache, chain)
        elif action < 0.7:
            _, node = cache.match(chain, rng.randrange(len(chain) + 1), lock=True)
            held.append(node)
        elif action < 0.85 and held:
            cache.dec_lock(held.pop(rng.randrange(len(held))))
        else:
            cache.evict(rng.randrange(1, 20))
        cache.check()
    for node in held:
        cache.dec_lock(node)
    cache.check()
    assert cache.protected == 0
    cache.evict(10**6)
    cache.check()
    assert cache.free == cache.total and cache.evictable == 0


def test_eviction_takes_the_oldest_leaf_tail_first() -> None:
    """Two leaves: the older loses its newest pages first; a locked path is never evicted."""
    cache = RadixCache(6, 1, record_events=False)
    assert store(cache, [10, 11, 12]) == 3
    assert store(cache, [20, 21, 22]) == 3
    cache.evict(2)
    assert cache.peek([10, 11, 12], 3) == 1  # the older leaf kept its first page
    assert cache.peek([20, 21, 22], 3) == 3
    _, node = cache.match([20, 21, 22], 3, lock=True)
    cache.evict(10)
    assert cache.peek([10, 11, 12], 3) == 0
    assert cache.peek([20, 21, 22], 3) == 3  # locked
    cache.dec_lock(node)
    cache.check()
    assert cache.free == 3 and cache.evictable == 3
