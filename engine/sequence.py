"""Per-request state inside one pool's scheduler (a P/D request has one per pool)."""

from __future__ import annotations

from kvreplay.engine.records import RequestRecord
from kvreplay.engine.traces.request import TraceRequest

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
        "block_ids",
        "blocks",
        "computed",
        "generated",
        "hidden",
        "input_length",
        "last_token_ns",
        "materialized",
        "max_output",
        "partner",
        "pool_admissions",
        "rec",
        "registered",
        "req",
        "scheduler",
        "status",
    )

    def __init__(self, req: TraceRequest, rec: RequestRecord, block_ids: list[int],
                 max_output: int, hidden: bool = False) -> None:
        self.req = req
        self.rec = rec
        self.input_length = req.input_length
        self.max_output = max_output
        self.block_ids = block_ids
        self.blocks: list[int] = []
        self.computed = 0
        self.generated = 0
        self.registered = 0
        self.status = WAITING
        self.pool_admissions = 0
        self.hidden = hidden  # P/D prefill side: its one token is internal, never reported
        self.materialized = False  # P/D decode side: prompt KV arrived by transfer
        self.last_token_ns = 0
        self.partner: Seq | None = None  # P/D: the prefill-side Seq holding the source KV
        self.scheduler: object = None  # the Rank it was placed on

    def __repr__(self) -> str:
        return (f"Seq({self.req.request_id!r}, computed={self.computed}, "
                f"generated={self.generated}/{self.max_output}, blocks={len(self.blocks)})")
