"""Hybrid KV cache (models with state layers): each running request's recurrent state.

As the reference (ai-dynamo 1.6.1's state cache, vLLM aggregated ranks, G1 only): a state takes
ceil(bytes_per_request / block bytes) blocks of the rank's pool beside the request's token
blocks, allocated with its first token blocks (a request is admitted only when both fit) and
released with them (finish, preemption, rejection).

With prefix caching, a pass that leaves a request's computed tokens on a block boundary
publishes its working state as that prefix's checkpoint (cached under one key per state block,
costing no capacity). Before the request's state is written again, the checkpoint is preserved:
new blocks take its keys (the request owns them until its next computation, then they sit in
the LRU as any cached block) and the working copy turns private. At the next boundary the older
checkpoint is dropped if nobody uses it. A prompt hit ends at the longest cached token prefix
whose boundary has a checkpoint (not one published in this pass); the request restores into a
new working state of its own. A finished request's published state stays a reclaimable
checkpoint; a preempted one's checkpoint of the retracted pass is dropped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvreplay.engine.pool import BlockPool
from kvreplay.schema.spec import Role

if TYPE_CHECKING:
    from kvreplay.engine.identity import BlockIdentities
    from kvreplay.engine.sequence import Seq


def state_blocks(role: Role) -> int:
    """Blocks one working state takes on the role's ranks (0: no state cache)."""
    cache = role.state_cache
    if cache is None or cache.bytes_per_request is None:
        return 0
    block_bytes = role.host_block_bytes
    assert block_bytes is not None  # HYBRID-STATE-CAPACITY: a state cache needs the KV size
    return -(-cache.bytes_per_request // block_bytes)


class StateRequest:
    """One request's state: its working blocks, the tokens they hold, its latest checkpoint."""

    __slots__ = ("computed", "previous", "previous_step", "slot", "snapshot", "snapshot_key",
                 "snapshot_owned", "snapshot_stamps", "snapshot_step", "working")

    def __init__(self, working: list[int], computed: int) -> None:
        self.working = working
        self.computed = computed
        self.snapshot: list[int] = []  # the checkpoint's blocks (aliases working unless owned)
        # The stamps its blocks got when they took the checkpoint's keys: a block evicted and
        # taken again (even under the same keys, by another request) is another copy.
        self.snapshot_stamps: list[int] = []
        self.snapshot_key: int | None = None  # the boundary block's identity
        self.snapshot_step = -1
        self.snapshot_owned = False
        # Aligned states (a match unit): the block slot the working state is written in, and
        # the blocks it left (or the checkpoint it was restored from), held until the
        # request's next allocation in a later pass.
        self.slot = -1
        self.previous: list[int] = []
        self.previous_step = -1


class WorkingStates:
    """The states of one rank's requests (by request), in its block pool."""

    __slots__ = ("align", "blocks", "checkpoints", "copies", "held", "identities", "keys",
                 "pool", "published", "stamp", "stamps", "step")

    def __init__(self, pool: BlockPool, blocks: int, checkpoints: bool,
                 identities: BlockIdentities, align: int = 0) -> None:
        self.pool = pool
        self.blocks = blocks
        self.checkpoints = checkpoints  # prefix caching: states are published and reused
        # A match unit under prefix caching (the block size, the only one executed): states
        # are aligned to block slots (module docstring of align_end).
        self.align = align
        self.copies: list[tuple[object, int]] = []  # this pass's checkpoint copies, in order
        self.identities = identities
        self.held: dict[object, StateRequest] = {}
        # A checkpoint's cache keys, one per state block, by its boundary block's identity.
        self.keys: dict[int, list[int]] = {}
        self.published: set[int] = set()  # boundaries published in this pass
        self.step = 0
        # Each block's stamp when it last took a checkpoint's key (the reference's copy ids
        # carry a generation, so a stale one never reaches a later copy in the same block).
        self.stamps: dict[int, int] = {}
        self.stamp = 0

    def begin_step(self) -> None:
        if self.copies:
            pool = self.pool
            for _seq, handle in self.copies:
                pool.release([handle])
            self.copies = []
        self.published.clear()
        self.step += 1

    def active_source(self, boundary: int) -> int:
        """Aligned states: the blocks of this checkpoint in use (a restore admitted while its
        source is held pins nothing more; checked against the reference)."""
        if not self.align:
            return 0
        refs, by_ident = self.pool.refs, self.pool.by_ident
        return sum(1 for key in self.keys[boundary] if refs[by_ident[key]] > 0)

    def release_previous(self, seq: object) -> None:
        """Aligned states: the request allocates in a later pass than the one that left its
        previous slot (or restored it): those blocks go back to the pool."""
        state = self.held.get(seq)
        if state is not None and state.previous and state.previous_step < self.step:
            self.pool.release(state.previous)
            state.previous = []

    def _keys(self, boundary: int) -> list[int]:
        keys = self.keys.get(boundary)
        if keys is None:
            keys = self.keys[boundary] = [self.identities.fresh() for _ in range(self.blocks)]
        return keys

    # -- lookups -------------------------------------------------------------------------------

    def has_snapshot(self, boundary: int) -> bool:
        """A whole checkpoint of this boundary is cached (and was not published this pass)."""
        keys = self.keys.get(boundary)
        if keys is None or boundary in self.published:
            return False
        by_ident = self.pool.by_ident
        return all(key in by_ident for key in keys)

    def restorable(self, block_ids: list[int], hits: int) -> int:
        """The longest prefix of `hits` cached token blocks whose boundary has a checkpoint."""
        for b in range(hits, 0, -1):
            if self.has_snapshot(block_ids[b - 1]):
                return b
        return 0

    def checkpoint_copies(self, boundary: int) -> list[int]:
        by_ident = self.pool.by_ident
        return [by_ident[key] for key in self.keys[boundary]]

    # -- capacity ------------------------------------------------------------------------------

    def needs(self, seq: object, target: int) -> int:
        """Blocks computing `seq` through `target` tokens takes beyond its token blocks: a new
        working state, or a copy preserving its published checkpoint before the write."""
        state = self.held.get(seq)
        if state is None:
            return self.blocks
        return self.write_blocks(state, target)

    def write_blocks(self, state: StateRequest, target: int) -> int:
        if self.align:
            if target <= state.computed or not state.working:
                return 0
            if (target - 1) // self.align != state.slot or not self._private(state.working):
                return self.blocks
            return 0
        if target > state.computed and state.working and not self._private(state.working):
            return self.blocks
        return 0

    def _private(self, handles: list[int]) -> bool:
        ident = self.pool.ident
        return all(ident[h] is None for h in handles)

    def stretchable(self, running: list[Seq]) -> bool:
        """Pure decode passes may be fast-forwarded (worker.py): no running request's state
        waits for the copy preserving its checkpoint (the passes inside a block before the
        boundary change no state but its computed count, which the next general pass sets)."""
        if not self.checkpoints:
            return True
        if self.align:  # slots move and held blocks go back pass by pass
            return False
        ident = self.pool.ident
        held = self.held
        for seq in running:
            state = held.get(seq)
            if state is not None and any(ident[h] is not None for h in state.working):
                return False
        return True

    # -- mutations -----------------------------------------------------------------------------

    def take(self, seq: object, restored: int, target: int, source: list[int]) -> None:
        """Allocate seq's working state, holding `restored` tokens (the caller checked the pool
        can hold it); `source`: the checkpoint it restores (pinned by the caller), which an
        aligned state holds until its next allocation."""
        handles: list[int] = []
        self.pool.allocate(self.blocks, handles)
        state = self.held[seq] = StateRequest(handles, restored)
        if self.align:
            state.slot = (target - 1) // self.align
            if source:
                state.previous = source
                state.previous_step = self.step
                return
        self.pool.release(source)

    def prepare_write(self, seq: object, target: int) -> None:
        """Preserve a published checkpoint before the state is written past it (the caller
        checked the pool can hold the copy)."""
        state = self.held[seq]
        if not self.write_blocks(state, target):
            return
        if self.align:
            self._prepare_aligned(seq, state, target)
            return
        self._copy_checkpoint(state)
        state.snapshot_owned = True

    def _copy_checkpoint(self, state: StateRequest) -> list[int]:
        """Move the published checkpoint's keys from the working blocks to fresh copies."""
        key = state.snapshot_key
        assert key is not None
        pool = self.pool
        copy: list[int] = []
        pool.allocate(self.blocks, copy)
        for handle, ident in zip(copy, self._keys(key), strict=True):
            pool.register(handle, ident)
        for handle in state.working:
            pool.unregister(handle)
        state.snapshot = copy
        state.snapshot_stamps = self._stamp(copy)
        state.snapshot_step = self.step
        self.published.add(key)
        return copy

    def _prepare_aligned(self, seq: object, state: StateRequest, target: int) -> None:
        """A write into a new slot moves the state to new blocks (the old ones held until the
        request's next allocation); one into its slot after a checkpoint was published there
        first copies the checkpoint (held until the next pass, then cached)."""
        pool = self.pool
        slot = (target - 1) // self.align
        if slot != state.slot:
            fresh: list[int] = []
            pool.allocate(self.blocks, fresh)
            state.previous.extend(state.working)
            state.previous_step = self.step
            state.working = fresh
            state.slot = slot
            return
        self.copies.extend((seq, handle) for handle in self._copy_checkpoint(state))

    def commit(self, seq: object, computed: int, boundary: int | None) -> None:
        """The pass computes seq's state through `computed` tokens; `boundary`: the identity of
        the block it completes when `computed` is on a block boundary (prefix caching)."""
        state = self.held.get(seq)
        if state is None or computed <= state.computed:
            return
        pool = self.pool
        if self.align:  # older checkpoints stay cached
            state.computed = computed
            if boundary is not None:
                self._publish(state, boundary)
            return
        if state.snapshot_owned:
            for handle in state.snapshot:
                pool.release([handle])
            state.snapshot_owned = False
        state.computed = computed
        if boundary is None:
            return
        self._discard(state.snapshot, state.snapshot_stamps, state.snapshot_key)
        self._publish(state, boundary)

    def _publish(self, state: StateRequest, boundary: int) -> None:
        pool = self.pool
        for handle, ident in zip(state.working, self._keys(boundary), strict=True):
            pool.register(handle, ident)
        state.snapshot = list(state.working)
        state.snapshot_stamps = self._stamp(state.working)
        state.snapshot_key = boundary
        state.snapshot_step = self.step
        self.published.add(boundary)

    def preempt(self, seq: object) -> None:
        state = self.held.get(seq)
        if state is None:
            return
        pending = list(state.snapshot) if state.snapshot_step == self.step else []
        self.release(seq)
        self._discard(pending, state.snapshot_stamps, state.snapshot_key)

    def _stamp(self, handles: list[int]) -> list[int]:
        out = []
        stamps = self.stamps
        for handle in handles:
            self.stamp += 1
            stamps[handle] = self.stamp
            out.append(self.stamp)
        return out

    def _discard(self, handles: list[int], stamps: list[int], boundary: int | None) -> None:
        """Drop a checkpoint's copies that are still cached under its keys and unused (a
        block that took a key again since holds another copy: left alone)."""
        if not handles or boundary is None:
            return
        current = self.stamps
        for handle, stamp, ident in zip(handles, stamps, self.keys[boundary], strict=True):
            if current.get(handle) == stamp:
                self.pool.discard_idle(handle, ident)

    def release(self, seq: object) -> None:
        state = self.held.pop(seq, None)
        if state is None:
            return
        pool = self.pool
        if state.previous:
            pool.release(state.previous)
        if self.copies:
            mine = [h for s, h in self.copies if s is seq]
            if mine:
                self.copies = [(s, h) for s, h in self.copies if s is not seq]
                pool.release(mine)
        if state.snapshot_owned:
            for handle in state.snapshot:
                pool.release([handle])
        for handle in state.working:
            pool.release([handle])
