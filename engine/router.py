"""Placement of requests on a pool's schedulers (engine.md section 5).

Round robin rotates over workers in id order and, per worker, over its DP ranks (checked
against the reference: with 2 workers x 2 ranks the order is (0,0) (1,0) (0,1) (1,1)).

The KV router scores every scheduler (worker * dp_size + rank):
  raw_prefill_blocks = (active_prefill_tokens + prompt tokens) / block_size
  credit = overlap_score_credit * device_overlap_blocks
  cost = prefill_load_scale * max(raw_prefill_blocks - credit, 0) + decode_blocks
         + decode_active_request_weight * requests routed there and not yet finished
where device overlap is the request's full-block prefix found in the router's index (built from
the schedulers' KV events), active prefill tokens are the uncached prompt tokens of requests
routed there whose first token has not come yet, and decode blocks are the distinct prompt
blocks of its active requests plus this request's blocks not among them. With temperature 0 the
lowest cost wins; ties go to the first tied scheduler at or after a rotating cursor that moves
past each tie winner (the reference breaks ties at random; the cursor spreads them the same way,
deterministically). With temperature > 0 a seeded softmax draw picks.

overlap_score_credit_decay fades the device credit of a scheduler whose booked prefill exceeds
the least loaded one's: credit /= 1 + decay * excess_blocks / ceil(prompt / block_size).
disk_cache_hit_weight would weigh G3 overlap, which the reference's offline router never supplies
(with G3 executed, its selector logs disk_blocks=0), so neither does this one. With a queue
threshold the pool's requests wait in the router queue (engine/router_queue.py) while every
scheduler is busy.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from kvreplay.engine.errors import EngineError
from kvreplay.engine.kv_index import KvIndex
from kvreplay.engine.ranks import RankScheduler
from kvreplay.engine.records import RoutingDecision
from kvreplay.engine.sequence import Seq
from kvreplay.schema.native_model import Router as RouterConfig

Overlaps = tuple[list[int], list[int]]


class RoundRobinRouter:
    """Aggregated: workers in turn, each worker's ranks in turn. P/D pools (`flattened`):
    scheduler ids in turn, (0,0) (0,1) (1,0) (1,1) (both checked against the reference)."""

    __slots__ = ("_next_rank", "_next_worker", "active", "dp_size", "flattened", "pool_name",
                 "ranks", "workers")

    def __init__(self, pool_name: str, ranks: Sequence[RankScheduler], workers: int, dp_size: int,
                 flattened: bool = False) -> None:
        self.pool_name = pool_name
        self.ranks = list(ranks)
        self.workers = workers
        self.dp_size = dp_size
        self.flattened = flattened
        self._next_worker = 0
        self._next_rank = [0] * workers
        # Scaling (fleet.py): the worker ids that take requests, in id order; None: every worker.
        self.active: list[int] | None = None

    def route(self, chain: list[int], input_length: int,
              seen: Overlaps | None = None) -> tuple[RankScheduler, RoutingDecision]:
        if self.active is not None:
            return self._route_active(self.active)
        if self.flattened:
            sid = self._next_worker
            self._next_worker = (sid + 1) % len(self.ranks)
            worker, rank = divmod(sid, self.dp_size)
        else:
            worker = self._next_worker
            self._next_worker = (worker + 1) % self.workers
            rank = self._next_rank[worker]
            self._next_rank[worker] = (rank + 1) % self.dp_size
        target = self.ranks[worker * self.dp_size + rank]
        return target, RoutingDecision(self.pool_name, worker, rank, target.scheduler_id)

    def _route_active(self, active: list[int]) -> tuple[RankScheduler, RoutingDecision]:
        """Round robin over the active workers (P/D: their schedulers) *(ref)*: a cursor into
        the current list, which moves one past the pick whatever the list's length."""
        if not active:
            raise NoActiveWorker(self.pool_name)
        dp = self.dp_size
        if self.flattened:
            schedulers = [w * dp + r for w in active for r in range(dp)]
            at = self._next_worker % len(schedulers)
            self._next_worker = at + 1
            worker, rank = divmod(schedulers[at], dp)
        else:
            at = self._next_worker % len(active)
            self._next_worker = at + 1
            worker = active[at]
            rank = self._next_rank[worker]
            self._next_rank[worker] = (rank + 1) % dp
        target = self.ranks[worker * dp + rank]
        return target, RoutingDecision(self.pool_name, worker, rank, target.scheduler_id)

    def grow(self, ranks: Sequence[RankScheduler]) -> None:
        """A worker joined the pool (its ranks, in order)."""
        self.ranks.extend(ranks)
        self.workers += 1
        self._next_rank.append(0)

    def forget(self, scheduler_ids: Sequence[int]) -> None:
        """A removed worker's schedulers (round robin holds nothing of them)."""

    def overlaps(self, chain: list[int]) -> Overlaps:
        """Round robin looks no prefix up."""
        n = len(self.ranks)
        return [0] * n, [0] * n

    def all_busy(self) -> bool:
        """Round robin never holds requests back."""
        return False

    def placed(self, seq: Seq, chain: list[int]) -> None:
        pass

    def first_token(self, seq: Seq) -> None:
        pass

    def release(self, seq: Seq) -> None:
        pass


class KvRouter:
    """Cost-based placement with router-side load tracking (one instance per pool)."""

    __slots__ = ("_active", "_blocks", "_cursor", "_effective", "_live", "_prefill", "_rng",
                 "assume_reuse", "block_size", "cfg", "dp_size", "index", "members", "pool_name",
                 "ranks", "track_blocks", "track_prefill")

    def __init__(self, pool_name: str, ranks: Sequence[RankScheduler], dp_size: int,
                 block_size: int, cfg: RouterConfig, index: KvIndex | None, track_prefill: bool,
                 track_blocks: bool, assume_reuse: bool) -> None:
        self.pool_name = pool_name
        self.ranks = list(ranks)
        self.dp_size = dp_size
        self.block_size = block_size
        self.cfg = cfg
        self.index = index  # None: overlap-blind (the P/D decode router)
        self.track_prefill = track_prefill
        self.track_blocks = track_blocks
        self.assume_reuse = assume_reuse
        n = len(self.ranks)
        self._prefill = [0] * n
        self._active = [0] * n  # requests routed there and not yet released
        self._blocks: list[dict[int, int]] = [{} for _ in range(n)]
        self._live: dict[Seq, tuple[int, int, list[int]]] = {}
        self._cursor = 0
        self._rng = random.Random(cfg.seed)
        self._effective = 0.0  # the placed request's device + weighted host overlap, in blocks
        # Scaling (fleet.py): the scheduler ids a request may go to; None: every scheduler.
        self.members: list[int] | None = None

    def overlaps(self, chain: list[int]) -> Overlaps:
        """(device prefix blocks, host-pinned blocks contiguous beyond it) per scheduler."""
        n = len(self.ranks)
        if self.index is None:
            return [0] * n, [0] * n
        device = self.index.overlaps(chain, n)
        return device, self.index.host_extensions(chain, device)

    def costs(self, chain: list[int], input_length: int,
              seen: Overlaps | None = None) -> tuple[list[float], list[float]]:
        """Each scheduler's cost for this request, and its effective overlap in blocks: device
        prefix + host_cache_hit_weight x host-pinned blocks contiguous beyond it. `seen`: the
        overlaps looked up earlier (a queued request keeps those of its arrival)."""
        n = len(self.ranks)
        device, host = self.overlaps(chain) if seen is None else seen
        if len(device) < n:  # looked up before a worker joined (scaling): it held nothing then
            device = device + [0] * (n - len(device))
            host = host + [0] * (n - len(host))
        weight = self.cfg.host_cache_hit_weight
        overlaps = [d + weight * h if h else float(d) for d, h in zip(device, host, strict=True)]
        bs = self.block_size
        cfg = self.cfg
        credit = cfg.overlap_score_credit
        scale = cfg.prefill_load_scale
        decay = cfg.overlap_score_credit_decay if self.track_prefill else 0.0
        least = min(self._prefill) if decay else 0
        request_blocks = -(-input_length // bs)
        per_request = cfg.decode_active_request_weight
        costs = []
        for s in range(n):
            cost = 0.0
            if self.track_prefill:
                raw = (self._prefill[s] + input_length) / bs
                device_credit = credit * device[s]
                if decay and self._prefill[s] > least:
                    # Device credit fades as the scheduler's prefill backlog exceeds the least
                    # loaded one's, measured in this request's blocks (host credit does not).
                    excess = (self._prefill[s] - least) / bs
                    device_credit /= 1.0 + decay * excess / request_blocks
                # The reference turns cache credit off altogether when overlap_score_credit is 0.
                adjusted = raw - (device_credit + weight * host[s] if credit else 0.0)
                if adjusted > 0:
                    cost = scale * adjusted
            if self.track_blocks:
                active = self._blocks[s]
                if self.assume_reuse:
                    new = sum(1 for ident in chain if ident not in active)
                else:
                    new = len(chain)
                cost += len(active) + new
            if per_request:
                cost += per_request * self._active[s]
            costs.append(cost)
        return costs, overlaps

    def all_busy(self) -> bool:
        """Every scheduler's booked prefill exceeds queue_threshold x its token budget (the
        router queue holds new requests then)."""
        threshold = self.cfg.queue_threshold
        assert threshold is not None
        members = self.members
        if members is not None:
            return all(self._prefill[s] > threshold * self.ranks[s].budget for s in members)
        return all(p > threshold * r.budget for p, r in zip(self._prefill, self.ranks,
                                                              strict=True))

    def route(self, chain: list[int], input_length: int,
              seen: Overlaps | None = None) -> tuple[RankScheduler, RoutingDecision]:
        costs, overlaps = self.costs(chain, input_length, seen)
        members = self.members
        if members is not None:
            if not members:
                raise NoActiveWorker(self.pool_name)
            keep = set(members)
            costs = [c if s in keep else math.inf for s, c in enumerate(costs)]
            overlaps = [o if s in keep else 0.0 for s, o in enumerate(overlaps)]
        chosen = self._pick(costs)
        target = self.ranks[chosen]
        self._effective = overlaps[chosen]
        selected = _round_half_up(overlaps[chosen])
        decision = RoutingDecision(
            self.pool_name, chosen // self.dp_size, chosen % self.dp_size, target.scheduler_id,
            reported_overlap_tokens=selected * self.block_size,
            selected_overlap_blocks=selected,
            best_available_overlap_blocks=max(_round_half_up(o) for o in overlaps),
        )
        return target, decision

    def grow(self, ranks: Sequence[RankScheduler]) -> None:
        """A worker joined the pool: its schedulers, with no load and nothing cached."""
        for rank in ranks:
            self.ranks.append(rank)
            self._prefill.append(0)
            self._active.append(0)
            self._blocks.append({})

    def forget(self, scheduler_ids: Sequence[int]) -> None:
        """A removed worker's schedulers leave the router's index (the reference deletes the
        worker from its indexer)."""
        if self.index is not None:
            for scheduler_id in scheduler_ids:
                self.index.clear(scheduler_id)

    def _pick(self, costs: list[float]) -> int:
        n = len(costs)
        temperature = self.cfg.temperature
        if temperature > 0:
            live = [c for c in costs if c != math.inf]  # inf: not a member (scaling)
            low, high = min(live), max(live)
            if low == high:
                weights = [1.0 if c != math.inf else 0.0 for c in costs]
            else:
                scale = 1.0 / ((high - low) * temperature)
                weights = [math.exp(-(c - low) * scale) if c != math.inf else 0.0
                           for c in costs]
            draw = self._rng.random() * sum(weights)
            acc = 0.0
            for s, w in enumerate(weights):
                acc += w
                if draw <= acc:
                    return s
            return n - 1
        best = min(costs)
        start = self._cursor
        for step in range(n):
            s = (start + step) % n
            if costs[s] == best:
                self._cursor = (s + 1) % n
                return s
        raise AssertionError("no minimum cost")

    def placed(self, seq: Seq, chain: list[int]) -> None:
        """Book the request's load on its scheduler."""
        s = seq.scheduler.scheduler_id
        tokens = 0
        if self.track_prefill:
            # The booked estimate rounds the weighted overlap in tokens (checked against the
            # reference: 33 tokens, 1 device + 7 host blocks of 4 at weight 0.75 book 8).
            cached = _round_half_up(self._effective * self.block_size)
            tokens = max(seq.input_length - cached, 0)
            self._prefill[s] += tokens
        if self.track_blocks:
            active = self._blocks[s]
            for ident in chain:
                active[ident] = active.get(ident, 0) + 1
        self._live[seq] = (s, tokens, chain if self.track_blocks else [])
        self._active[s] += 1

    def first_token(self, seq: Seq) -> None:
        """Prefill done: its prompt stops counting as prefill load."""
        live = self._live.get(seq)
        if live is not None and live[1]:
            s, tokens, chain = live
            self._prefill[s] -= tokens
            self._live[seq] = (s, 0, chain)

    def release(self, seq: Seq) -> None:
        live = self._live.pop(seq, None)
        if live is None:
            return
        s, tokens, chain = live
        self._prefill[s] -= tokens
        self._active[s] -= 1
        active = self._blocks[s]
        for ident in chain:
            left = active[ident] - 1
            if left:
                active[ident] = left
            else:
                del active[ident]


class NoActiveWorker(EngineError):
    """A request reached a pool that a scaling policy left without an active worker."""

    def __init__(self, pool_name: str) -> None:
        self.pool_name = pool_name
        super().__init__(f"no active worker in pool {pool_name} to place a request on (the "
                         "scaling policy drained or never started every worker)")


def _round_half_up(value: float) -> int:
    """Round half away from zero (the reference's f64::round): 1.5 -> 2, 0.5 -> 1."""
    return math.floor(value + 0.5)
