"""What a scaling policy observes at a tick besides the worker counts (engine.md, Scaling).

Forward-pass metrics (FPM) *(ref)*: every pass of a worker publishes, for each of its DP ranks
(an idle rank too), at the pass end: the prefill chunks it scheduled (prompt lengths, the prompt
tokens computed before, the tokens computed), the decode steps (known lengths), the requests
waiting after its admission (fresh prompts; preempted or handed-off requests as decode work;
with G2, those waiting on a copy too, in a pass their rank takes part in: a rank whose only
requests sleep on copies publishes zeros) and the pass's duration. A tick sees the latest
publication of each (worker, rank) of the pool since the previous tick, and an idle one for a
rank of an active worker that published nothing for a whole second (on a one-second cadence
from its last publication).

Traffic *(ref)*, over the window since the previous tick: requests offered (arrivals); the
completed requests' mean prompt and output lengths, TTFT and mean ITL (ITL only with two tokens
or more); the KV router's placements' mean overlap / prompt blocks; visible tokens per request
forward (accept length; 1 without speculation).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvreplay.engine.sequence import PREEMPTED

if TYPE_CHECKING:
    from kvreplay.engine.ranks import RankScheduler
    from kvreplay.engine.sequence import Seq
    from kvreplay.engine.worker import Worker

IDLE_NS = 1_000_000_000  # an idle rank's FPM cadence (1 s)
# One rank's part of a pass: what it scheduled (each request, its known length, its (tokens,
# prompt tokens, prompt before)), its queued prefills (prompt lengths) and queued decodes (known
# lengths). The figures are computed at the tick, for the latest part of each rank only.
Scheduled = list[tuple["Seq", int, tuple[int, int, int]]]
RankPass = tuple[Scheduled, list[int], list[int]]
# A worker's captured pass: its duration (ns; -1 for a stretch, known at its end) and each
# rank's part.
Captured = tuple[int, list[RankPass]]
IDLE: RankPass = ([], [], [])
SILENT: RankPass = ([], [], [])  # a rank that publishes nothing for its worker's pass
DECODE_STEP = (1, 0, 0)


def _queued(rank: RankScheduler) -> tuple[list[int], list[int]]:
    """The rank's waiting work: fresh prompts, and decode work (preempted requests, P/D
    handoffs waiting for admission or for their reservation; on SGLang, reserved ones whose
    prefill runs too, and activated ones not yet running)."""
    waiting = rank.waiting
    if rank.is_decode:  # a P/D destination counts its prompt, even once preempted (ref)
        decodes = [seq.input_length for seq in waiting]
        decodes.extend(seq.input_length for seq in rank.pending)
        decodes.extend(seq.input_length for seq in rank.inbound)
        decodes.extend(seq.input_length for seq in rank.connector)
        decodes.extend(seq.input_length for seq in getattr(rank, "ready", ()))
        return [], decodes
    if getattr(rank, "retracts", False):  # SGLang: a retracted request waits with its tokens
        return ([seq.input_length for seq in waiting if not seq.generated],
                [seq.input_length + seq.generated for seq in waiting if seq.generated])
    prefills = [seq.input_length for seq in waiting if seq.status != PREEMPTED]
    decodes = ([seq.input_length + seq.generated for seq in waiting if seq.status == PREEMPTED]
               if len(prefills) < len(waiting) else [])
    connector = rank.connector  # G2: requests waiting on a restore count as waiting (ref)
    if connector:
        prefills += [seq.input_length for seq in connector if seq.status != PREEMPTED]
        decodes += [seq.input_length + seq.generated for seq in connector
                    if seq.status == PREEMPTED]
    return prefills, decodes


def capture_pass(worker: Worker, duration_ns: int, planned: list[RankScheduler]) -> Captured:
    """A single pass just planned: each rank's part (Rank.plan kept what it scheduled; a rank
    idle in its worker's pass publishes zeros, as the reference, except in a pass of no
    duration, one that only rejects: a rank with no work then publishes nothing (ref))."""
    out: list[RankPass] = []
    for rank in worker.ranks:
        if not duration_ns and rank not in planned:
            out.append(SILENT)
            continue
        scheduled = rank.fpm
        if scheduled is None or (not scheduled and rank not in planned):
            # A rank with no work of its own this pass publishes zeros, even with G2 waiters
            # asleep on copies (a restore in flight, a pending store): they count in a pass
            # the rank takes part in only (ref).
            out.append(IDLE)
            continue
        out.append((scheduled, *_queued(rank)))
    return duration_ns, out


def prompted(captured: Captured) -> set[Seq]:
    """The requests a captured pass computed prompt tokens for: the token each emits rides a
    prefill chunk, not a decode forward."""
    return {seq for scheduled, _, _ in captured[1] for seq, _, entry in scheduled if entry[1]}


def stretch_wall(worker: Worker) -> int:
    """The duration of the last pass of the worker's stretch in flight, or -1 (a single pass)."""
    if not worker.stretch_k:
        return -1
    ends = worker.stretch_ends
    return worker.stretch_d if ends is None else worker.stretch_durations[-1]


def capture_stretch(worker: Worker) -> Captured:
    """A stretch about to start: its queues (nothing joins them while it runs, or it is cut);
    its passes' decode lengths are known from the running requests when it ends."""
    return -1, [([], *_queued(rank)) if rank.has_work() else IDLE for rank in worker.ranks]


class Welford:
    """count / sum / population variance, in the reference's order of operations."""

    __slots__ = ("count", "m2", "mean", "total")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        self.mean = 0.0
        self.m2 = 0.0

    def add(self, v: float) -> None:
        self.count += 1
        self.total += v
        delta = v - self.mean
        self.mean += delta / self.count
        self.m2 += delta * (v - self.mean)

    def variance(self) -> float:
        return self.m2 / self.count if self.count else 0.0


def snapshot_of(worker_id: int, dp_rank: int, wall_ns: int, part: RankPass) -> dict[str, Any]:
    """One (worker, rank)'s FPM in the reference's snapshot keys."""
    scheduled, queued_prefills, queued_decodes = part
    prefill = Welford()
    decode = Welford()
    prefill_tokens = prefill_kv = 0
    for seq, known, (used, prompt_tokens, before) in scheduled:
        if not used and not seq.max_output:
            continue  # a request with no output whose prompt is cached computes nothing (ref)
        if prompt_tokens > 0:
            prefill_tokens += used
            prefill_kv += before
            prefill.add(float(seq.input_length))
        else:
            decode.add(float(known))
    qp = Welford()
    for length in queued_prefills:
        qp.add(float(length))
    qd = Welford()
    for length in queued_decodes:
        qd.add(float(length))
    return {
        "worker_id": worker_id, "dp_rank": dp_rank, "wall_time": wall_ns / 1e9,
        "num_prefill_requests": prefill.count, "sum_prefill_tokens": prefill_tokens,
        "var_prefill_length": prefill.variance(), "sum_prefill_kv_tokens": prefill_kv,
        "num_decode_requests": decode.count, "sum_decode_kv_tokens": int(decode.total),
        "var_decode_kv_tokens": decode.variance(),
        "num_queued_prefill": qp.count, "sum_queued_prefill_tokens": int(qp.total),
        "var_queued_prefill_length": qp.variance(),
        "num_queued_decode": qd.count, "sum_queued_decode_kv_tokens": int(qd.total),
        "var_queued_decode_kv_tokens": qd.variance(),
    }


class FpmBuffer:
    """One pool's latest FPM per (worker, rank) since the last tick, and each rank's last
    publication time (the idle cadence)."""

    __slots__ = ("dp_size", "last", "latest")

    def __init__(self, dp_size: int) -> None:
        self.dp_size = dp_size
        # (worker, rank) -> (wall ns, its part): snapshots are built at the tick, only for the
        # latest publication of each rank (a pass's figures cost what its queues hold).
        self.latest: dict[tuple[int, int], tuple[int, RankPass]] = {}
        self.last: dict[tuple[int, int], int] = {}

    def activate(self, worker_id: int, now: int) -> None:
        for r in range(self.dp_size):
            self.last.setdefault((worker_id, r), now)

    def publish(self, worker: Worker, stretch_wall: int, now: int) -> None:
        """The worker's pass ended at `now` (`stretch_wall`: the last pass's duration when it
        was a stretch, whose requests now hold every token of it; else -1)."""
        captured = worker.fpm
        if not isinstance(captured, tuple):
            return
        wall, parts = captured
        first = worker.ranks[0]
        if not wall and stretch_wall < 0 and first.host is not None and not first.is_decode \
                and not any(part[0] for part in parts):
            # A G2 wake-up that ran nothing (its waiters still sleeping on copies) is no
            # forward pass: it publishes nothing (ref; a P/D decode pass that moves nothing
            # does publish).
            worker.fpm = []
            return
        if stretch_wall >= 0:  # the stretch's last pass: a decode step of each running request
            wall = stretch_wall
            parts = [([(seq, seq.input_length + seq.generated - 1, DECODE_STEP)
                       for seq in rank.running], qp, qd)
                     for rank, (_, qp, qd) in zip(worker.ranks, parts, strict=True)]
        worker.fpm = []  # captured again at the next pass
        for r, part in enumerate(parts):
            if part is SILENT:
                continue
            key = (worker.worker_id, r)
            self.latest[key] = (wall, part)
            self.last[key] = now

    def take(self, active: list[int], now: int) -> list[dict[str, Any]]:
        """The tick's snapshots: stale ranks of active workers get an idle one; ranks of
        workers no longer active are dropped (the reference's order: by worker, rank)."""
        keep = set(active)
        self.latest = {key: v for key, v in self.latest.items() if key[0] in keep}
        self.last = {key: v for key, v in self.last.items() if key[0] in keep}
        for w in active:
            for r in range(self.dp_size):
                key = (w, r)
                last = self.last.setdefault(key, now)
                elapsed = now - last
                if elapsed >= IDLE_NS:
                    self.last[key] = last + elapsed // IDLE_NS * IDLE_NS
                    self.latest[key] = (0, IDLE)
        out = [snapshot_of(w, r, *self.latest[(w, r)]) for w, r in sorted(self.latest)]
        self.latest = {}
        return out


class Traffic:
    """The traffic window between two ticks (the reference's TrafficAccumulator)."""

    __slots__ = ("accept_forwards", "accept_tokens", "hit_count", "hit_total", "isl", "itl",
                 "itl_count", "offered", "osl", "shape_count", "start_ms", "ttft", "ttft_count")

    def __init__(self) -> None:
        self.start_ms = 0.0
        self._reset()

    def _reset(self) -> None:
        self.offered = 0
        self.isl = self.osl = self.shape_count = 0
        self.ttft = self.itl = 0.0
        self.ttft_count = self.itl_count = 0
        self.hit_total = 0.0
        self.hit_count = 0
        self.accept_tokens = self.accept_forwards = 0

    def completed(self, input_tokens: int, output_tokens: int, ttft_ms: float | None,
                  mean_itl_ms: float | None) -> None:
        self.isl += input_tokens
        self.osl += output_tokens
        self.shape_count += 1
        if ttft_ms is not None:
            if ttft_ms > 0.0:
                self.ttft += ttft_ms
                self.ttft_count += 1
            if output_tokens > 1 and mean_itl_ms is not None and mean_itl_ms >= 0.0:
                self.itl += mean_itl_ms
                self.itl_count += 1

    def admitted(self, overlap_blocks: int, isl_blocks: int) -> None:
        if isl_blocks:
            self.hit_total += overlap_blocks / isl_blocks
            self.hit_count += 1

    def tokens(self, visible: int, forwards: int) -> None:
        if visible and forwards:
            self.accept_tokens += visible
            self.accept_forwards += forwards

    def drain(self, now_ms: float) -> dict[str, Any]:
        shape = self.shape_count
        out = {
            "duration_s": (now_ms - self.start_ms) / 1000.0,
            "num_req": self.offered,
            "avg_isl": self.isl / shape if shape else 0.0,
            "avg_osl": self.osl / shape if shape else 0.0,
            "avg_ttft_ms": self.ttft / self.ttft_count if self.ttft_count else 0.0,
            "avg_itl_ms": self.itl / self.itl_count if self.itl_count else 0.0,
            "shape_count": shape,
            "ttft_count": self.ttft_count,
            "itl_count": self.itl_count,
            "avg_accept_length": (self.accept_tokens / self.accept_forwards
                                  if self.accept_forwards else None),
            "avg_kv_hit_rate": self.hit_total / self.hit_count if self.hit_count else 0.0,
            "hit_rate_count": self.hit_count,
            "accept_length_forward_count": self.accept_forwards,
        }
        self.start_ms = now_ms
        self._reset()
        return out
