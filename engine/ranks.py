"""The scheduler seam: what the worker, the loop, the P/D handoff and the router need of one
DP rank's scheduler, and the factory that builds the backend's own (engine.md section "One rank").

vLLM ranks are `scheduler.Rank`; TensorRT-LLM ranks are `trtllm.TrtllmRank`, the same
vLLM-shaped core under the capacity policy the reference runs (GUARANTEED_NO_EVICT); SGLang ranks
are `sglang.SglangRank`, the reference's SGLang scheduler over a radix-tree prefix cache
(`radix.RadixCache`). A worker fast-forwards vLLM-shaped ranks itself (worker.py); a
`StretchRank` says how many upcoming passes are pure decode passes (`stretch_passes`) and
applies a stretch's state (`advance_stretch`). Ranks of one worker may share a `PassGroup`:
the worker calls `begin()` before each pass and `end(passes)` after a pass or a stretch
(SGLang's prefill/decode interval is one countdown per worker).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from kvreplay.engine.identity import BlockIdentities
from kvreplay.engine.scheduler import PassOutcome, Rank, RankStats
from kvreplay.engine.sequence import Seq
from kvreplay.engine.timing import PassTimer
from kvreplay.schema.spec import Role

if TYPE_CHECKING:
    from kvreplay.engine.host_client import HostClient
    from kvreplay.engine.speculation import MtpSampler


class PassGroup(Protocol):
    """State the ranks of one worker share across a pass."""

    def begin(self, now_ns: int) -> None:
        """Before the worker's ranks form a pass at now_ns."""
        ...

    def end(self, passes: int) -> None:
        """After an effective pass (1) or a fast-forwarded stretch of `passes` passes."""
        ...

    def retry(self) -> bool:
        """The pass just formed moved nothing: whether to form it again at once (its state
        advanced)."""
        ...

    def drained(self, at_ns: int) -> None:
        """A pass ended at at_ns with nothing left on the worker's ranks."""
        ...


class RankScheduler(Protocol):
    """One (worker, DP rank)'s scheduler, as the rest of the engine sees it."""

    pool_name: str
    worker_id: int
    dp_rank: int
    scheduler_id: int
    block_size: int
    num_blocks: int
    budget: int  # max_num_batched_tokens (the router queue's busy test reads it)
    max_seqs: int
    max_model_len: int | None
    chunked: bool
    caching: bool
    timer: PassTimer
    stats: RankStats
    running: list[Seq]
    waiting: deque[Seq]
    pending: deque[Seq]  # P/D decode: destinations waiting for blocks
    connector: list[Seq]  # G2 connector waiters (vLLM only; empty elsewhere)
    host: HostClient | None
    compute_not_before: int
    capacity_gen: int
    next_order: int
    retry_due: bool
    is_prefill: bool
    is_decode: bool
    # Scaling (scaling_metrics.py, fleet.py): the pass's captured forward-pass metrics, P/D
    # sources held until their release, destinations whose KV is in transfer.
    fpm: list[tuple[Seq, int, tuple[int, int, int]]] | None
    holding: int
    inbound: list[Seq]
    mtp: MtpSampler | None  # MTP ranks: the seeded acceptance stream (speculation.py)
    # Telemetry: the rank's preemptions (retractions) and its scheduler cache-hit counters
    # (prompt tokens found cached / looked up; SGLang only), read at its refresh points.
    preemptions: int
    cache_hit_tokens: int
    cache_total_tokens: int

    @property
    def group(self) -> PassGroup | None:
        """State shared with the worker's other ranks (None: none)."""
        ...

    def has_work(self) -> bool: ...

    def kv_gauges(self) -> tuple[int, int]:
        """Blocks (pages) in use, and cached ones nobody holds (telemetry)."""
        ...

    def queued_gauge(self) -> int:
        """Requests waiting on the rank, as telemetry's gauge counts them."""
        ...

    def connector_ready(self) -> bool: ...

    def plan(self, now_ns: int, outcome: PassOutcome, throttle: bool = False) -> int:
        """Form this rank's part of a pass starting at now_ns; return its duration (ns)."""
        ...

    def take_events(self) -> list[tuple[int, int]]:
        """Router-visible KV events (STORED/REMOVED, identity) since the last call."""
        ...

    def unqueue(self, seq: Seq) -> None: ...

    def drop(self, seq: Seq) -> None:
        """A request canceled before it was admitted lets go of what it holds."""
        ...

    def release_source(self, seq: Seq) -> None:
        """P/D prefill side: the held source KV of a handed-off request is released."""
        ...

    def accepts_destination(self, dseq: Seq) -> bool:
        """P/D decode side: whether the rank takes the destination at all (False: the handoff
        fails)."""
        ...

    def destination_never_fits(self, dseq: Seq) -> bool:
        """P/D decode side: the destination can never be reserved on this rank."""
        ...

    def destination_blocked(self) -> bool:
        """P/D decode side: no reservation is tried now (its head still counts as tried)."""
        ...

    def reserve_destination(self, dseq: Seq) -> int: ...

    def activate_destination(self, dseq: Seq) -> None: ...


@runtime_checkable
class StretchRank(RankScheduler, Protocol):
    """A rank that states its own fast-forward rules (vLLM-shaped ranks leave them to the
    worker)."""

    def stretch_passes(self, k: int, grow: bool = True) -> int:
        """How many of the next k passes (at most) are pure decode passes: one token per
        running request, no admission, retraction, eviction or completion; `grow` False: nor
        a new page (under telemetry, whose reads mid-stretch must see a pass's pages)."""
        ...

    def advance_stretch(self, passes: int) -> None:
        """The state `passes` pure decode passes leave, before the worker counts their tokens
        in (seq.generated and seq.computed still hold the stretch's start)."""
        ...


def make_ranks(role: Role, pool_name: str, worker_id: int, first_sid: int,
               identities: BlockIdentities, record_events: bool,
               stats: RankStats) -> list[RankScheduler]:
    """One worker's DP ranks, built by the role's backend."""
    ranks: list[RankScheduler]
    if role.backend == "sglang":
        from kvreplay.engine.sglang import SglangGroup, SglangRank

        group = SglangGroup(role.prefill_decode_interval)
        group.ranks = [SglangRank(role, pool_name, worker_id, r, first_sid + r, identities,
                                  record_events, stats, group) for r in range(role.dp_size)]
        ranks = list(group.ranks)
        return ranks
    cls: type[Rank] = Rank
    if role.backend == "trtllm":
        from kvreplay.engine.trtllm import TrtllmRank

        cls = TrtllmRank
    return [cls(role, pool_name, worker_id, r, first_sid + r, identities, record_events, stats)
            for r in range(role.dp_size)]
