"""The deployment the loop runs: one Pool per role, with its workers, schedulers and router."""

from __future__ import annotations

from kvreplay.engine.identity import BlockIdentities
from kvreplay.engine.kv_index import KvIndex
from kvreplay.engine.ranks import RankScheduler, make_ranks
from kvreplay.engine.records import RequestRecord
from kvreplay.engine.router import KvRouter, Overlaps, RoundRobinRouter
from kvreplay.engine.router_queue import RouterQueue
from kvreplay.engine.scheduler import RankStats
from kvreplay.engine.traces.request import TraceRequest
from kvreplay.engine.worker import Worker
from kvreplay.schema.spec import Role, Spec

Router = RoundRobinRouter | KvRouter
# A request waiting in the router queue: what placing it needs, and when it queued (ns).
Queued = tuple[TraceRequest, RequestRecord, int, bool, int, Overlaps]


# A worker's gid (its identity in the loop, and its order among same-instant events): its pool's
# base, pool index << GID_SHIFT, plus its id in the pool; so every prefill worker comes before
# every decode worker, workers added by scaling included.
GID_SHIFT = 20


class Pool:
    """One role's workers, their schedulers (worker * dp_size + rank) and router."""

    __slots__ = ("_identities", "_record_events", "_stats", "block_size", "first_gid", "index",
                 "name", "queue", "ranks", "role", "router", "workers")

    def __init__(self, role: Role, first_gid: int, identities: BlockIdentities,
                 stats: RankStats, record_events: bool) -> None:
        self.name = "agg" if role.name == "aggregated" else role.name
        self.role = role
        self.block_size = role.block_size
        self.first_gid = first_gid
        self._identities = identities
        self._stats = stats
        self._record_events = record_events
        self.ranks: list[RankScheduler] = []
        self.workers: list[Worker] = []
        for _ in range(role.workers):
            self._build_worker()
        self.index: KvIndex | None = None
        self.queue: RouterQueue[Queued] | None = None  # the KV router's queue (first pool)
        self.router: Router = RoundRobinRouter(self.name, self.ranks, role.workers, role.dp_size,
                                               flattened=role.name != "aggregated")

    def worker_of(self, rank: RankScheduler) -> Worker:
        return self.workers[rank.worker_id]

    def _build_worker(self) -> Worker:
        role = self.role
        w = len(self.workers)
        ranks = make_ranks(role, self.name, w, w * role.dp_size, self._identities,
                           self._record_events, self._stats)
        self.ranks.extend(ranks)
        worker = Worker(self.first_gid + w, self.name, w, ranks, role.prefill_schedule_interval)
        self.workers.append(worker)
        return worker

    def add_worker(self) -> Worker:
        """A worker joins the pool (scaling): the next id, fresh ranks, known to the router."""
        worker = self._build_worker()
        self.router.grow(worker.ranks)
        return worker


def build_pools(spec: Spec, identities: BlockIdentities, stats: RankStats) -> list[Pool]:
    """The pools of a spec's roles, in role order (worker gids: GID_SHIFT)."""
    kv = spec.router.policy == "kv_router"
    pools = []
    for index, role in enumerate(spec.roles):
        # Only schedulers whose KV feeds an overlap-aware router publish events.
        pool = Pool(role, index << GID_SHIFT, identities, stats, kv and role.name != "decode")
        if kv:
            _kv_router(pool, spec)
        if spec.max_sim_time_ms is not None:  # a time cap ends an MTP livelock as it would
            for rank in pool.ranks:               # end the reference's
                if rank.mtp is not None:
                    rank.mtp.stall_check = False
        pools.append(pool)
    return pools


def _kv_router(pool: Pool, spec: Spec) -> None:
    role = pool.role
    cfg = spec.router
    if role.name == "decode":
        # Decode placement is load-only: no overlap credit, no prefill tracking.
        pool.router = KvRouter(pool.name, pool.ranks, role.dp_size, pool.block_size, cfg,
                               None, track_prefill=False, track_blocks=True,
                               assume_reuse=False)
        return
    pool.index = KvIndex()
    pool.router = KvRouter(pool.name, pool.ranks, role.dp_size, pool.block_size, cfg,
                           pool.index, track_prefill=True,
                           track_blocks=role.name == "aggregated", assume_reuse=True)
    if cfg.queue_threshold is not None:
        pool.queue = RouterQueue(cfg.queue_policy)
