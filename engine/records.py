"""Per-request records: what the simulation core fills in and the report is built from.

Field names follow the reference engine's per-request report so results compare field by field.
The core appends to the history lists and sets times; `kvreplay.engine.report` turns finished
records into the canonical report. Times are simulated milliseconds.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from typing import Any

from kvreplay.engine.simtime import ns_to_ms


class RoutingDecision:
    """One placement of a request on a pool (engine.md section 5 route report)."""

    __slots__ = (
        "best_available_overlap_blocks",
        "dp_rank",
        "logical_worker_id",
        "outcome",
        "pool",
        "queue_entered_at_ms",
        "queue_wait_ms",
        "reported_overlap_tokens",
        "scheduler_id",
        "selected_overlap_blocks",
    )

    def __init__(
        self,
        pool: str,
        logical_worker_id: int,
        dp_rank: int,
        scheduler_id: int,
        outcome: str = "immediate",
        queue_entered_at_ms: float | None = None,
        queue_wait_ms: float = 0.0,
        reported_overlap_tokens: int = 0,
        selected_overlap_blocks: int | None = None,
        best_available_overlap_blocks: int | None = None,
    ) -> None:
        self.pool = pool
        self.logical_worker_id = logical_worker_id
        self.dp_rank = dp_rank
        self.scheduler_id = scheduler_id
        self.outcome = outcome
        self.queue_entered_at_ms = queue_entered_at_ms
        self.queue_wait_ms = queue_wait_ms
        self.reported_overlap_tokens = reported_overlap_tokens
        self.selected_overlap_blocks = selected_overlap_blocks
        self.best_available_overlap_blocks = best_available_overlap_blocks

    def to_dict(self) -> dict[str, Any]:
        """Every field (slot order)."""
        return {
            "best_available_overlap_blocks": self.best_available_overlap_blocks,
            "dp_rank": self.dp_rank,
            "logical_worker_id": self.logical_worker_id,
            "outcome": self.outcome,
            "pool": self.pool,
            "queue_entered_at_ms": self.queue_entered_at_ms,
            "queue_wait_ms": self.queue_wait_ms,
            "reported_overlap_tokens": self.reported_overlap_tokens,
            "scheduler_id": self.scheduler_id,
            "selected_overlap_blocks": self.selected_overlap_blocks,
        }


class Admission:
    """One admission of a request into a rank's running set (first or re-admission)."""

    __slots__ = (
        "admission_ordinal",
        "at_ms",
        "g1_reused_input_tokens",
        "host_reused_input_tokens",
        "is_readmission",
        "pool",
        "pool_admission_ordinal",
        "reused_input_tokens",
    )

    def __init__(
        self,
        admission_ordinal: int,
        pool: str,
        pool_admission_ordinal: int,
        at_ms: float,
        reused_input_tokens: int,
        g1_reused_input_tokens: int | None,
        host_reused_input_tokens: int | None,
        is_readmission: bool,
    ) -> None:
        self.admission_ordinal = admission_ordinal
        self.pool = pool
        self.pool_admission_ordinal = pool_admission_ordinal
        self.at_ms = at_ms
        self.reused_input_tokens = reused_input_tokens
        self.g1_reused_input_tokens = g1_reused_input_tokens
        self.host_reused_input_tokens = host_reused_input_tokens
        self.is_readmission = is_readmission

    def to_dict(self) -> dict[str, Any]:
        """Every field (slot order)."""
        return {
            "admission_ordinal": self.admission_ordinal,
            "at_ms": self.at_ms,
            "g1_reused_input_tokens": self.g1_reused_input_tokens,
            "host_reused_input_tokens": self.host_reused_input_tokens,
            "is_readmission": self.is_readmission,
            "pool": self.pool,
            "pool_admission_ordinal": self.pool_admission_ordinal,
            "reused_input_tokens": self.reused_input_tokens,
        }


class SharedGaps:
    """Token gaps that every request of a fast-forwarded decode stretch shares.

    Under polynomial timing each pass of a stretch has its own duration, and each request of
    the stretch emits one token per pass: its gaps are the pass durations (after its first
    one, which depends on when the request's previous token came). One object holds them for
    all of the stretch's records: `durations[start:]`, in nanoseconds, each a gap of
    ns_to_ms(duration). The report folds them once per referencing record, so nothing here is
    per token.
    """

    __slots__ = ("durations", "start")

    def __init__(self, durations: array[int], start: int) -> None:
        self.durations = durations
        self.start = start

    @property
    def count(self) -> int:
        return len(self.durations) - self.start

    def runs(self) -> Iterator[tuple[float, int]]:
        """The gaps as (gap_ms, 1) runs, in order."""
        for duration in self.durations[self.start:]:
            yield ns_to_ms(duration), 1


class BurstGaps:
    """One request's token gaps over a fast-forwarded MTP stretch (mtp_stretch.py).

    Pass p of the stretch emits `bursts[p]` tokens at its end: the first after the pass's gap
    (pass 0: `first_ms`, since the request's previous token; then `gap_ms`, or under
    polynomial timing ns_to_ms(durations[p])), the others 0 ms after it. The report folds them
    by value (`fold`), so nothing here is per token.
    """

    __slots__ = ("bursts", "count", "durations", "first_ms", "gap_ms")

    def __init__(self, first_ms: float, gap_ms: float, durations: array[int] | None,
                 bursts: bytes) -> None:
        self.first_ms = first_ms
        self.gap_ms = gap_ms
        self.durations = durations  # the stretch's pass durations (ns), shared by its records
        self.bursts = bursts
        self.count = sum(bursts)

    def runs(self) -> Iterator[tuple[float, int]]:
        """The gaps as runs, in order."""
        durations = self.durations
        for p, burst in enumerate(self.bursts):
            if not p:
                yield self.first_ms, 1
            else:
                yield (self.gap_ms if durations is None else ns_to_ms(durations[p])), 1
            if burst > 1:
                yield 0.0, burst - 1

    def fold(self, gaps: dict[float, int]) -> None:
        """Count the gaps into `gaps` (gap ms -> count)."""
        passes = len(self.bursts)
        gaps[self.first_ms] = gaps.get(self.first_ms, 0) + 1
        if self.durations is None:
            if passes > 1:
                gaps[self.gap_ms] = gaps.get(self.gap_ms, 0) + passes - 1
        else:
            for duration in self.durations[1:passes]:
                gap = ns_to_ms(duration)
                gaps[gap] = gaps.get(gap, 0) + 1
        if self.count > passes:
            gaps[0.0] = gaps.get(0.0, 0) + self.count - passes


class PassSeries:
    """One worker's token-stamping pass ends: `gaps[i]` is the time in nanoseconds from the
    pass end before the i-th to the i-th (the first is from `last_end`'s start value, -1: no
    request emitted then). A request emitting at consecutive ones of these pass ends has those
    gaps as its token gaps, held as a PassSpan, so nothing is kept per token."""

    __slots__ = ("gaps", "last_end")

    def __init__(self) -> None:
        self.gaps = array("q")
        self.last_end = -1


class PassSpan:
    """A request's token gaps `series.gaps[start:stop]` (each a gap of ns_to_ms(gap)), one per
    consecutive pass end of one worker at which it emitted; the report folds the spans of a
    series in one pass over it."""

    __slots__ = ("series", "start", "stop")

    def __init__(self, series: PassSeries, start: int, stop: int) -> None:
        self.series = series
        self.start = start
        self.stop = stop

    @property
    def count(self) -> int:
        return self.stop - self.start

    def runs(self) -> Iterator[tuple[float, int]]:
        """The gaps as (gap_ms, 1) runs, in order."""
        for gap in self.series.gaps[self.start:self.stop]:
            yield ns_to_ms(gap), 1


# An entry of RequestRecord.itl_gaps: a run of `count` equal gaps, a stretch's shared gaps, an
# MTP stretch's bursts, or a span of a worker's pass series.
ItlEntry = tuple[float, int] | SharedGaps | BurstGaps | PassSpan


class RequestRecord:
    """Everything the report says about one request."""

    __slots__ = (
        "accepted_draft_tokens",
        "admission_history",
        "agentic",
        "agentic_phase",
        "arrival_time_ms",
        "decode_admit_ms",
        "decode_reused_input_tokens",
        "destination_activated_ms",
        "destination_reserved_ms",
        "dispatched_at_ms",
        "draft_tokens",
        "first_admission_g1_reused_input_tokens",
        "first_admission_g3_reused_input_tokens",
        "first_admission_host_reused_input_tokens",
        "first_admit_ms",
        "first_token_ms",
        "input_length",
        "itl_gaps",
        "last_token_ms",
        "ordinal",
        "output_length",
        "play_id",
        "prefill_admit_ms",
        "readmission_count",
        "rejection",
        "request_id",
        "requested_output_length",
        "reused_input_tokens",
        "routing_history",
        "second_token_ms",
        "session_id",
        "source_held_ms",
        "source_released_ms",
        "speculative_steps",
        "terminal_status",
        "terminal_time_ms",
        "turn_index",
    )

    def __init__(
        self,
        ordinal: int,
        request_id: str,
        arrival_time_ms: float,
        input_length: int,
        requested_output_length: int,
        session_id: str | None = None,
        turn_index: int | None = None,
    ) -> None:
        self.ordinal = ordinal  # 0-based order of arrival in the workload (uuid is derived from it)
        self.request_id = request_id
        self.session_id = session_id
        self.turn_index = turn_index
        self.arrival_time_ms = arrival_time_ms
        # Set for agentic requests only (the driver's dispatch), as the reference reports it.
        self.dispatched_at_ms: float | None = None
        self.input_length = input_length
        self.requested_output_length = requested_output_length
        self.output_length = 0  # tokens actually produced
        self.first_admit_ms: float | None = None
        self.first_token_ms: float | None = None
        self.second_token_ms: float | None = None
        self.last_token_ms: float | None = None
        self.terminal_time_ms: float | None = None
        self.terminal_status: str | None = None  # completed | rejected | canceled | failed
        # Why a rejected request was rejected: (reason, the limit in tokens); REJECTIONS lists
        # the reasons.
        self.rejection: tuple[str, int] | None = None
        self.reused_input_tokens = 0
        # None when the deployment has no host tier (the report omits them then).
        self.first_admission_g1_reused_input_tokens: int | None = None
        self.first_admission_host_reused_input_tokens: int | None = None
        # With G3 below G2: how many of the host tokens came up from G3 (None without G3).
        self.first_admission_g3_reused_input_tokens: int | None = None
        self.readmission_count = 0
        self.admission_history: list[Admission] = []
        self.routing_history: list[RoutingDecision] = []
        # Token gaps in order: (gap_ms, count) runs, SharedGaps (a polynomial-timing stretch),
        # PassSpans (tokens at consecutive pass ends of a worker); itl_runs() expands them.
        self.itl_gaps: list[ItlEntry] = []
        # Disaggregated lifecycle (None in aggregated mode).
        self.prefill_admit_ms: float | None = None
        self.source_held_ms: float | None = None
        self.destination_reserved_ms: float | None = None
        self.destination_activated_ms: float | None = None
        self.decode_admit_ms: float | None = None
        # P/D: the best prompt reuse of the request's decode admissions (readmissions after a
        # preemption can hit the rank's cache; the first admission reuses nothing).
        self.decode_reused_input_tokens: int | None = None
        self.source_released_ms: float | None = None
        # Agentic requests: the play, the identity envelope, the warmup phase (None: no phases).
        self.play_id: str | None = None
        self.agentic: dict[str, str] | None = None
        self.agentic_phase: str | None = None
        # MTP (set to 0 when the request is placed on a speculative decoding pool): decode steps
        # with speculation, draft tokens proposed (nextn a step) and accepted ones emitted.
        self.speculative_steps: int | None = None
        self.draft_tokens = 0
        self.accepted_draft_tokens = 0

    def itl_runs(self) -> list[tuple[float, int]]:
        """The token gaps in order as (gap_ms, count) runs, equal neighbours merged: the same
        list whether the gaps were stamped pass by pass or by fast-forwarded stretches."""
        out: list[tuple[float, int]] = []
        for entry in self.itl_gaps:
            for gap, count in (entry,) if isinstance(entry, tuple) else entry.runs():
                if out and out[-1][0] == gap:
                    out[-1] = (gap, out[-1][1] + count)
                else:
                    out.append((gap, count))
        return out

    def itl_count(self) -> int:
        """How many token gaps the record holds."""
        return sum(entry[1] if isinstance(entry, tuple) else entry.count
                   for entry in self.itl_gaps)


_TIMES = ("arrival_time_ms", "dispatched_at_ms", "first_admit_ms", "first_token_ms",
          "second_token_ms", "last_token_ms", "terminal_time_ms", "prefill_admit_ms",
          "source_held_ms", "destination_reserved_ms", "destination_activated_ms",
          "decode_admit_ms", "source_released_ms")


def shift_times(rec: RequestRecord, origin_ms: float) -> None:
    """Make a record's times relative to `origin_ms` (the warmup barrier)."""
    for name in _TIMES:
        value = getattr(rec, name)
        if value is not None:
            setattr(rec, name, value - origin_ms)
    for adm in rec.admission_history:
        adm.at_ms -= origin_ms
    for route in rec.routing_history:
        if route.queue_entered_at_ms is not None:
            route.queue_entered_at_ms -= origin_ms
