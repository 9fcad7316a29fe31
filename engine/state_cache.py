"""Hybrid KV cache (models with state layers): each running request's working recurrent state.

As the reference (ai-dynamo 1.6.1's state cache, vLLM aggregated ranks, G1 only): a state takes
ceil(bytes_per_request / block bytes) blocks of the rank's pool beside the request's token
blocks, allocated with its first token blocks (a request is admitted only when both fit) and
released with them (finish, preemption, rejection). Executed without prefix caching, where a
state is never published as a checkpoint (engine/capabilities.py refuses the rest by name).
"""

from __future__ import annotations

from kvreplay.engine.pool import BlockPool
from kvreplay.schema.spec import Role


def state_blocks(role: Role) -> int:
    """Blocks one working state takes on the role's ranks (0: no state cache)."""
    cache = role.state_cache
    if cache is None or cache.bytes_per_request is None:
        return 0
    block_bytes = role.host_block_bytes
    assert block_bytes is not None  # HYBRID-STATE-CAPACITY: a state cache needs the KV size
    return -(-cache.bytes_per_request // block_bytes)


class WorkingStates:
    """The working states of one rank's requests (by request), in its block pool."""

    __slots__ = ("blocks", "held", "pool")

    def __init__(self, pool: BlockPool, blocks: int) -> None:
        self.pool = pool
        self.blocks = blocks
        self.held: dict[object, list[int]] = {}

    def needs(self, seq: object) -> int:
        """Blocks an allocation for `seq` takes beyond its token blocks (its state, if new)."""
        return 0 if seq in self.held else self.blocks

    def take(self, seq: object) -> None:
        """Allocate seq's working state (the caller checked the pool can hold it)."""
        if seq not in self.held:
            handles: list[int] = []
            self.pool.allocate(self.blocks, handles)
            self.held[seq] = handles

    def release(self, seq: object) -> None:
        handles = self.held.pop(seq, None)
        if handles is not None:
            self.pool.release(handles)
