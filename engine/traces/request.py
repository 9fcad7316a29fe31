"""The workload seam: requests as trace readers and generators produce them for the simulation.

A prompt is a tuple of runs `(token_value, count)`: a Mooncake row with hash ids [7, 9] at 512
tokens per id and input_length 700 is ((7, 512), (9, 188)); a synthetic prompt with a shared
896-token prefix is ((shared_id, 896), (unique_id, 128)). Equal runs at equal positions mean equal
tokens, which is all prefix caching needs; the engine hashes its own blocks from these runs.
Token values are arbitrary non-negative Python ints (trace hash ids are u64; values the workloads
invent lie at or above 2**64, see `values.py`), so the engine must intern or hash them, not pack
them into fixed-width integers.

`ordinal` numbers a workload's requests from 0 in the workload's own order, independent of timing
(trace: the row's line number - 1, so uuid ...0007 is line 7; synthetic: session-major); the
report's uuid is ordinal + 1.
`request_id` is the trace row's `request_id`, or "" when it has none.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol


class TraceRequest:
    """One request to dispatch. `release_ms` is when the workload lets it go (arrival)."""

    __slots__ = (
        "agentic",
        "input_length",
        "ordinal",
        "output",
        "output_length",
        "prompt",
        "release_ms",
        "request_id",
        "session_id",
        "turn_index",
    )

    def __init__(
        self,
        ordinal: int,
        request_id: str,
        release_ms: float,
        input_length: int,
        output_length: int,
        prompt: tuple[tuple[int, int], ...],
        session_id: str | None = None,
        turn_index: int | None = None,
    ) -> None:
        self.ordinal = ordinal
        self.request_id = request_id
        self.release_ms = release_ms
        self.input_length = input_length
        self.output_length = output_length
        self.prompt = prompt
        self.session_id = session_id
        self.turn_index = turn_index
        # Agentic requests: (play id, identity envelope, phase) for the report.
        self.agentic: tuple[str, dict[str, str], str | None] | None = None
        # The tokens it will generate, as runs, when a later prompt holds them (delta
        # sessions): its output-bearing blocks are then cached under their real identities.
        self.output: tuple[tuple[int, int], ...] | None = None

    def __repr__(self) -> str:
        return (f"TraceRequest({self.request_id!r}, t={self.release_ms}, in={self.input_length}, "
                f"out={self.output_length})")


class Host(Protocol):
    """What a bound workload may ask of the simulation running it (loop.Simulation implements it;
    the agentic driver uses it for its warmup barrier, profile and cancellation)."""

    def drained(self) -> bool:
        """No request in flight and no G2 copy outstanding."""
        ...

    def open_measurement(self) -> None:
        """What ran so far was preparation; measure from now on."""
        ...

    def drop_records(self) -> None:
        """What ran was preparation, and nothing will be measured."""
        ...

    def cancel(self, ordinal: int) -> bool:
        """Cancel a released request now; True when a pass already committed work for it."""
        ...

    def admission(self, ordinal: int) -> tuple[float | None, int | None]:
        """(first admission time, tokens it reused) of a recent request."""
        ...


class Workload(Protocol):
    """A source of requests the event loop drives (open loop, closed loop or sessions).

    The loop asks `next_release_ms()` for the earliest pending release, takes every request due
    with `release(now)` (in a deterministic order), and reports each request's end with
    `on_terminal(request, now)` so closed-loop and multi-turn workloads can release follow-ups.
    A follow-up may be due at `now` itself, so the loop asks `next_release_ms()` again after
    every `on_terminal`.

    `on_terminal` takes the request's terminal `status` (completed | rejected | canceled | failed:
    canceled and failed end a session, the others go on with its next turn) and `output_tokens`
    actually produced (None = as requested); delta sessions append only produced output to the
    next turn's prompt.

    The rest is what the loop reads of a workload besides its requests; `WorkloadDefaults` gives
    a plain workload all of it (only the agentic driver sets more).
    """

    def next_release_ms(self) -> float | None: ...

    def release(self, now_ms: float) -> Sequence[TraceRequest]: ...

    def on_terminal(self, request: TraceRequest, now_ms: float, *, status: str = "completed",
                    output_tokens: int | None = None) -> None: ...

    def exhausted(self) -> bool: ...

    @property
    def total_requests(self) -> int | None:
        """Requests it will release, when known (progress: terminal / total)."""
        ...

    @property
    def prepares(self) -> bool:
        """True: the run starts with preparation (a warmup); records are measured, and may be
        streamed, only once the workload calls `Host.open_measurement`."""
        ...

    @property
    def dense_tokens(self) -> bool:
        """True: prompt token values are small dense ids (G2 hashes them as they are)."""
        ...

    def token_order(self) -> Iterable[tuple[tuple[int, int], ...]]:
        """Prompts whose token values the reference interns before any request runs, in its
        order (a trace's rows in file order); G2's tie-break hashes number token values so.
        Empty: values are numbered as prompts arrive."""
        ...

    @property
    def acts_at_instants(self) -> bool:
        """True: `at_instant` is called at the end of every instant, the next release may move
        at any instant (it is asked again at each), and an announced release may come up
        empty."""
        ...

    def bind(self, host: Host) -> None:
        """The simulation about to run it (before any release)."""
        ...

    def at_instant(self, now_ms: float) -> bool:
        """End-of-instant work (with `acts_at_instants`); True stops the run."""
        ...

    def progress_fraction(self, now_ms: float) -> float | None:
        """The share of its work done, when it knows better than terminal / total_requests."""
        ...

    def plays_progress(self) -> tuple[int, int] | None:
        """(plays settled, plays started) for progress displays; None: not a play workload."""
        ...

    def observed(self, window_ms: float) -> bool:
        """Offered the successful requests' span (first arrival to last response); True when
        that span is the run's reported duration."""
        ...

    def summary_extra(self) -> dict[str, Any] | None:
        """Keys the workload adds to the report summary."""
        ...


class WorkloadDefaults:
    """The non-release side of `Workload` for a workload that only releases requests."""

    prepares = False
    dense_tokens = False
    acts_at_instants = False

    def bind(self, host: Host) -> None:
        pass

    def token_order(self) -> Iterable[tuple[tuple[int, int], ...]]:
        return ()

    def at_instant(self, now_ms: float) -> bool:
        return False

    def progress_fraction(self, now_ms: float) -> float | None:
        return None

    def plays_progress(self) -> tuple[int, int] | None:
        return None

    def observed(self, window_ms: float) -> bool:
        return False

    def summary_extra(self) -> dict[str, Any] | None:
        return None


def runs_from_hash_ids(hash_ids: Sequence[int], block_size: int,
                       input_length: int) -> tuple[tuple[int, int], ...]:
    """Mooncake-style prompt: each hash id covers block_size tokens, cut at input_length."""
    full, rest = divmod(input_length, block_size) if input_length > 0 else (0, 0)
    runs = [(h, block_size) for h in hash_ids[:full]]
    if rest and len(hash_ids) > full:
        runs.append((hash_ids[full], rest))
    return tuple(runs)
