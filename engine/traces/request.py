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

from collections.abc import Sequence
from typing import Protocol


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
    """

    def next_release_ms(self) -> float | None: ...

    def release(self, now_ms: float) -> Sequence[TraceRequest]: ...

    def on_terminal(self, request: TraceRequest, now_ms: float, *, status: str = "completed",
                    output_tokens: int | None = None) -> None: ...

    def exhausted(self) -> bool: ...


def runs_from_hash_ids(hash_ids: Sequence[int], block_size: int,
                       input_length: int) -> tuple[tuple[int, int], ...]:
    """Mooncake-style prompt: each hash id covers block_size tokens, cut at input_length."""
    full, rest = divmod(input_length, block_size) if input_length > 0 else (0, 0)
    runs = [(h, block_size) for h in hash_ids[:full]]
    if rest and len(hash_ids) > full:
        runs.append((hash_ids[full], rest))
    return tuple(runs)
