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


class Pool:
    """One role's workers, their schedulers (worker * dp_size + rank) and router."""

    __slots__ = ("block_size", "index", "name", "queue", "ranks", "role", "router", "workers")

    def __init__(self, role: Role, first_gid: int, identities: BlockIdentities,
                 stats: RankStats, record_events: bool) -> None:
        self.name = "agg" if role.name == "aggregated" else role.name
        self.role = role
        self.block_size = role.block_size
        self.ranks: list[RankScheduler] = []
        self.workers: list[Worker] = []
        for w in range(role.workers):
            ranks = make_ranks(role, self.name, w, w * role.dp_size, identities, record_events,
                               stats)
            self.ranks.extend(ranks)
            self.workers.append(Worker(first_gid + w, self.name, w, ranks,
                                       role.prefill_schedule_interval))
        self.index: KvIndex | None = None
        self.queue: RouterQueue[Queued] | None = None  # the KV router's queue (first pool)
        self.router: Router = RoundRobinRouter(self.name, self.ranks, role.workers, role.dp_size,
                                               flattened=role.name != "aggregated")

    def worker_of(self, rank: RankScheduler) -> Worker:
        return self.workers[rank.worker_id]


def build_pools(spec: Spec, identities: BlockIdentities, stats: RankStats) -> list[Pool]:
    """The pools of a spec's roles, in role order (worker gids run on across pools)."""
    kv = spec.router.policy == "kv_router"
    pools = []
    gid = 0
    for role in spec.roles:
        # Only schedulers whose KV feeds an overlap-aware router publish events.
        pool = Pool(role, gid, identities, stats, kv and role.name != "decode")
        gid += role.workers
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
