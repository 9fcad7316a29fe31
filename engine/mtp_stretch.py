"""Fast-forwarded MTP decode stretches (engine.md sections "MTP speculative decoding" and "Event
loop", fast-forward).

A speculative rank's pass whose running requests are all decoders (each computes its dangling
token, nothing else runs or can be admitted) is fixed by the rank's random stream alone: each
request, in running order, verifies its drafts and emits 1 + the accepted ones. So a worker
whose ranks are all in that state plans the next passes at once: it draws their verifications
ahead (`MtpSampler.lookahead`: the draws stay the stream's, in the order single passes make
them) and runs as many passes as stay such passes:

- no request emits its last token (the pass that ends it is a single pass again);
- each pass's reservation (speculation._reserve: the blocks the largest bursts could fill)
  fits the capacity left by the passes before it, so nothing is preempted; it may evict
  cached blocks (the pass's own work, redone in its place when the stretch ends) unless a
  router hears of evictions;
- no delta session's output block is registered (its identity is interned, in an order other
  workers' arrivals share, and a router may hear of it); under telemetry, no block is taken
  or evicted at all (gauges read mid-stretch must see each pass's blocks);
- not on hybrid KV ranks (their working states take the general path).

Pass durations are the rank's decode duration over the known tokens of its requests, as each
pass would charge it (fixed timing: one duration). The worker schedules one completion for the
stretch; new work cuts it at a pass boundary like any stretch (worker.py). When it ends after j
passes, `apply_stretch` makes the j passes happen: the verifications used are taken (the rest
stay drawn ahead for the passes after), tokens counted, blocks allocated and registered pass by
pass, rank by rank, request by request as single passes would, and each request's token gaps
recorded as one `BurstGaps`. No pass of the stretch is an event.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from itertools import accumulate
from typing import TYPE_CHECKING

from kvreplay.engine.records import BurstGaps
from kvreplay.engine.simtime import ns_to_ms
from kvreplay.engine.speculation import _left

if TYPE_CHECKING:
    from kvreplay.engine.scheduler import Rank

MIN_STRETCH = 2
# Verification outcomes (accepted drafts) to tokens emitted.
PLUS_ONE = bytes(range(1, 257)[:255]) + b"\x00"
# A plan looks this many passes ahead at most: a stretch cut early wastes no more planning
# (its draws are kept for the passes after it).
MAX_PLAN = 512


class Lane:
    """One rank's part of a planned stretch: per request, the bursts of each pass
    (`bursts[p * n + i]`) and the tokens emitted after each pass (`cums[i][p]`)."""

    __slots__ = ("bursts", "cums", "evicts", "k", "known", "lefts", "rank")

    def __init__(self, rank: Rank, bursts: bytes, cums: list[list[int]], known: list[int],
                 lefts: list[int], evicts: bool) -> None:
        self.rank = rank
        self.bursts = bursts
        self.cums = cums  # at least as long as the passes the lane allows
        self.k = 0  # the passes it allows
        self.known = known  # each request's known tokens at the stretch start
        self.lefts = lefts  # and the tokens it may still generate
        self.evicts = evicts  # some reservation may evict cached blocks (no router hears it)


class MtpPlan:
    """A worker's planned MTP stretch: its lanes (ranks with running requests), how many passes
    it may run, and under polynomial timing each pass's duration."""

    __slots__ = ("durations", "k", "lanes")

    def __init__(self, lanes: list[Lane], k: int, durations: list[int] | None) -> None:
        self.lanes = lanes
        self.k = k
        self.durations = durations


def plan_stretch(ranks: list[Rank], fixed_timing: bool, sampled: bool) -> MtpPlan | None:
    """The stretch the worker's ranks may run now (None: the next pass is a single pass).
    The caller checked that no rank holds stretches (worker._holds_stretches). `sampled`:
    telemetry reads the ranks' gauges mid-stretch, so no pass of it may take or evict a
    block (the stretch applies its blocks at its end)."""
    k = MAX_PLAN
    lanes: list[Lane] = []
    for rank in ranks:
        if not rank.running:
            continue
        if rank.is_prefill or rank.pool.pending is not None or rank.states is not None:
            return None
        lane = _plan_rank(rank, k, sampled)
        if lane is None:
            return None
        k = lane.k
        lanes.append(lane)
    if not lanes:
        return None
    durations = None
    if not fixed_timing:
        durations = _durations(lanes, k)
    return MtpPlan(lanes, k, durations)


def _plan_rank(rank: Rank, cap: int, sampled: bool) -> Lane | None:
    """The rank's lane over at most `cap` passes (its cums cut to the passes it allows), or
    None when it allows fewer than MIN_STRETCH."""
    running = rank.running
    n = len(running)
    bs = rank.block_size
    limit = rank.max_model_len
    k = cap
    known0: list[int] = []
    lefts: list[int] = []
    for seq in running:
        generated = seq.generated
        known = seq.input_length + generated
        if not generated or seq.computed != known - 1 or len(seq.blocks) != -(-known // bs):
            return None
        left = _left(seq, known, limit)
        if left - 1 < k:  # each pass emits a token at least; the last one is not pure
            k = left - 1
            if k < MIN_STRETCH:
                return None
        known0.append(known)
        lefts.append(left)
    sampler = rank.mtp
    assert sampler is not None
    bursts = sampler.lookahead(k * n).translate(PLUS_ONE)
    guard = rank.caching
    cums: list[list[int]] = []
    for i, seq in enumerate(running):
        cum = list(accumulate(bursts[i::n]))
        # The pass whose burst reaches the tokens left ends the request: stop before it.
        p = bisect_left(cum, lefts[i])
        if p < k:
            k = p
        if sampled or (guard and seq.req.output is not None):
            # A delta session registers an interned output block when its computed tokens
            # reach the next block boundary (the pass that takes a new block): stop before it.
            p = bisect_left(cum, bs - (known0[i] - 1) % bs)
            if p < k:
                k = p
        if k < MIN_STRETCH:
            return None
        cums.append(cum)
    lane = Lane(rank, bursts, cums, known0, lefts, False)
    k = _fitting(lane, k, sampler.nextn + 1, sampled)
    if k < MIN_STRETCH:
        return None
    lane.k = k
    return lane


def _demand(lane: Lane, p: int, top: int, since_start: bool = True) -> int:
    """The blocks pass p reserves (speculation._reserve: those each request's largest burst
    could fill beyond its known tokens), plus with `since_start` those its requests took since
    the stretch started."""
    bs = lane.rank.block_size
    lefts = lane.lefts
    need = 0
    for i, known in enumerate(lane.known):
        done = lane.cums[i][p - 1] if p else 0
        reach = done + top if done + top < lefts[i] else lefts[i]
        need += -(-(known + reach) // bs) - -(-(known if since_start else known + done) // bs)
    return need


def _fitting(lane: Lane, k: int, top: int, sampled: bool) -> int:
    """The passes, up to k, whose reservations fit without preempting: pass p reserves,
    beyond each request's blocks, those its largest burst could fill, from capacity the
    passes before it took blocks from (free, and cached blocks nobody uses when an eviction
    is silent). That total only grows with p, so the passes that fit are a prefix. Sets
    lane.evicts when they need more than free capacity."""
    pool = lane.rank.pool
    free = pool.capacity - pool.n_copies
    silent = pool.events is None and not sampled
    room = pool.capacity - pool.num_active() if silent else free

    def demand(p: int) -> int:
        return _demand(lane, p, top)

    last = demand(k - 1)
    lane.evicts = last > free
    if last <= room:
        return k
    free = room
    lo, hi = 0, k - 1  # demand(hi) does not fit; find the first pass that does not
    if demand(0) > free:
        return 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if demand(mid) <= free:
            lo = mid
        else:
            hi = mid
    return hi


def _durations(lanes: list[Lane], k: int) -> list[int]:
    """Polynomial timing: each pass's duration, the slowest rank's decode over its requests'
    known tokens at that pass (as the single pass charges it)."""
    out: list[int] | None = None
    for lane in lanes:
        base = sum(lane.known)
        totals = [base] * k
        for cum in lane.cums:
            for p in range(1, k):
                totals[p] += cum[p - 1]
        decode_ns = lane.rank.timer.decode_ns
        series = [decode_ns(total) for total in totals]
        out = series if out is None else list(map(max, out, series))
    assert out is not None
    return out


def apply_stretch(plan: MtpPlan, j: int, start: int, d: int, ends: list[int] | None,
                  durations: list[int]) -> None:
    """The stretch's first j passes happen (module docstring): `d` each under fixed timing,
    else ending at `ends` and lasting `durations`."""
    for lane in plan.lanes:
        sampler = lane.rank.mtp
        assert sampler is not None
        sampler.take(j * len(lane.cums))
    _allocate_and_register(plan.lanes, j)
    first_end = start + d if ends is None else ends[0]
    last = start + j * d if ends is None else ends[j - 1]
    first_ms = ns_to_ms(first_end)
    last_ms = ns_to_ms(last)
    d_ms = ns_to_ms(d)
    shared = None if ends is None else array("q", durations[:j])
    for lane in plan.lanes:
        rank = lane.rank
        nextn = rank.mtp.nextn if rank.mtp is not None else 0
        running = rank.running
        n = len(running)
        bursts = lane.bursts
        for i, seq in enumerate(running):
            tokens = lane.cums[i][j - 1]
            g0 = seq.generated
            generated = g0 + tokens
            seq.generated = generated
            seq.computed = lane.known[i] + tokens - 1
            rec = seq.rec
            if rec.speculative_steps is not None:
                rec.speculative_steps += j
                rec.draft_tokens += nextn * j
                rec.accepted_draft_tokens += tokens - j
            rec.itl_gaps.append(BurstGaps(ns_to_ms(first_end - seq.last_token_ns), d_ms, shared,
                                          bursts[i:i + n * j:n]))
            if g0 == 1:
                rec.second_token_ms = first_ms
            seq.last_token_ns = last
            rec.last_token_ms = last_ms
            rec.output_length = generated


def _allocate_and_register(lanes: list[Lane], j: int) -> None:
    """The block work of j passes (before the stretch's tokens are counted in), in the order
    single passes do it: pass by pass, rank by rank; in a pass, the scheduler's registration of
    a block the dangling token fills (request by request), then each request's burst (token by
    token: full blocks registered, a new block allocated). Only passes whose tokens cross a
    block boundary have any."""
    work: list[tuple[int, int, int]] = []  # (pass, lane, request; -1: a reservation only)
    for r, lane in enumerate(lanes):
        bs = lane.rank.block_size
        top = 0 if lane.rank.mtp is None else lane.rank.mtp.nextn + 1
        for i, cum in enumerate(lane.cums):
            base = lane.known[i] - 1  # tokens computed at the stretch start
            total = cum[j - 1]
            boundary = (base // bs + 1) * bs  # the first multiple of bs past them
            while boundary <= base + total:
                work.append((bisect_left(cum, boundary - base, 0, j), r, i))
                boundary += bs
            if lane.evicts:
                _reserving(work, r, lane, i, j, top)
    if not work:
        return
    work.sort()
    at = 0
    while at < len(work):
        p, r, _ = work[at]
        group = []
        while at < len(work) and work[at][0] == p and work[at][1] == r:
            group.append(work[at][2])
            at += 1
        _pass_blocks(lanes[r], p, sorted({i for i in group if i >= 0}))


def _reserving(work: list[tuple[int, int, int]], r: int, lane: Lane, i: int, j: int,
               top: int) -> None:
    """Add the passes (of the first j) whose reservation takes a block for request i: those
    starting with its last block full or with fewer free slots in it than its largest burst,
    while its output reaches past that block."""
    bs = lane.rank.block_size
    known = lane.known[i]
    cum = lane.cums[i]  # pass p > 0 starts with known + cum[p - 1] tokens known
    end = known + lane.lefts[i]
    last = known + (cum[j - 2] if j > 1 else 0)
    boundary = -(-known // bs) * bs
    while boundary < end and boundary <= last + top:
        if boundary - top < known <= boundary:
            work.append((0, r, -1))
        lo = bisect_left(cum, boundary - top + 1 - known, 0, j - 1)
        hi = bisect_left(cum, boundary + 1 - known, 0, j - 1)
        work.extend((q + 1, r, -1) for q in range(lo, hi))
        boundary += bs


def _pass_blocks(lane: Lane, p: int, requests: list[int]) -> None:
    """Pass p's block work on one rank for the requests whose tokens cross a boundary in it
    (scheduler._schedule_running's registration, the step's reservation when the stretch
    evicts, then speculation._append's, in order)."""
    rank = lane.rank
    bs = rank.block_size
    caching = rank.caching
    running = rank.running
    n = len(running)
    starts = []
    for i in requests:
        known = lane.known[i] + (lane.cums[i][p - 1] if p else 0)
        starts.append(known)
        if caching and known % bs == 0:
            rank.register_through(running[i], known // bs)
    pool = rank.pool
    if lane.evicts:
        assert rank.mtp is not None
        pool.make_room(_demand(lane, p, rank.mtp.nextn + 1, since_start=False))
    for i, known in zip(requests, starts, strict=True):
        seq = running[i]
        for _ in range(lane.bursts[p * n + i]):
            if caching and known // bs > seq.registered:
                rank.register_through(seq, known // bs)
            known += 1
            if len(seq.blocks) * bs < known:
                pool.allocate(1, seq.blocks)
