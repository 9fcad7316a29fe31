"""The continuous agentic profile (`agentic_profile`, engine.md section 6).

The profile clock starts at the warmup barrier (or 0). Until the admission cutoff
(start + duration): a lane whose play is client-finished takes, in lane order, a fresh instance
of the corpus play under a shared cursor (`cursor % plays`, the cursor starting at the lane
count), from its first request, with the lane's next play ordinal; a play idle for the tree cap,
or the whole client idle for the global cap, has its pending timers moved so that the earliest
fires now (spacing kept; recorded in `idle_shifts`). At the cutoff nothing more is issued:
every node not dispatched yet is censored (`never_issued_requests`, its play incomplete). At
the response-grace deadline every request the client still waits for is canceled; the run
ends at the first instant at or after the cutoff where the client waits for nothing. The
report uses the absolute clock. Semantics and field names are the reference's (aisimulate
`loadgen/profile.rs` and its driver).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvreplay.engine.traces.agentic.serde import seconds_to_ms

SCHEMA = "aisimulate.agentic.profile.v1"


@dataclass(frozen=True, slots=True)
class ProfileOptions:
    duration_seconds: float = 3600.0
    response_grace_seconds: float = 30.0
    cancel_drain_seconds: float = 10.0
    tree_idle_cap_seconds: float = 300.0
    global_idle_cap_seconds: float = 10.0

    def to_json(self) -> dict[str, float]:
        return {"duration_seconds": float(self.duration_seconds),
                "response_grace_seconds": float(self.response_grace_seconds),
                "cancel_drain_seconds": float(self.cancel_drain_seconds),
                "tree_idle_cap_seconds": float(self.tree_idle_cap_seconds),
                "global_idle_cap_seconds": float(self.global_idle_cap_seconds)}


class Profile:
    """Deadlines, the corpus cursor and the counters of the `agentic_profile` report."""

    def __init__(self, options: ProfileOptions, lanes: int, plays: int) -> None:
        self.options = options
        self.plays = plays
        self.start: float | None = None
        self.cutoff = self.grace = self.drain = 0.0
        self.tree_cap = seconds_to_ms(options.tree_idle_cap_seconds)
        self.global_cap = seconds_to_ms(options.global_idle_cap_seconds)
        self.admission_closed = False
        self.canceled = False  # the grace deadline passed
        self.finished_at: float | None = None
        self.cursor = lanes
        self.ordinals = [1] * lanes
        self.issued_requests = 0
        self.successful_responses = 0
        self.canceled_requests = 0
        self.unsettled = 0
        self.never_issued = 0
        self.first_request_ms: float | None = None
        self.first_success_arrival_ms: float | None = None
        self.last_success_ms: float | None = None
        self.idle_shifts: list[dict[str, Any]] = []
        self.global_idle_since: float | None = None
        self.observation: float | None = None

    def open(self, now: float) -> None:
        o = self.options
        self.start = now
        self.cutoff = now + seconds_to_ms(o.duration_seconds)
        self.grace = self.cutoff + seconds_to_ms(o.response_grace_seconds)
        self.drain = self.grace + seconds_to_ms(o.cancel_drain_seconds)
        self.global_idle_since = now

    def cancel_due(self, reached: bool) -> bool:
        """True once, when the grace deadline is `reached` after the cutoff."""
        if self.admission_closed and not self.canceled and reached:
            self.canceled = True
            return True
        return False

    def next_source(self, lane: int) -> tuple[int, int]:
        """(source play, play ordinal) of the lane's next replacement; advances the cursor."""
        source = self.cursor % self.plays
        ordinal = self.ordinals[lane]
        self.cursor += 1
        self.ordinals[lane] += 1
        return source, ordinal

    # -- events --------------------------------------------------------------------------------

    def on_issue(self, now: float) -> None:
        self.issued_requests += 1
        if self.first_request_ms is None:
            self.first_request_ms = now
        self.global_idle_since = None

    def on_terminal(self, now: float, status: str, arrival: float) -> None:
        if status == "completed":
            self.successful_responses += 1
            if self.first_success_arrival_ms is None or arrival < self.first_success_arrival_ms:
                self.first_success_arrival_ms = arrival
            if self.last_success_ms is None or now > self.last_success_ms:
                self.last_success_ms = now

    def observation_ms(self) -> float:
        """First successful request's arrival to the last successful response (0: none); the
        simulation sets `observation` from its records (the reported, ns-exact times)."""
        if self.observation is not None:
            return self.observation
        if self.first_success_arrival_ms is None or self.last_success_ms is None:
            return 0.0
        return max(self.last_success_ms - self.first_success_arrival_ms, 0.0)

    # -- report --------------------------------------------------------------------------------

    def report(self, *, plays_started: int, client_completed: int, retired: int,
               quiescent: int, in_flight: int) -> dict[str, Any]:
        observation = self.observation_ms()
        throughput = (self.successful_responses * 1000.0 / observation
                      if observation > 0 else None)
        return {
            "schema": SCHEMA, "options": self.options.to_json(),
            "profile_start_ms": self.start, "admission_cutoff_ms": self.cutoff,
            "response_grace_deadline_ms": self.grace, "cancel_drain_deadline_ms": self.drain,
            "admission_closed": self.admission_closed, "finished_at_ms": self.finished_at,
            "cancel_drain_timed_out": False, "unsettled_server_requests": self.unsettled,
            "plays_started": plays_started, "client_completed_plays": client_completed,
            "retired_plays": retired, "server_quiescent_plays": quiescent,
            "issued_requests": self.issued_requests,
            "successful_responses": self.successful_responses,
            "canceled_requests": self.canceled_requests,
            "never_issued_requests": self.never_issued,
            "client_in_flight_requests": in_flight,
            "server_unsettled_requests": self.unsettled,
            "first_request_ms": self.first_request_ms,
            "last_successful_response_ms": self.last_success_ms,
            "observation_duration_ms": observation, "successful_request_throughput": throughput,
            "corpus_cursor": self.cursor, "idle_shifts": self.idle_shifts}
