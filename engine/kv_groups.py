"""Hybrid KV cache groups (the reference's `kv_cache_groups`, aisimulate-core's
`kv_manager/grouped.rs`, probed on ai-dynamo 1.6.1): several groups of layers (full attention,
sliding-window attention, convolution) share one byte budget per rank,
`kv_cache_capacity_bytes`, instead of the block pool.

A request holds, per group, the page range its last forward needed: a forward computing tokens
[before, after) needs pages [lo, ceil(after / page tokens)), lo = 0 for a full-history group and
floor(max(0, before - window + 1) / page tokens) under a sliding window (pages wholly before the
window are freed; lo never moves back). Each page costs the group's `page_size_bytes`. A forward
takes its new pages for every group at once or not at all (the pages it frees count first). A
fresh request whose last prompt token alone needs more than the whole budget is rejected; a
forward that needs more than the whole budget aborts the reference's replay ("worker 0 is now
poisoned"), so kvreplay stops the run with GroupedKvOverflow (an EngineError: exit 1).
"""

from __future__ import annotations

from kvreplay.engine.errors import EngineError
from kvreplay.engine.sequence import Seq
from kvreplay.schema.spec import Role


class GroupedKvOverflow(EngineError):
    """A forward needs more bytes than the rank's whole KV budget (the reference aborts). The
    message names the native spec's keys; `for_config()` names the YAML config's instead."""

    def __init__(self, facts: str, role: str) -> None:
        self.facts = facts
        self.role = role
        super().__init__(self._text(f"`kv_cache_capacity_bytes` of the {role} rank",
                                    "`max_num_batched_tokens`"))

    def for_config(self) -> str:
        """The message for a run compiled from a YAML config."""
        return self._text(f"engine.workers.{self.role}.kv_cache.capacity.bytes",
                          "`scheduler.max_batched_tokens`")

    def _text(self, capacity: str, budget: str) -> str:
        return (f"{self.facts} ({capacity}; the reference aborts its replay here); lower "
                f"{budget}, raise the capacity, or shorten the requests")


class GroupedKv:
    """One rank's KV cache groups: the byte budget and each request's page ranges."""

    __slots__ = ("capacity", "groups", "leases", "pages", "rank_name", "role", "used")

    def __init__(self, cfg: Role, rank_name: str) -> None:
        assert cfg.kv_cache_groups is not None and cfg.kv_cache_capacity_bytes is not None
        # (tokens per page, bytes per page, window or 0)
        self.groups = [(int(g.block_size_tokens or 1), int(g.page_size_bytes or 0),
                        int(g.sliding_window or 0)) for g in cfg.kv_cache_groups]
        self.capacity = cfg.kv_cache_capacity_bytes
        self.used = 0
        self.pages = 0  # pages held, every group's (telemetry's active blocks)
        self.rank_name = rank_name
        self.role = cfg.name
        # Per request: (its bytes, [lo, hi] of each group, flattened).
        self.leases: dict[Seq, tuple[int, list[int]]] = {}

    def _ranges(self, before: int, after: int, held: list[int] | None) -> tuple[int, list[int]]:
        """The bytes and page ranges a forward [before, after) leaves the request holding."""
        total = 0
        out: list[int] = []
        for k, (tokens, page, window) in enumerate(self.groups):
            lo = 0
            if window:
                start = before - window + 1
                lo = start // tokens if start > 0 else 0
            hi = -(-after // tokens)
            if held is not None:
                if held[2 * k] > lo:
                    lo = held[2 * k]
                if held[2 * k + 1] > hi:
                    hi = held[2 * k + 1]
            if lo > hi:
                lo = hi
            out.append(lo)
            out.append(hi)
            total += (hi - lo) * page
        return total, out

    def never_fits(self, known: int) -> bool:
        """A fresh request whose last known token's forward alone exceeds the budget."""
        return self._ranges(known - 1 if known > 0 else 0, known, None)[0] > self.capacity

    def grow(self, seq: Seq, before: int, after: int) -> bool:
        """Take the pages the forward [before, after) needs (all groups, or nothing); False
        when the free bytes do not hold them. Raises GroupedKvOverflow when no pool could."""
        lease = self.leases.get(seq)
        held = lease[1] if lease is not None else None
        had = lease[0] if lease is not None else 0
        total, ranges = self._ranges(before, after, held)
        if total > self.capacity:
            raise GroupedKvOverflow(
                f"{self.rank_name}: request {_named(seq)} needs {total:,} bytes of KV cache "
                f"groups for {after - before} scheduled tokens after {before} computed tokens, "
                f"exceeding the rank's whole {self.capacity:,}-byte pool", self.role)
        if self.used - had + total > self.capacity:
            return False
        self.used += total - had
        self.pages += _pages(ranges) - (_pages(held) if held is not None else 0)
        self.leases[seq] = (total, ranges)
        return True

    def release(self, seq: Seq) -> None:
        """The request lets go of every page (finished, rejected or preempted)."""
        lease = self.leases.pop(seq, None)
        if lease is not None:
            self.used -= lease[0]
            self.pages -= _pages(lease[1])


def _named(seq: Seq) -> str:
    """The request as a diagnostic names it: its id, and its session turn when it has one."""
    rec = seq.rec
    where = f"(session {rec.session_id}, turn {rec.turn_index}) " if rec.session_id else ""
    name = f"{rec.request_id!r} " if rec.request_id else ""
    return f"{name}{where.lstrip()}arriving at {rec.arrival_time_ms:g} ms"


def _pages(ranges: list[int]) -> int:
    """Pages of a lease's ranges ([lo, hi] per group, flattened)."""
    return sum(ranges[1::2]) - sum(ranges[0::2])
