"""Hybrid KV with a prefix match unit below the block: pages cached under unit aliases.

As ai-dynamo 1.6.1 (probed; docs/engine.md "Hybrid KV"): a pass that leaves a request's prompt
computed through its last unit boundary inside a block publishes the state there and caches
the block's page under an alias of the tokens it holds up to that boundary (it stays cached
when the block fills later, beside its full-block key). A later prompt sharing those tokens may
hit the prefix through them: it pins the page (charged at admission) until its next allocation
or its end, as the checkpoint it restores, and writes into a private copy of its own (one of its
blocks). The alias is valid while the page
is cached under the key it had when the alias was last seen (evicted and reused: gone).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kvreplay.engine.identity import ROOT

if TYPE_CHECKING:
    from kvreplay.engine.identity import BlockIdentities
    from kvreplay.engine.pool import BlockPool
    from kvreplay.engine.sequence import Seq


class UnitPages:
    """The unit aliases of one rank's pages."""

    __slots__ = ("block_size", "filled_pages", "identities", "offsets", "pool", "unit")

    def __init__(self, pool: BlockPool, identities: BlockIdentities, block_size: int,
                 unit: int) -> None:
        self.pool = pool
        self.identities = identities
        self.block_size = block_size
        self.unit = unit
        # alias -> the pages that filled while cached under it, each with the full key it took
        # (in fill order: the first still cached under its key serves the alias)
        self.filled_pages: dict[int, list[tuple[int, int]]] = {}
        # parent identity -> in-block offsets some alias after it was published at
        self.offsets: dict[int, set[int]] = {}

    def last_unit(self, prompt: int) -> int:
        """The prompt's last unit boundary."""
        return prompt - prompt % self.unit

    def valid(self, alias: int) -> bool:
        """Some page holding the alias's tokens is cached: partial, under the alias itself, or
        full, under the key it took when it filled."""
        pool = self.pool
        if alias in pool.by_ident:
            return True
        return self._filled_key(alias) is not None

    def _filled_key(self, alias: int) -> int | None:
        """The full key of the first page that filled under the alias and is still cached
        under it (None: none is)."""
        pages = self.filled_pages.get(alias)
        if not pages:
            return None
        ident = self.pool.ident
        for page, key in pages:
            if ident[page] == key:
                return key
        return None

    def publish(self, seq: Seq, end: int) -> int:
        """Cache seq's page holding token `end` - 1 under the alias of its tokens through
        `end` (inside the block; one more copy when another page holds them already); return
        the alias (the checkpoint's boundary key)."""
        bs = self.block_size
        index = end // bs
        parent = seq.block_ids[index - 1] if index else ROOT
        alias = self.identities.unit_key(seq.req.prompt, index * bs, end - index * bs, parent,
                                         True)
        assert alias is not None  # the prompt holds its own tokens
        page = seq.blocks[index]
        if self.pool.ident[page] is None:
            self.pool.register(page, alias)
        self.offsets.setdefault(parent, set()).add(end - index * bs)
        return alias

    def filled(self, page: int, ident: int) -> None:
        """A page cached under its alias became a full block (`ident`): the alias follows it
        too, after any page still cached under the alias or an earlier full one (every copy
        holding the tokens serves the alias while it is cached: match-unit seed 2285, a
        finished request's page evicted while a running one's filled copy holds them)."""
        pool = self.pool
        alias = pool.ident[page]
        assert alias is not None
        pool.unregister(page)
        pages = self.filled_pages.setdefault(alias, [])
        ident_of = pool.ident
        pages[:] = [(p, k) for p, k in pages if ident_of[p] == k]
        pages.append((page, ident))

    def hit(self, seq: Seq, start_block: int, cap: int,
            has_snapshot: Callable[[int], bool]) -> int:
        """The longest unit boundary inside block `start_block` (its leading blocks cached),
        at most `cap` tokens, whose alias is valid and whose checkpoint `has_snapshot` (0:
        none)."""
        bs = self.block_size
        parent = seq.block_ids[start_block - 1] if start_block else ROOT
        offsets = self.offsets.get(parent)
        if not offsets:
            return 0
        start = start_block * bs
        for offset in sorted(offsets, reverse=True):
            end = start + offset
            if end > cap:
                continue
            alias = self.identities.unit_key(seq.req.prompt, start, offset, parent, False)
            if alias is not None and self.valid(alias) and has_snapshot(alias):
                return end
        return 0

    def alias_of(self, seq: Seq, end: int) -> int:
        """The alias a hit through `end` (inside a block) found."""
        bs = self.block_size
        index = end // bs
        parent = seq.block_ids[index - 1] if index else ROOT
        alias = self.identities.unit_key(seq.req.prompt, index * bs, end - index * bs, parent,
                                         False)
        assert alias is not None
        return alias

    def page_key(self, alias: int) -> int:
        """The key the page of a valid alias is cached under (any copy of it serves)."""
        if alias in self.pool.by_ident:
            return alias
        key = self._filled_key(alias)
        assert key is not None
        return key

    def page_active(self, alias: int) -> bool:
        pool = self.pool
        return pool.refs[pool.by_ident[self.page_key(alias)]] > 0
