"""Telemetry: samples of the engine's state on a cadence of simulated time (the reference's
`capture_telemetry`, docs/traces-and-reports.md "Telemetry").

A *baseline* sample once instant 0 has settled, a *periodic* sample at origin + k x interval
(k = 1, 2, ... while requests remain), and a *final* sample at the last instant the replay
handled when anything happened after the last periodic one. A sample holds:

- per rank, its gauges as of the last command to the rank (a request placed on it, a P/D
  handoff command) or the last pass end of its worker: active blocks (in use), inactive blocks
  (cached, reusable), running and waiting requests. A pass changes the scheduler's state when it
  starts, but the reference refreshes a rank's gauges only at those points, so a sample taken
  while a pass is in flight shows the state before it;
- per role, the preemptions its ranks reported in the interval (counted at those same points);
- the traffic of the interval: arrivals, completed requests (mean prompt and output lengths,
  TTFT and per-request mean ITL), the KV router's hit rate at placement (overlap blocks / prompt
  blocks, mean over decisions) and the decode forwards with their visible tokens;
- the router queue's length and the pools' worker ids.

The loop calls `refresh` at those points and `sample` at the ticks; a fast-forwarded stretch
never spans a tick (Worker.cap_ns), so every pass end a sample must see is a real one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kvreplay.engine.fleet import ACTIVE, DRAINING, REMOVED, STARTING
from kvreplay.engine.simtime import ms_to_ns, ns_to_ms

if TYPE_CHECKING:
    from kvreplay.engine.deployment import Pool
    from kvreplay.engine.fleet import Fleet
    from kvreplay.engine.mtp_stretch import MtpPlan
    from kvreplay.engine.ranks import RankScheduler
    from kvreplay.engine.records import RequestRecord
    from kvreplay.engine.scheduler import PassOutcome

BASELINE, PERIODIC, FINAL = "baseline", "periodic", "final"


def pass_forwards(outcome: PassOutcome) -> tuple[int, int]:
    """A pass's decode forwards and their visible tokens: one each, and on an MTP rank the
    drafts each accepted."""
    return outcome.forwards, outcome.forwards + outcome.accepted


def stretch_forwards(plan: MtpPlan, k: int) -> tuple[int, int]:
    """An MTP stretch's first k passes: each request's burst in each pass."""
    forwards = visible = 0
    for lane in plan.lanes:
        forwards += k * len(lane.cums)
        visible += sum(cum[k - 1] for cum in lane.cums)
    return forwards, visible


class Traffic:
    """One interval's traffic counters (the reference's telemetry traffic accumulator)."""

    __slots__ = ("accepted_tokens", "arrivals", "completed", "forwards", "hit_rate",
                 "hit_rate_count", "isl", "itl", "itl_count", "osl", "start_ms", "ttft",
                 "ttft_count")

    def __init__(self, start_ms: float) -> None:
        self.start_ms = start_ms
        self.arrivals = 0
        self.completed = 0
        self.isl = 0
        self.osl = 0
        self.ttft = 0.0
        self.ttft_count = 0
        self.itl = 0.0
        self.itl_count = 0
        self.hit_rate = 0.0
        self.hit_rate_count = 0
        self.accepted_tokens = 0
        self.forwards = 0

    def observed(self) -> bool:
        return bool(self.arrivals or self.completed or self.ttft_count or self.itl_count
                    or self.hit_rate_count or self.forwards)

    def to_json(self, now_ms: float) -> dict[str, Any]:
        done = self.completed
        return {
            "duration_s": (now_ms - self.start_ms) / 1000.0,
            "arriving_requests": self.arrivals,
            "completed_requests": done,
            "avg_isl": self.isl / done if done else 0.0,
            "avg_osl": self.osl / done if done else 0.0,
            "avg_ttft_ms": self.ttft / self.ttft_count if self.ttft_count else 0.0,
            "avg_itl_ms": self.itl / self.itl_count if self.itl_count else 0.0,
            "ttft_count": self.ttft_count,
            "itl_count": self.itl_count,
            "avg_router_kv_hit_rate": (self.hit_rate / self.hit_rate_count
                                       if self.hit_rate_count else 0.0),
            "router_kv_hit_rate_count": self.hit_rate_count,
            "avg_accept_length": self.accepted_tokens / self.forwards if self.forwards else None,
            "accept_length_forward_count": self.forwards,
        }


class Telemetry:
    """The sampler of one run."""

    __slots__ = ("ahead", "cache_counts", "cache_seen", "destinations", "done",
                 "fleets", "gauges", "interval_ms",
                 "interval_start_ms", "late", "next_ns", "ordinal", "pools", "preempted",
                 "preemptions_seen", "samples", "started", "traffic")

    def __init__(self, interval_ms: float, pools: Sequence[Pool]) -> None:
        self.interval_ms = interval_ms
        self.pools = list(pools)
        self.samples: list[dict[str, Any]] = []
        self.ordinal = 0
        self.interval_start_ms = 0.0
        self.started = False
        self.done = False  # no periodic sample is due any more
        self.next_ns: int | None = None
        self.traffic = Traffic(0.0)
        self.ahead = 0  # arrivals counted by arriving(), not yet arrived
        # Per rank (pool name, scheduler id): [active, inactive, running, waiting] as last
        # refreshed, and its preemption count then; per role, preemptions in the interval.
        self.gauges: dict[tuple[str, int], list[int]] = {}
        self.preemptions_seen: dict[tuple[str, int], int] = {}
        # P/D decode ranks: destinations accepted and not yet activated (the reference counts
        # them waiting, whether their blocks are reserved or not).
        self.destinations: dict[tuple[str, int], int] = {}
        # Gauges read now but shown only after this instant's sample (settle_late).
        self.late: list[tuple[tuple[str, int], list[int]]] = []
        self.preempted = {"prefill": 0, "decode": 0}
        # SGLang ranks' scheduler cache-hit counters: per rank as last read, per role the
        # interval's [hit tokens, total tokens].
        self.cache_seen: dict[tuple[str, int], tuple[int, int]] = {}
        self.cache_counts = {"prefill": [0, 0], "decode": [0, 0]}
        # Under a scaling policy, each pool's fleet (scaling.py): which workers a sample lists.
        self.fleets: dict[str, Fleet] | None = None
        for pool in self.pools:
            for rank in pool.ranks:
                self.join(pool.name, rank)

    def join(self, pool_name: str, rank: RankScheduler) -> None:
        """A rank to sample (at the start, or of a worker added by scaling): zeros so far."""
        key = (pool_name, rank.scheduler_id)
        self.gauges[key] = [0, 0, 0, 0, 0]
        self.preemptions_seen[key] = 0
        self.destinations[key] = 0
        self.cache_seen[key] = (0, 0)

    # -- what the loop reports --------------------------------------------------------------

    def refresh(self, scheduler: RankScheduler, late: bool = False) -> None:
        """A command reached the rank or its worker's pass ended: its gauges are read now.
        `late`: shown only after this instant's sample (a P/D prefill rank takes the instant's
        arrivals after the reference samples it)."""
        rank = scheduler
        key = (rank.pool_name, rank.scheduler_id)
        # After a late refresh of the rank, its later ones this instant come after it too.
        late = late or any(k == key for k, _ in self.late)
        gauge = [0, 0, 0, 0, 0] if late else self.gauges[key]
        if late:
            self.late.append((key, gauge))
        gauge[0], gauge[1] = rank.kv_gauges()
        gauge[2] = len(rank.running)
        gauge[3] = rank.queued_gauge() + self.destinations[key]
        groups = getattr(rank, "groups", None)  # KV cache groups (vLLM ranks): bytes in use
        if groups is not None:
            gauge[4] = groups.used
        seen = rank.preemptions
        if seen != self.preemptions_seen[key]:
            self.preempted["prefill" if rank.pool_name == "prefill" else "decode"] += (
                seen - self.preemptions_seen[key])
            self.preemptions_seen[key] = seen

    def pass_ended(self, rank: RankScheduler) -> None:
        """The rank's worker finished a pass: the scheduler cache-hit tokens of its prefill
        batches count now (the reference reads them from the pass's result)."""
        key = (rank.pool_name, rank.scheduler_id)
        hits, total = rank.cache_hit_tokens, rank.cache_total_tokens
        seen_hits, seen_total = self.cache_seen[key]
        if total != seen_total:
            counts = self.cache_counts["prefill" if rank.pool_name == "prefill" else "decode"]
            counts[0] += hits - seen_hits
            counts[1] += total - seen_total
            self.cache_seen[key] = (hits, total)

    def settle_late(self) -> None:
        for key, gauge in self.late:
            self.gauges[key] = gauge
        self.late.clear()

    def arrived(self) -> None:
        if self.ahead:
            self.ahead -= 1  # counted by arriving()
        else:
            self.traffic.arrivals += 1

    def arriving(self, n: int) -> None:
        """`n` requests arrive now, counted ahead of their arrival (a P/D scaling tick, and the
        sample before it, come between)."""
        self.traffic.arrivals += n
        self.ahead += n

    def placed(self, overlap_blocks: int, prompt_blocks: int) -> None:
        """A KV-router placement: its overlap as a share of the prompt's blocks."""
        if prompt_blocks:
            self.traffic.hit_rate += overlap_blocks / prompt_blocks
            self.traffic.hit_rate_count += 1

    def decoded(self, forwards: int, tokens: int) -> None:
        """A pass end: `forwards` decode steps of requests, `tokens` visible tokens of them."""
        if forwards and tokens:
            self.traffic.forwards += forwards
            self.traffic.accepted_tokens += tokens

    def completed(self, rec: RequestRecord) -> None:
        """A request completed (not rejected): its lengths and latencies."""
        t = self.traffic
        t.completed += 1
        t.isl += rec.input_length
        n = rec.output_length
        t.osl += n
        first = rec.first_token_ms
        if first is None:
            return
        ttft = first - rec.arrival_time_ms
        if ttft >= 0:
            t.ttft += ttft
            t.ttft_count += 1
        last = rec.last_token_ms
        if n > 1 and last is not None:
            itl = (last - first) / (n - 1)
            if itl >= 0:
                t.itl += itl
                t.itl_count += 1

    # -- the cadence ------------------------------------------------------------------------

    def tick_at_or_after(self, at_ns: int) -> int | None:
        """The first periodic tick at or after `at_ns` (None: no more ticks)."""
        if self.next_ns is None or self.next_ns >= at_ns:
            return self.next_ns
        k = max(self.ordinal, int(ns_to_ms(at_ns) // self.interval_ms))
        while k > self.ordinal and ms_to_ns(self._at_ms(k - 1)) >= at_ns:
            k -= 1
        while ms_to_ns(self._at_ms(k)) < at_ns:
            k += 1
        return ms_to_ns(self._at_ms(k))

    def _at_ms(self, ordinal: int) -> float:
        # From the origin and the ordinal, not by adding intervals (no drift, as the reference).
        return 0.0 + ordinal * self.interval_ms

    def baseline(self, now_ns: int) -> None:
        self.started = True
        self._publish(BASELINE, ns_to_ms(now_ns))
        self._arm()

    def periodic(self, workload_done: bool) -> None:
        """The tick at `next_ns` is due: sample, then arm the next one while requests remain."""
        self._publish(PERIODIC, self._at_ms(self.ordinal))
        if workload_done:
            self.next_ns = None
            self.done = True
        else:
            self._arm()

    def final(self, now_ns: int) -> None:
        now_ms = ns_to_ms(now_ns)
        if (now_ms > self.interval_start_ms or self.traffic.observed()
                or any(self.preempted.values())
                or any(counts[1] for counts in self.cache_counts.values())):
            self._publish(FINAL, now_ms)

    def _arm(self) -> None:
        self.next_ns = ms_to_ns(self._at_ms(self.ordinal))

    def _publish(self, kind: str, at_ms: float) -> None:
        first = self.pools[0]
        prefill = first.name == "prefill"
        sample: dict[str, Any] = {
            "sample_ordinal": self.ordinal,
            "kind": kind,
            "interval_start_ms": self.interval_start_ms,
            "sampled_at_ms": at_ms,
        }
        if kind == BASELINE:
            sample["traffic"] = Traffic(self.interval_start_ms).to_json(self.interval_start_ms)
            sample["traffic"]["duration_s"] = 0.0
            interval = {"prefill": _interval(0, [0, 0]), "decode": _interval(0, [0, 0])}
        else:
            sample["traffic"] = self.traffic.to_json(at_ms)
            interval = {role: _interval(n, self.cache_counts[role])
                        for role, n in self.preempted.items()}
            self.traffic = Traffic(at_ms)
            self.preempted = {"prefill": 0, "decode": 0}
            self.cache_counts = {"prefill": [0, 0], "decode": [0, 0]}
            self.interval_start_ms = at_ms
        by_role: dict[str, list[dict[str, Any]]] = {"prefill": [], "decode": []}
        ids: dict[str, dict[str, list[int]]] = {
            state: {"prefill": [], "decode": []} for state in (ACTIVE, STARTING, DRAINING)}
        for pool in self.pools:
            role = "prefill" if pool.name == "prefill" else "decode"
            fleet = None if self.fleets is None else self.fleets[pool.name]
            if fleet is None:
                by_role[role] += [self._gauge(pool, rank) for rank in pool.ranks]
                ids[ACTIVE][role] += [w.worker_id for w in pool.workers]
                continue
            # Under a scaling policy: every worker not removed yet (starting and draining
            # ones too), and the ids by state (ref).
            by_role[role] += [self._gauge(pool, rank) for rank in pool.ranks
                              if fleet.state[rank.worker_id] != REMOVED]
            for state, by in ids.items():
                by[role] += fleet.ids(state)
        pending = len(first.queue) if first.queue is not None else 0
        sample.update({
            "prefill_scheduler_metrics": by_role["prefill"],
            "decode_scheduler_metrics": by_role["decode"],
            "prefill_interval_metrics": interval["prefill"],
            "decode_interval_metrics": interval["decode"],
            "router_pending_prefill_requests": pending if prefill else 0,
            "router_pending_decode_requests": 0 if prefill else pending,
            "active_prefill_ids": ids[ACTIVE]["prefill"],
            "active_decode_ids": ids[ACTIVE]["decode"],
            "starting_prefill_ids": ids[STARTING]["prefill"],
            "starting_decode_ids": ids[STARTING]["decode"],
            "draining_prefill_ids": ids[DRAINING]["prefill"],
            "draining_decode_ids": ids[DRAINING]["decode"],
        })
        self.samples.append(sample)
        self.ordinal += 1

    def _gauge(self, pool: Pool, rank: RankScheduler) -> dict[str, Any]:
        active, inactive, running, waiting, used = self.gauges[(pool.name, rank.scheduler_id)]
        groups = getattr(rank, "groups", None)
        if groups is not None:  # KV cache groups: no blocks, pages of a byte budget
            capacity = groups.capacity
            return {"worker_id": rank.worker_id, "dp_rank": rank.dp_rank,
                    "active_blocks": active, "inactive_blocks": inactive, "total_blocks": 0,
                    "kv_cache_used_bytes": used, "kv_cache_capacity_bytes": capacity,
                    "active_cache_usage": used / capacity, "physical_cache_usage": used / capacity,
                    "running_requests": running, "waiting_requests": waiting}
        total = rank.num_blocks
        return {
            "worker_id": rank.worker_id,
            "dp_rank": rank.dp_rank,
            "active_blocks": active,
            "inactive_blocks": inactive,
            "total_blocks": total,
            "active_cache_usage": active / total,
            "physical_cache_usage": (active + inactive) / total,
            "running_requests": running,
            "waiting_requests": waiting,
        }

    def to_json(self) -> dict[str, Any]:
        return {"sample_interval_ms": self.interval_ms, "samples": self.samples}


def _interval(preemptions: int, cache: list[int]) -> dict[str, int]:
    # Scheduler cache-hit tokens are an SGLang figure: vLLM ranks report none (the reference's
    # zero denominator means "unavailable", not a measured 0%).
    return {"cache_hit_tokens": cache[0], "cache_total_tokens": cache[1],
            "preemptions": preemptions}
