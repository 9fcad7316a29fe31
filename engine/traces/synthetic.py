"""Synthetic traffic: fixed-length requests or multi-turn sessions, closed or open loop.

- `synthetic`: independent requests of `input_tokens` / `output_tokens`; an optional
  `cached_prefix_tokens` prefix is the same in every prompt (the first request still computes it).
- `synthetic-session`: sessions of `turns` turns. Every turn, like the reference's
  `turns_per_session`, is a fresh prompt of `input_tokens` tokens: its round(shared_prefix_ratio *
  blocks) leading blocks come from the session's shared family (one of `num_prefix_groups`,
  drawn per session like the reference: StdRng(42), uniform), the rest are new tokens. A later
  turn does not carry the session's earlier prompts or outputs, so it reuses only its family's
  prefix. Each later turn is released `inter_turn_delay_ms` after the previous turn ends.
- Session (or request) starts: `concurrency` keeps N sessions active (a session holds its slot
  across its turns); `constant_rate` starts one every 1000/rate ms; `poisson` draws exponential
  gaps from StdRng(arrival_seed). The first start is at 0 ms.
"""

from __future__ import annotations

import heapq
import math

from kvreplay.engine.traces.releases import HeapReleases
from kvreplay.engine.traces.request import TraceRequest
from kvreplay.engine.traces.rng import StdRng
from kvreplay.engine.traces.values import (
    SYNTHETIC_GROUP_BASE,
    SYNTHETIC_SHARED_PREFIX,
    SYNTHETIC_UNIQUE_BASE,
    Runs,
)
from kvreplay.schema.diagnostics import Diagnostic

GROUP_SEED = 42
_ENDS_SESSION = frozenset({"canceled", "failed"})


def round_half_away(x: float) -> int:
    """Rust's f64::round for x >= 0: halves go up."""
    whole = math.floor(x)
    return int(whole) + (1 if x - whole >= 0.5 else 0)


def shared_prefix_tokens(input_tokens: int, ratio: float, block_size: int) -> int:
    """Tokens of a prompt taken from its prefix family: whole blocks, at most the prompt."""
    blocks = -(-input_tokens // block_size)
    shared_blocks = min(round_half_away(blocks * ratio), blocks)
    return min(shared_blocks * block_size, input_tokens)


class Arrivals:
    """Start times of successive sessions: 0, then constant or exponential gaps."""

    def __init__(self, kind: str, rate: float, seed: int) -> None:
        self._kind = kind
        self._mean_gap = 1000.0 / rate
        self._rng = StdRng(seed) if kind == "poisson" else None
        self._next = 0.0
        self._started = False

    def next(self) -> float:
        if self._started:
            if self._rng is not None:
                self._next += self._rng.exponential_ms(self._mean_gap)
            else:
                self._next += self._mean_gap
        self._started = True
        return self._next


class _Session:
    __slots__ = ("index", "prefix", "turn")

    def __init__(self, index: int) -> None:
        self.index = index
        self.turn = 0
        self.prefix: Runs = ()  # the leading tokens of every turn's prompt


_Entry = tuple[float, int, int, TraceRequest, _Session]


class SyntheticWorkload(HeapReleases):
    """A Workload of `sessions` synthetic sessions (one-turn sessions for `synthetic`)."""

    def __init__(self, *, sessions: int, turns: int, input_tokens: int, output_tokens: int,
                 cached_prefix_tokens: int = 0, shared_prefix_ratio: float = 0.0,
                 num_prefix_groups: int = 0, inter_turn_delay_ms: float = 0.0,
                 block_size: int = 1, concurrency: int | None = None,
                 arrivals: Arrivals | None = None, session_metadata: bool = False) -> None:
        if (concurrency is None) == (arrivals is None):
            raise ValueError("give exactly one of concurrency or arrivals")
        self._sessions = sessions
        self._turns = turns
        self._input = input_tokens
        self._output = output_tokens
        self._delay = inter_turn_delay_ms
        self._session_metadata = session_metadata
        self._cached = min(cached_prefix_tokens, input_tokens)
        self._shared = 0
        self._groups: StdRng | None = None
        self._group_count = num_prefix_groups
        if shared_prefix_ratio > 0.0 and num_prefix_groups > 0:
            self._shared = shared_prefix_tokens(input_tokens, shared_prefix_ratio, block_size)
            self._groups = StdRng(GROUP_SEED)
        self._concurrency = concurrency
        self._arrivals = arrivals
        self._created = 0
        self._active = 0
        self._peeked: float | None = None
        self._heap: list[_Entry] = []
        self._open: dict[int, _Session] = {}
        self.peak_pending = 0
        self.diagnostics: list[Diagnostic] = []  # warnings found while building the workload
        if concurrency is not None:
            self._activate(0.0)

    @property
    def total_requests(self) -> int:
        """Requests to release (fewer when a canceled turn ends its session early)."""
        return self._sessions * self._turns

    # --- Workload protocol ---------------------------------------------------------------

    def on_terminal(self, request: TraceRequest, now_ms: float, *, status: str = "completed",
                    output_tokens: int | None = None) -> None:
        session = self._open.pop(request.ordinal, None)
        if session is None:
            raise ValueError(f"on_terminal for a request this workload has not released: "
                             f"{request!r}")
        if session.turn + 1 >= self._turns or status in _ENDS_SESSION:
            if self._concurrency is not None:
                self._active -= 1
                self._activate(now_ms)
            return
        session.turn += 1
        self._push(now_ms + self._delay, session)

    def exhausted(self) -> bool:
        return (self._created >= self._sessions and self._peeked is None and not self._heap
                and not self._open)

    # --- internals -----------------------------------------------------------------------

    def _fill(self) -> None:
        if self._arrivals is None:
            return
        while self._created < self._sessions or self._peeked is not None:
            if self._peeked is None:
                self._peeked = self._arrivals.next()
            if self._heap and self._peeked > self._heap[0][0]:
                return
            at, self._peeked = self._peeked, None
            self._push(at, self._new_session())

    def _activate(self, now_ms: float) -> None:
        assert self._concurrency is not None
        while self._active < self._concurrency and self._created < self._sessions:
            self._active += 1
            self._push(now_ms, self._new_session())

    def _new_session(self) -> _Session:
        session = _Session(self._created)
        self._created += 1
        if self._groups is not None:
            group = self._groups.below_u32(self._group_count)
            session.prefix = ((SYNTHETIC_GROUP_BASE + group, self._shared),)
        elif self._cached:
            session.prefix = ((SYNTHETIC_SHARED_PREFIX, self._cached),)
        return session

    def _push(self, at: float, session: _Session) -> None:
        ordinal = session.index * self._turns + session.turn
        prompt = session.prefix
        fresh = self._input - sum(count for _, count in prompt)
        if fresh > 0:
            prompt += ((SYNTHETIC_UNIQUE_BASE + ordinal, fresh),)
        request = TraceRequest(
            ordinal=ordinal,
            request_id="",
            release_ms=at,
            input_length=sum(count for _, count in prompt),
            output_length=self._output,
            prompt=prompt,
            session_id=f"session_{session.index}" if self._session_metadata else None,
            turn_index=session.turn if self._session_metadata else None,
        )
        heapq.heappush(self._heap, (at, session.index, session.turn, request, session))
        self.peak_pending = max(self.peak_pending, len(self._heap))
