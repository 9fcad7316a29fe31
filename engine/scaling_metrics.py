"""What a scaling policy observes at a tick besides the worker counts (engine.md, Scaling).

Forward-pass metrics (FPM) *(ref)*: every pass of a worker publishes, for each of its DP ranks
(an idle rank too), at the pass end: the prefill chunks it scheduled (prompt lengths, the prompt
tokens computed before, the tokens computed), the decode steps (known lengths), the requests
waiting after its admission (fresh prompts; preempted or handed-off requests as decode work)
and the pass's duration. A tick sees the latest publication of each (worker, rank) of the pool
since the previous tick, and an idle one for a rank of an active worker that published nothing
for a whole second (on a one-second cadence from its last publication).

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
# One rank's part of a pass: scheduled (prompt length, prompt before, tokens, prompt tokens,
# known length) per request, queued prefills (prompt lengths), queued decodes (known lengths).
RankPass = tuple[list[tuple[int, int, int, int, int]], list[int], list[int]]


def _queued(rank: RankScheduler) -> tuple[list[int], list[int]]:
    """The rank's waiting work: fresh prompts, and decode work (preempted requests, P/D
    handoffs waiting for admission or for their reservation)."""
    prefills = []
    decodes = []
    handoffs = rank.is_decode  # a P/D destination counts its prompt, even once preempted (ref)
    for seq in rank.waiting:
        if seq.materialized or handoffs:
            decodes.append(seq.input_length)
        elif seq.status == PREEMPTED:
            decodes.append(seq.input_length + seq.generated)
        else:
            prefills.append(seq.input_length)
    decodes.extend(seq.input_length for seq in rank.pending)
    decodes.extend(seq.input_length for seq in rank.inbound)
    return prefills, decodes


def capture_pass(worker: Worker, duration_ns: int) -> tuple[int, list[RankPass], set[Seq]]:
    """A single pass just planned: each rank's part (Rank.plan kept what it scheduled), and
    the requests it schedules a decode step for (their tokens are decode forwards)."""
    out: list[RankPass] = []
    stepping: set[Seq] = set()
    for rank in worker.ranks:
        if rank.fpm is None or (not rank.has_work() and not rank.fpm):
            out.append(([], [], []))  # a rank idle in its worker's pass publishes zeros (ref)
            continue
        scheduled = []
        for seq, known, (used, prompt, before) in rank.fpm:
            scheduled.append((seq.input_length, before, used, prompt, known))
            if not prompt:
                stepping.add(seq)
        prefills, decodes = _queued(rank)
        out.append((scheduled, prefills, decodes))
    return duration_ns, out, stepping


def stretch_wall(worker: Worker) -> int:
    """The duration of the last pass of the worker's stretch in flight, or -1 (a single pass)."""
    if not worker.stretch_k:
        return -1
    ends = worker.stretch_ends
    return worker.stretch_d if ends is None else worker.stretch_durations[-1]


def capture_stretch(worker: Worker) -> tuple[int, list[RankPass], set[Seq]]:
    """A stretch about to start: its queues (nothing joins them while it runs, or it is cut);
    its passes' decode lengths are known from the running requests when it ends."""
    return -1, [([], *_queued(rank)) for rank in worker.ranks], set()


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
    for prompt_len, before, used, prompt_tokens, known in scheduled:
        if prompt_tokens > 0:
            prefill_tokens += used
            prefill_kv += before
            prefill.add(float(prompt_len))
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


def idle_snapshot(worker_id: int, dp_rank: int) -> dict[str, Any]:
    return snapshot_of(worker_id, dp_rank, 0, ([], [], []))


class FpmBuffer:
    """One pool's latest FPM per (worker, rank) since the last tick, and each rank's last
    publication time (the idle cadence)."""

    __slots__ = ("dp_size", "last", "latest")

    def __init__(self, dp_size: int) -> None:
        self.dp_size = dp_size
        self.latest: dict[tuple[int, int], dict[str, Any]] = {}
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
        wall, parts, _ = captured
        if stretch_wall >= 0:
            wall = stretch_wall
            parts = [([(s.input_length, s.input_length, 1, 0, s.input_length + s.generated - 1)
                       for s in rank.running], qp, qd)
                     for rank, (_, qp, qd) in zip(worker.ranks, parts, strict=True)]
        worker.fpm = []  # captured again at the next pass
        for r, part in enumerate(parts):
            key = (worker.worker_id, r)
            self.latest[key] = snapshot_of(worker.worker_id, r, wall, part)
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
                    self.latest[key] = idle_snapshot(w, r)
        out = [self.latest[key] for key in sorted(self.latest)]
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
