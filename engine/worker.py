"""A worker: its attention-DP ranks run passes in lockstep, and pure decode stretches run at once.

Lockstep: every rank with work forms its pass at the same start; the worker's pass ends when
its slowest rank does, and idle ranks wait at the same barrier (checked against the reference).

Fast-forward: when every running request on every rank is a plain decoder whose next tokens
need no new block and do not finish it, and no waiting request could be admitted, the next k
passes are uniform: each emits one token per request, allocates nothing, evicts nothing, emits no
router event. Under fixed timing a stretch may also fill new blocks taken from free capacity
(see _grows), allocated when it ends in the order single passes would take them. The worker then
schedules one completion k passes ahead instead of k completions.
Anything that gives the worker new work mid-stretch (`sync`) cuts the stretch at the first pass
boundary at or after that moment, which is exactly where the step-by-step path would start the
pass that sees the new work. Tokens of a stretch are stamped when it is cut or completes.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from heapq import heapify, heappop, heappush, heapreplace
from itertools import accumulate
from typing import Any

from kvreplay.engine.mtp_stretch import MtpPlan, apply_stretch, plan_stretch
from kvreplay.engine.ranks import PassGroup, RankScheduler, StretchRank
from kvreplay.engine.records import ItlEntry, PassSeries, PassSpan, SharedGaps
from kvreplay.engine.scheduler import PassOutcome, Rank
from kvreplay.engine.sequence import Seq
from kvreplay.engine.simtime import ns_to_ms

MIN_STRETCH = 2  # a single pure pass is cheaper step by step


def add_run(runs: list[ItlEntry], gap: float, count: int) -> None:
    """Append `count` token gaps of `gap` ms to a record's run-length ITL list."""
    if runs:
        last = runs[-1]
        if isinstance(last, tuple) and last[0] == gap:
            runs[-1] = (gap, last[1] + count)
            return
    runs.append((gap, count))


def stamp_tokens(seqs: list[Seq], at_ns: int, on_first: Callable[[Seq], None],
                 series: PassSeries) -> None:
    """Record one visible token of each request (seq.generated already counts it), emitted at
    at_ns by a pass of the worker whose `series` this is; `on_first(seq)` right after a
    request's first token is stamped. A request whose last token came at the series' last
    pass end has the series' new gap as its own: its PassSpan grows by one (one is opened when
    its last entry is not a span ending there), so nothing is stored per token."""
    at_ms = ns_to_ms(at_ns)
    gap_ns = -1
    gap_ms = 0.0
    prev = series.last_end
    at = len(series.gaps)
    series.gaps.append(at_ns - prev)
    series.last_end = at_ns
    for seq in seqs:
        rec = seq.rec
        generated = seq.generated
        if generated == 1:
            rec.first_token_ms = at_ms
        else:
            if generated == 2:
                rec.second_token_ms = at_ms
            runs = rec.itl_gaps
            if seq.last_token_ns == prev:
                span = runs[-1] if runs else None
                if isinstance(span, PassSpan) and span.stop == at and span.series is series:
                    span.stop = at + 1
                else:
                    runs.append(PassSpan(series, at, at + 1))
            else:
                if at_ns - seq.last_token_ns != gap_ns:  # most requests of a pass share it
                    gap_ns = at_ns - seq.last_token_ns
                    gap_ms = ns_to_ms(gap_ns)
                add_run(runs, gap_ms, 1)
        seq.last_token_ns = at_ns
        rec.last_token_ms = at_ms
        rec.output_length = generated
        if generated == 1:
            on_first(seq)


def stamp_bursts(bursts: list[tuple[Seq, int]], at_ns: int,
                 on_first: Callable[[Seq], None]) -> None:
    """Record the visible tokens of MTP bursts (seq.generated already counts them), all emitted
    at at_ns: the burst's first token after the gap since the request's last one, the others
    with gaps of 0; `on_first(seq)` right after a request's first token is stamped."""
    at_ms = ns_to_ms(at_ns)
    for seq, burst in bursts:
        rec = seq.rec
        generated = seq.generated
        start = generated - burst + 1  # the burst's first token, counted from 1
        runs = rec.itl_gaps
        if start == 1:
            rec.first_token_ms = at_ms
        else:
            add_run(runs, ns_to_ms(at_ns - seq.last_token_ns), 1)
        if burst > 1:
            add_run(runs, 0.0, burst - 1)
        if start <= 2 <= generated:
            rec.second_token_ms = at_ms
        seq.last_token_ns = at_ns
        rec.last_token_ms = at_ms
        rec.output_length = generated
        if start == 1:
            on_first(seq)


class Worker:
    __slots__ = (
        "busy",
        "committed",
        "deferred",
        "dp_interval",
        "fixed_decode_ns",
        "fixed_timing",
        "fpm",
        "gid",
        "group",
        "horizon",
        "mtp_plan",
        "order",
        "outcome",
        "own",
        "pass_end",
        "pass_index",
        "pass_start",
        "pool_name",
        "ranks",
        "series",
        "stretch_d",
        "stretch_durations",
        "stretch_ends",
        "stretch_k",
        "stretch_waiting",
        "ticks",
        "time_cap",
        "version",
        "vllm",
        "worker_id",
    )

    def __init__(self, gid: int, pool_name: str, worker_id: int, ranks: list[RankScheduler],
                 prefill_schedule_interval: int) -> None:
        self.gid = gid
        self.order = gid  # same-instant pass completions are handled in this order
        self.pool_name = pool_name
        self.worker_id = worker_id
        self.ranks = ranks
        # vLLM-shaped ranks are fast-forwarded here; other backends' ranks state their own
        # stretches (ranks.StretchRank). One worker's ranks all run one backend.
        vllm = [rank for rank in ranks if isinstance(rank, Rank)]
        own = [rank for rank in ranks if isinstance(rank, StretchRank)]
        self.vllm: list[Rank] | None = vllm if len(vllm) == len(ranks) else None
        self.own: list[StretchRank] | None = None if self.vllm is not None else own
        assert self.vllm is not None or len(own) == len(ranks), "a rank of unknown shape"
        self.group: PassGroup | None = ranks[0].group
        self.busy = False
        self.deferred: list[Callable[[], None]] = []  # scheduler commands held until pass end
        self.version = 0
        self.pass_index = 0
        self.pass_start = 0
        self.pass_end = 0
        self.outcome: PassOutcome | None = None
        self.series = PassSeries()  # the pass ends its tokens were stamped at (stamp_tokens)
        self.committed = 0  # prompt tokens the pass in flight computes (a time cap drops them)
        self.stretch_k = 0  # > 0 while a fast-forwarded stretch is in flight
        self.stretch_d = 0  # uniform pass duration, or 0 when stretch_ends holds each pass end
        self.stretch_ends: list[int] | None = None
        self.stretch_durations: list[int] = []  # each pass's duration, with stretch_ends
        self.mtp_plan: MtpPlan | None = None  # the MTP stretch in flight (mtp_stretch.py)
        self.stretch_waiting: list[bool] = []  # per rank: requests waited at its start
        # Telemetry ticks (`ticks(t)`: the first at or after t): a stretch ends by the first
        # tick at or after its first pass end, so every pass end a sample sees is a real one.
        self.ticks: Callable[[int], int | None] | None = None
        # Fixed timing on every rank, one decode duration: every pure pass lasts this long.
        decodes = {rank.timer.decode_ns(0) for rank in ranks if rank.timer.fixed}
        self.fixed_timing = all(rank.timer.fixed for rank in ranks)
        fixed = self.fixed_timing and len(decodes) == 1
        self.fixed_decode_ns = decodes.pop() if fixed else None
        # With attention DP, prefills are admitted every `interval` passes while a rank decodes.
        self.dp_interval = prefill_schedule_interval if len(ranks) > 1 else 1
        # Scaling: no stretch pass ends after the next policy tick (scaling.py), and each
        # pass's forward-pass metrics are captured (scaling_metrics.py) when `fpm` is a list.
        self.horizon = 1 << 62
        # The run's time cap (set by the loop): no stretch pass ends after it, as no single
        # pass completes after it.
        self.time_cap = 1 << 62
        self.fpm: Any = None  # scaling_metrics.Captured, [] (capture next pass) or None

    def has_work(self) -> bool:
        if self.own is not None:
            return any(rank.has_work() for rank in self.own)
        for rank in self.ranks:
            if rank.running or rank.waiting or (rank.connector and rank.connector_ready()):
                return True
        return False

    # -- starting a pass ---------------------------------------------------------------------------

    def start_pass(self, now_ns: int, stepwise: bool) -> int | None:
        """Start the next pass (or stretch) at now_ns; return its end, or None to stay idle."""
        if not self.has_work():
            return None
        if not stepwise:
            end = self._try_stretch(now_ns)
            if end is not None:
                return end
        throttle = self.dp_interval > 1 and self.pass_index % self.dp_interval != 0
        stats = self.ranks[0].stats
        before = stats.committed_prompt_tokens
        group = self.group
        capture = self.fpm is not None
        while True:
            if group is not None:
                group.begin(now_ns)
            outcome = PassOutcome()
            duration = 0
            planned = []
            for rank in self.ranks:
                if capture:
                    rank.fpm = []
                if not rank.has_work():
                    continue
                planned.append(rank)
                d = rank.plan(now_ns, outcome, throttle)
                if d > duration:
                    duration = d
            # A deferred round that moved nothing is retried at once, one round down.
            if outcome.effective() or group is None or not group.retry():
                break
        self.committed = stats.committed_prompt_tokens - before
        if not outcome.effective():
            return None  # nothing can move until the worker is poked
        if group is not None:
            group.end(1)
        if capture:
            from kvreplay.engine.scaling_metrics import capture_pass

            self.fpm = capture_pass(self, duration, planned)
        self.pass_index += 1
        self.busy = True
        self.outcome = outcome
        self.pass_start = now_ns
        self.pass_end = now_ns + duration
        return self.pass_end

    def _pure_passes(self) -> int:
        """How many upcoming passes are pure decode passes (0 when the next one is not)."""
        k = 1 << 62
        if self.own is not None:
            return _own_pure_passes(self.own, k, self.ticks is None)
        assert self.vllm is not None
        any_running = False
        growing: list[tuple[Rank, int]] = []
        for rank in self.vllm:
            if _holds_stretches(rank):
                return 0
            if not rank.running:
                continue
            any_running = True
            k, tightest = self._rank_stretch(rank, k)
            if k < MIN_STRETCH:
                return 0
            if tightest < 1 << 62:
                growing.append((rank, tightest))
        for rank, tightest in growing:
            if k > tightest:
                k = _affordable(rank, k, tightest)
        if k < MIN_STRETCH:
            return 0
        return k if any_running else 0

    def _rank_stretch(self, rank: Rank, k: int) -> tuple[int, int]:
        """(k capped by this rank's decoding requests, the least slack of a request allowed to
        grow past it, or 1 << 62); k is 0 when one of them is not in a pure decode."""
        bs = rank.block_size
        limit = rank.max_model_len
        # Under fixed timing a stretch may also cross block boundaries (see _grows), as far as
        # the ranks' free capacity holds the new blocks.
        # Not under telemetry: a command reaching the rank mid-stretch (a request placed, a P/D
        # destination accepted) reads its gauges, and a stretch allocates its blocks at its
        # end, so a block a pass in flight took would be missing from them.
        may_grow = (self.fixed_timing and rank.host is None and rank.pool.pending is None
                    and self.ticks is None and rank.states is None)
        checkpoints = rank.states is not None and rank.caching
        caching = rank.caching
        tightest = 1 << 62
        for seq in rank.running:
            generated = seq.generated
            computed = seq.computed
            known = seq.input_length + generated
            if computed != known - 1 or not generated:
                return 0, tightest
            left = seq.max_output - generated
            if limit is not None and limit - known < left:
                left = limit - known
            slack = len(seq.blocks) * bs - computed
            if checkpoints:  # hybrid KV: the pass reaching a boundary publishes a checkpoint
                slack -= 1
            if slack >= left:
                left -= 1  # the pass emitting the last token is not pure
            elif may_grow and (not caching or seq.req.output is None):  # see _grows
                left -= 1
                if slack < tightest:
                    tightest = slack
            else:
                left = slack
            if left < k:
                k = left
                if k < MIN_STRETCH:
                    return k, tightest
        return k, tightest

    def _try_stretch(self, now_ns: int) -> int | None:
        plan = None
        if self.vllm is not None and self.vllm[0].mtp is not None:
            plan = self._mtp_plan()
            if plan is None:
                return None
            k = plan.k
        else:
            k = self._pure_passes()
        if k < MIN_STRETCH:
            return None
        for rank in self.ranks:
            if rank.compute_not_before > now_ns:  # a G2 fence delays the next pass
                return None
        d = 0
        durations: list[int] = []
        ends: list[int] | None = None
        if self.fixed_decode_ns is not None:
            d = self.fixed_decode_ns
        elif self.fixed_timing:
            d = max(rank.timer.decode_ns(0) for rank in self.ranks if rank.running)
        elif plan is not None:
            assert plan.durations is not None
            durations = plan.durations
            ends = list(accumulate(durations, initial=now_ns))
            del ends[0]
        else:
            # Pass j of the stretch: each decoding request has j more tokens; the worker's pass
            # lasts as long as its slowest rank's.
            series = [rank.timer.decode_series(
                          sum(s.input_length + s.generated for s in rank.running),
                          len(rank.running), k)
                      for rank in self.ranks if rank.running]
            durations = series[0] if len(series) == 1 else list(map(max, *series))
            ends = list(accumulate(durations, initial=now_ns))
            del ends[0]
        k = self._cut(now_ns, k, d, ends, durations)
        if not k:
            return None
        if self.fpm is not None:
            from kvreplay.engine.scaling_metrics import capture_stretch

            self.fpm = capture_stretch(self)
        self.busy = True
        self.outcome = None
        self.committed = 0
        self.pass_start = now_ns
        self.stretch_k = k
        self.stretch_d = d
        self.stretch_ends = ends
        self.mtp_plan = plan
        self.stretch_waiting = [bool(rank.waiting) for rank in self.ranks]
        if ends is None:
            return now_ns + k * d
        self.stretch_durations = durations
        return ends[-1]

    def _mtp_plan(self) -> MtpPlan | None:
        """The MTP stretch the worker may run now (None: a single pass). Not with scaling's
        per-pass metrics (an MTP pass's tokens are bursts)."""
        assert self.vllm is not None
        if self.fpm is not None:
            return None
        for rank in self.vllm:
            if _holds_stretches(rank):
                return None
        return plan_stretch(self.vllm, self.fixed_timing, self.ticks is not None)

    def _cut(self, now_ns: int, k: int, d: int, ends: list[int] | None,
             durations: list[int]) -> int:
        """The stretch's pass count once cut (`ends` and `durations` with it) at a scaling
        tick or the time cap and at telemetry's first tick after its first pass end; 0: too
        short to stretch."""
        horizon = self.horizon if self.horizon < self.time_cap else self.time_cap
        if (now_ns + k * d if ends is None else ends[-1]) > horizon:
            # A policy tick comes first: the stretch stops at its last pass end before it (the
            # tick sees every pass that ended by then, scaling_metrics.py); so does the cap.
            k = (horizon - now_ns) // d if ends is None else bisect_right(ends, horizon)
            if k < MIN_STRETCH:
                return 0
            if ends is not None:
                del ends[k:]
                del durations[k:]
        if self.ticks is not None:  # telemetry: the stretch ends by the first tick after its
            # first pass end, so samples equal step by step (telemetry.py)
            if ends is None:
                cap = self.ticks(now_ns + d)
                if cap is not None and (cap - now_ns) // d < k:
                    k = (cap - now_ns) // d
            else:
                cap = self.ticks(ends[0])
                if cap is not None and (j := bisect_right(ends, cap)) < k:
                    k = j
                    del ends[j:]
                    del durations[j:]
        return k

    def next_boundary(self, now_ns: int) -> int:
        """The first pass end at or after now_ns of the pass or stretch in flight (busy only)."""
        if not self.stretch_k:
            return self.pass_end
        start = self.pass_start
        if self.stretch_ends is None:
            d = self.stretch_d
            j = max(1, -(-(now_ns - start) // d))
            return start + min(j, self.stretch_k) * d
        j = max(1, bisect_left(self.stretch_ends, now_ns) + 1)
        return self.stretch_ends[min(j, self.stretch_k) - 1]

    # -- cutting and finishing -------------------------------------------------------------------

    def sync(self, now_ns: int) -> int | None:
        """New work at now_ns: cut a stretch after the pass in flight; return its new end."""
        if not self.stretch_k:
            return None
        k = self.stretch_k
        start = self.pass_start
        if self.stretch_ends is None:
            d = self.stretch_d
            j = max(1, -(-(now_ns - start) // d))
            if j >= k:
                return None
            self.stretch_k = j
            self.version += 1
            return start + j * d
        j = max(1, bisect_left(self.stretch_ends, now_ns) + 1)
        if j >= k:
            return None
        self.stretch_k = j
        del self.stretch_ends[j:]
        del self.stretch_durations[j:]
        self.version += 1
        return self.stretch_ends[-1]

    def complete(self) -> PassOutcome | None:
        """The pass (or stretch) in flight ends; return the outcome of a single pass to deliver."""
        self.busy = False
        if self.stretch_k:
            self._materialize()
            return None
        for rank in self.ranks:
            if rank.running or rank.waiting or rank.connector or rank.pending:
                break
        else:
            # The DP step counter restarts when the whole group is drained at a pass end (a
            # request that arrived during the pass keeps the count going; as the reference).
            self.pass_index = 0
            if self.group is not None:
                self.group.drained(self.pass_end)
        outcome = self.outcome
        self.outcome = None
        return outcome

    def _materialize(self) -> None:
        j = self.stretch_k
        start = self.pass_start
        d = self.stretch_d
        ends = self.stretch_ends
        if self.mtp_plan is not None:
            apply_stretch(self.mtp_plan, j, start, d, ends, self.stretch_durations)
            self.mtp_plan = None
            self._stretch_done(j)
            return
        tail, full = _shared_gaps(self.stretch_durations) if ends is not None and j > 1 else (
            None, None)
        uniform = ends is None  # fixed timing: every pass lasts d
        d_ms = ns_to_ms(d)
        first_end = start + d if ends is None else ends[0]
        last = start + j * d if ends is None else ends[-1]
        first_ms = ns_to_ms(first_end)
        last_ms = ns_to_ms(last)
        own = self.own
        if own is not None:
            for stretching in own:
                stretching.advance_stretch(j)
        elif uniform:
            assert self.vllm is not None
            _grow_through(self.vllm, j)
        for rank in self.ranks:
            bs = rank.block_size
            caching = rank.caching and own is None
            for seq in rank.running:
                g0 = seq.generated
                generated = g0 + j
                seq.generated = generated
                seq.computed += j
                rec = seq.rec
                runs = rec.itl_gaps
                first_gap = first_end - seq.last_token_ns
                if uniform and first_gap == d:  # emitted at the stretch start: j gaps of d
                    add_run(runs, d_ms, j)
                elif full is not None and first_gap == full.durations[0]:
                    runs.append(full)  # emitted at the stretch start: every pass's duration
                else:
                    add_run(runs, ns_to_ms(first_gap), 1)
                    if tail is not None:
                        runs.append(tail)
                    elif j > 1:
                        add_run(runs, d_ms, j - 1)
                if g0 == 1:
                    rec.second_token_ms = first_ms
                seq.last_token_ns = last
                rec.last_token_ms = last_ms
                rec.output_length = generated
                if caching and seq.computed // bs > seq.registered:
                    assert isinstance(rank, Rank)
                    rank.register_through(seq, seq.computed // bs)
        self._stretch_done(j)

    def _stretch_done(self, j: int) -> None:
        if self.vllm is not None:
            for rank, waited in zip(self.vllm, self.stretch_waiting, strict=True):
                if rank.running:
                    rank.decode_passes(self.pass_index, j, self.dp_interval, waited)
        if self.group is not None:
            self.group.end(j)
        self.pass_index += j
        self.stretch_k = 0
        self.stretch_ends = None
        self.stretch_durations = []


def _shared_gaps(stretch_durations: list[int]) -> tuple[SharedGaps, SharedGaps]:
    """Polynomial timing: the gaps after each request's first one are the stretch's pass
    durations, the same for every request, so they are stored once: (every pass after the
    first, every pass)."""
    durations = array("i" if max(stretch_durations) < 1 << 31 else "q",
                      stretch_durations)  # 4 bytes a pass below 2.1 s
    return SharedGaps(durations, 1), SharedGaps(durations, 0)


# -- stretches across block boundaries (fixed timing) ---------------------------------------------

# _grows: a request's stretch may run past its last block when the blocks it fills get
# identities no router sees and nothing else shares (`not rank.caching or seq.req.output is
# None`; delta sessions' output blocks can be hit by a later prompt, so they are registered pass
# by pass), on a rank without G2 under fixed timing (tested inline in Worker._pure_passes).


def _demand(rank: Rank, passes: int) -> int:
    """New blocks the rank's running requests need over the next `passes` decode passes."""
    bs = rank.block_size
    need = 0
    for seq in rank.running:
        more = -(-(seq.computed + passes) // bs) - len(seq.blocks)
        if more > 0:
            need += more
    return need


def _affordable(rank: Rank, k: int, tightest: int) -> int:
    """The most passes, up to k, whose new blocks fit the rank's free capacity (`tightest`: the
    least slack of a request that may grow): a stretch never evicts (an eviction can publish a
    router event and changes what a later lookup finds)."""
    pool = rank.pool
    free = pool.capacity - pool.n_copies
    if free <= 0:  # a full pool (cached blocks count): the first new block would evict
        return tightest
    if _demand(rank, k) <= free:
        return k
    # The pass that needs block free + 1 ends the stretch before it: request by request, the
    # passes needing a new block are slack + 1, slack + 1 + bs, ...
    bs = rank.block_size
    needs = [len(seq.blocks) * bs - seq.computed + 1 for seq in rank.running]
    heapify(needs)
    for _ in range(free):
        heapreplace(needs, needs[0] + bs)
    return needs[0] - 1


def _grow_through(ranks: list[Rank], j: int) -> None:
    """Allocate and register the blocks j stretch passes fill, in the order j single passes
    would (pass by pass, rank by rank, request by request): free handles and fresh identities
    go to the same blocks as step by step. Before the stretch's tokens are counted in; nothing
    to do when no request crosses a block boundary (the stretch's end registers its blocks)."""
    crossing = [(rank, seq) for rank in ranks for seq in rank.running
                if seq.computed + j > len(seq.blocks) * rank.block_size]
    if not crossing:
        return
    if len(ranks) == 1 and len(ranks[0].running) == 1:
        _grow_one(*crossing[0], j)
        return
    events: list[tuple[int, int, int, int]] = []  # (pass, rank, request, 0 allocate / 1 full)
    for r, rank in enumerate(ranks):
        bs = rank.block_size
        for i, seq in enumerate(rank.running):
            # Pass p computes token c + p - 1: it needs a new block when that token starts
            # one, and fills a block when c + p is a multiple of bs.
            c = seq.computed
            if c + j > len(seq.blocks) * bs:
                events.append((len(seq.blocks) * bs - c + 1, r, i, 0))
            if rank.caching and (c + j) // bs > seq.registered:
                events.append((bs - c % bs, r, i, 1))
    heapify(events)
    while events:
        p, r, i, kind = heappop(events)
        rank = ranks[r]
        seq = rank.running[i]
        bs = rank.block_size
        if kind == 0:
            rank.pool.allocate(1, seq.blocks)
        else:
            rank.register_through(seq, (seq.computed + p) // bs)
        if p + bs <= j:
            heappush(events, (p + bs, r, i, kind))


def _grow_one(rank: Rank, seq: Seq, j: int) -> None:
    """_grow_through for one request: its allocations and registrations touch no other, so
    they run in two batches."""
    bs = rank.block_size
    rank.pool.allocate(-(-(seq.computed + j) // bs) - len(seq.blocks), seq.blocks)
    if rank.caching and (seq.computed + j) // bs > seq.registered:
        rank.register_through(seq, (seq.computed + j) // bs)


def _own_pure_passes(ranks: list[StretchRank], k: int, grow: bool) -> int:
    """_pure_passes over ranks that state their own stretches: the fewest any allows (0 when
    one allows none), and none when no request runs."""
    any_running = False
    for rank in ranks:
        k = rank.stretch_passes(k, grow)
        if k < MIN_STRETCH:
            return 0
        any_running = any_running or bool(rank.running)
    return k if any_running else 0


def _holds_stretches(rank: Rank) -> bool:
    """The rank's next pass is not a pure decode pass whatever its requests' lengths: it may
    admit, a P/D destination waits, a G2 copy is due, or a prompt is still being computed."""
    if rank.states is not None and not rank.states.stretchable(rank.running):
        return True  # hybrid KV: a checkpoint awaits its copy (the general path takes it)
    if rank.groups is not None:
        return True  # KV cache groups: every step checks its pages (the general path)
    running = rank.running
    if (rank.waiting or (rank.connector and rank.connector_ready())) and (
            len(running) < rank.max_seqs):
        return True
    if rank.pending:  # each pass end retries a waiting P/D destination
        return True
    host = rank.host
    if host is not None and not host.quiet(running):
        return True
    if not running:
        return False
    if len(running) > rank.budget:
        return True
    newest = running[-1]  # a prompt still being computed is usually the last admitted
    return newest.computed != newest.input_length + newest.generated - 1
