"""Per-request state inside one pool's scheduler (a P/D request has one per pool)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvreplay.engine.records import RequestRecord
from kvreplay.engine.traces.request import TraceRequest

if TYPE_CHECKING:
    from kvreplay.engine.g3_client import RestoreState
    from kvreplay.engine.host_pool import Transfer
    from kvreplay.engine.radix import Node
    from kvreplay.engine.ranks import RankScheduler

WAITING = 0
RUNNING = 1
PREEMPTED = 2


class Seq:
    """A request as a rank's scheduler sees it.

    `computed` counts tokens whose KV is computed; `generated` counts emitted output tokens, so
    the known sequence is input_length + generated tokens and a decoding request always has one
    dangling (sampled, not yet computed) token. `blocks` are the physical blocks in order;
    `block_ids` the identities of its full blocks (prompt blocks up front, output-bearing ones
    appended as they are first cached), `registered` how many leading blocks are cached.
    """

    __slots__ = (
        "activated",
        "block_ids",
        "blocks",
        "computed",
        "decoded_at",
        "g3",
        "generated",
        "hidden",
        "in_connector",
        "input_length",
        "last_attempt_gen",
        "last_token_ns",
        "latest_store",
        "load",
        "loaded_prefix",
        "materialized",
        "max_output",
        "node",
        "orig_g1_tokens",
        "pages",
        "partner",
        "pool_admissions",
        "rec",
        "registered",
        "req",
        "scheduler",
        "sleeping",
        "slept_at",
        "status",
        "store_cursor",
        "waiting_order",
    )

    def __init__(self, req: TraceRequest, rec: RequestRecord, block_ids: list[int],
                 max_output: int, hidden: bool, scheduler: RankScheduler) -> None:
        self.req = req
        self.rec = rec
        self.input_length = req.input_length
        self.max_output = max_output
        self.block_ids = block_ids
        self.blocks: list[int] = []
        self.computed = 0
        self.decoded_at = -1  # the serial of its rank's pass whose fast path decoded it
        self.generated = 0
        self.registered = 0
        self.status = WAITING
        self.pool_admissions = 0
        self.hidden = hidden  # P/D prefill side: its one token is internal, never reported
        self.materialized = False  # P/D decode side: prompt KV arrived by transfer
        self.last_token_ns = 0
        # P/D decode: acceptance order on its rank (an activated handoff re-enters the
        # waiting queue by it), and the rank's capacity generation at the last reservation try.
        self.waiting_order = 0
        self.last_attempt_gen = -1
        self.partner: Seq | None = None  # P/D: the prefill-side Seq holding the source KV
        self.scheduler = scheduler  # the rank it was placed on
        # G2 (host_client.py): write-through cursor in prompt blocks, the latest store cohort,
        # a restore in flight or completed (activated) and what it brought, and the
        # connector-queue state (sleeping = waits for transfer progress).
        self.store_cursor = 0
        self.latest_store: Transfer | None = None
        self.load: Transfer | None = None
        self.activated = False
        self.orig_g1_tokens = 0
        self.loaded_prefix = 0
        self.in_connector = False
        self.sleeping = False
        self.slept_at = 0  # its pool client's progress serial when it fell asleep
        # SGLang (sglang.py): the pages the request holds and the radix node it locks.
        self.pages = 0
        self.node: Node | None = None
        if scheduler.mtp is not None and not scheduler.is_prefill and rec.speculative_steps is None:
            rec.speculative_steps = 0  # its decode steps speculate (speculation.py)
        self.g3: RestoreState | None = None  # G3 below G2 (g3_client.py): its restore rounds

    def __repr__(self) -> str:
        return (f"Seq({self.req.request_id!r}, computed={self.computed}, "
                f"generated={self.generated}/{self.max_output}, blocks={len(self.blocks)})")
