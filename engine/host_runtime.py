"""G2 in the event loop: building the pools, moving copies, delivering completions, publishing.

Pools: a `dp_rank_local` role gets one private pool per DP rank; every `cluster_shared` role
(aggregated, prefill and decode alike) joins one deployment pool, whose participants must agree
on its contract (layout id, TP, block size and bytes, capacity, pool bandwidths). Every replay
starts cold.

Copies are submitted at engine boundaries: loads at the pass start that queued them, stores at
the end of the pass that reserved them. A copy's physical completion is an event of its own
(before pass completions at the same instant; stores before loads, then transfer id): it applies
the pool effect at once (residency, pins, router events) whoever owns it, and the owner rank
sees it at its next engine boundary: its pass end, or at once when its worker is idle (it then
wakes and may start a pass). Every participant of a pool sees every copy of it for P/D
destination retries (the capacity generation and the retry due): an idle one at once, a busy one
at its pass end. A completion that the owner must act on also cuts a fast-forwarded
decode stretch at its next pass boundary, exactly where the step-by-step path would see it.

Router: a rank's host_pinned events are published at its next engine boundary (an idle rank at
once), then delayed by `kv_event_lag_ms` like device events.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kvreplay.engine.block_hash import SequenceHasher, TokenInterner
from kvreplay.engine.events import HOST_DONE
from kvreplay.engine.host_client import HostClient, direction_of
from kvreplay.engine.host_pool import STORE, HostPool, Transfer
from kvreplay.engine.host_timeline import HostTimeline
from kvreplay.engine.host_transfer import FairShare
from kvreplay.engine.scheduler import Rank
from kvreplay.engine.simtime import ms_to_ns

if TYPE_CHECKING:
    from kvreplay.engine.deployment import Pool
    from kvreplay.engine.identity import BlockIdentities
    from kvreplay.engine.port import LoopPort
    from kvreplay.engine.ranks import RankScheduler
    from kvreplay.engine.sequence import Seq
    from kvreplay.engine.worker import Worker
    from kvreplay.schema.native_model import HostOffload

HOST_TIER = 1


class HostRuntime:
    """The G2 pools of a deployment and their copies, beside the event loop (its `port`).

    Shared-pool participants are assumed to agree on the pool's contract (config.check_spec
    refuses a spec where they do not): the pool is built from the first one's terms."""

    __slots__ = ("at_worker", "boundary_ns", "fair", "fair_version", "hashers", "interner",
                 "names", "pools", "port", "shared", "timeline", "worker_of")

    def __init__(self, port: LoopPort, pools: Sequence[Pool], identities: BlockIdentities,
                 dense_tokens: bool) -> None:
        self.port = port
        self.interner = TokenInterner(identity=dense_tokens)
        self.pools: list[HostPool] = []
        self.shared: HostPool | None = None
        self.fair: FairShare | None = None
        self.fair_version = 0
        self.worker_of: dict[int, Worker] = {}
        self.at_worker: Worker | None = None  # the worker whose boundary is running
        self.boundary_ns: dict[int, int] = {}  # each worker's last boundary (gid -> ns)
        self.names: list[str] = []  # each pool's name in the report's timeline
        self.timeline = HostTimeline(port, 0)
        self.hashers = {pool.name: SequenceHasher(identities, self.interner, pool.block_size)
                        for pool in pools if pool.role.host_offload is not None}
        for pool in pools:
            for worker in pool.workers:
                self.join_worker(pool, worker)

    def join_worker(self, pool: Pool, worker: Worker) -> None:
        """A worker's ranks join G2 (at the start, or added by scaling): a private pool per
        rank, or the deployment's shared pool (built by its first participant)."""
        cfg = pool.role.host_offload
        block_bytes = pool.role.host_block_bytes
        if cfg is None:
            return
        assert block_bytes is not None and cfg.num_host_blocks is not None  # read_engine_spec
        hasher = self.hashers[pool.name]
        for rank in worker.ranks:
            self.worker_of[id(rank)] = worker
            if cfg.scope == "cluster_shared":
                if self.shared is None:
                    self.shared = self._new_pool(cfg.num_host_blocks, block_bytes, True,
                                                 hasher, "shared")
                    self.fair = FairShare(cfg.shared_d2h_bandwidth_gbps,
                                          cfg.shared_h2d_bandwidth_gbps)
                host_pool = self.shared
            else:
                host_pool = self._new_pool(cfg.num_host_blocks, block_bytes, False, hasher,
                                           _rank_name(rank, len(worker.ranks) > 1))
            assert isinstance(rank, Rank)  # G2 runs on vLLM ranks (config.check_spec)
            self._join(rank, host_pool, cfg, pool)

    def _new_pool(self, capacity: int, block_bytes: int, shared: bool,
                  hasher: SequenceHasher, name: str) -> HostPool:
        host_pool = HostPool(len(self.pools), capacity, block_bytes, shared, hasher)
        self.pools.append(host_pool)
        self.names.append(name)
        self.timeline.add_pool()
        host_pool.timeline = self.timeline
        return host_pool

    def _join(self, rank: Rank, host_pool: HostPool, cfg: HostOffload, pool: Pool) -> None:
        client = HostClient(host_pool, rank, cfg.d2h_bandwidth_gbps, cfg.h2d_bandwidth_gbps,
                            ms_to_ns(cfg.latency_to_first_byte_ms),
                            subscribe=pool.index is not None)
        rank.host = client
        if not host_pool.shared:
            rank.pool.track_copies(client.pending)

    # -- hooks called by the loop ------------------------------------------------------------

    def observe_prompt(self, prompt: tuple[tuple[int, int], ...]) -> None:
        self.interner.observe(prompt)

    def after_start(self, worker: Worker) -> None:
        """A pass started: submit the loads it queued, publish what its reservations evicted."""
        for rank in worker.ranks:
            client = rank.host
            if client is not None and client.outbox:
                self._flush(client)
        shared = self.shared
        if shared is not None and shared.evicted:
            shared.evicted = False
            self._wake_waiting(shared)
        self.publish_all()

    def _wake_waiting(self, pool: HostPool) -> None:
        """Entries left the shared pool: its idle participants with waiting requests try them
        again at once, as their host hits may be gone (the reference admits then)."""
        woken: set[int] = set()
        for client in pool.clients:
            worker = self.worker_of[id(client.rank)]
            if not worker.busy and worker.gid not in woken and worker.has_work():
                woken.add(worker.gid)
                self.port.wake(worker)

    def at_boundary(self, worker: Worker) -> None:
        """The worker's pass ended: every rank ticks, submits its stores, ticks again."""
        self.at_worker = worker  # what completes now is seen in this boundary
        self.boundary_ns[worker.gid] = self.port.now
        try:
            self._boundary(worker)
        finally:
            self.at_worker = None

    def _boundary(self, worker: Worker) -> None:
        now = self.port.now
        for rank in worker.ranks:
            client = rank.host
            if client is None:
                continue
            self._tick(rank, client)
            client.submit_prepared(now)
            if client.outbox:
                self._flush(client)
                if client.delivered:
                    self._tick(rank, client)
        self.publish_all()

    def on_event(self, payload: Transfer | int) -> None:
        """A HOST_DONE event: a private copy's completion, or the shared pool's next step."""
        if isinstance(payload, Transfer):
            if not payload.cancelled:
                self._complete(payload)
            return
        if payload == self.fair_version:
            self._advance_fair()

    def withdraw(self, rank: RankScheduler, seq: Seq) -> None:
        """A canceled request gives up its restore: unpin the sources, stop the copy (a
        shared pool reflows its bandwidth), forget the delivery."""
        client = rank.host
        transfer = seq.load
        if client is None or transfer is None:
            return
        seq.load = None
        loading = client.load_by_key
        for key in transfer.keys:
            if loading.get(key) == transfer.id:
                del loading[key]
        client.outbox = [(t, nb) for t, nb in client.outbox if t is not transfer]
        if transfer in client.delivered:
            client.delivered.remove(transfer)
        in_flight = client.pool.in_flight(transfer.id)
        if client.fifo is None and in_flight:
            self._advance_fair(reschedule=False)
            assert self.fair is not None
            self.fair.cancel(transfer.id)
        client.pool.cancel_load(transfer)
        if client.fifo is None and in_flight:
            self._advance_fair()

    # -- internals ---------------------------------------------------------------------------

    def _tick(self, rank: RankScheduler, client: HostClient) -> None:
        client.tick()

    def _flush(self, client: HostClient) -> None:
        now = self.port.now
        outbox, client.outbox = client.outbox, []
        pool = client.pool
        for transfer, not_before in outbox:
            nbytes = len(transfer.keys) * pool.block_bytes
            direction = direction_of(transfer)
            if client.fifo is not None:
                deadline = client.fifo.submit(direction, nbytes, not_before)
                transfer.deadline = deadline
                if transfer.kind == STORE:
                    client.pending[transfer.id] = deadline
                if deadline <= now:
                    self._complete(transfer)
                else:
                    self.port.push(deadline, HOST_DONE, _order(transfer, pool), transfer)
            else:
                fair = self.fair
                assert fair is not None
                self._advance_fair(reschedule=False)
                fair.submit(transfer.id, direction, id(client),
                            client.d2h_gbps if direction == 0 else client.h2d_gbps, nbytes,
                            not_before, client.ttfb_ns)
        if client.fifo is None:
            self._advance_fair()

    def _advance_fair(self, reschedule: bool = True) -> None:
        fair = self.fair
        shared = self.shared
        assert fair is not None and shared is not None
        now = self.port.now
        for transfer_id in fair.advance(now):
            transfer = shared.transfers.get(transfer_id)
            if transfer is not None:
                self._complete(transfer)
        if reschedule:
            self.fair_version += 1
            at = fair.next_event()
            if at is not None:
                if at <= now:
                    self._advance_fair()
                else:
                    # After every copy completing at the same instant (_order).
                    self.port.push(at, HOST_DONE, 1 << 62, self.fair_version)

    def _complete(self, transfer: Transfer) -> None:
        """Physical completion: the pool changes now; the owner sees it at its next boundary."""
        pool = transfer.owner.pool
        pool.complete(transfer)
        owner = transfer.owner
        owner.deliver(transfer)
        for client in pool.clients:
            if client is owner or client.has_deliveries():
                self.poke(client.rank)
            elif client.saw_copy and not self.worker_of[id(client.rank)].busy:
                # An idle participant sees the copy now: destinations waiting on it retry.
                if client.rank.pending:
                    self.poke(client.rank)
                else:
                    client.saw_copy = False
        self.publish_all()

    def poke(self, rank: Rank) -> None:
        """The rank has something to see: an idle worker's ranks tick, and the worker wakes
        (with G3 below too: its pass starts with the instant's arrivals, as without G3)."""
        worker = self.worker_of[id(rank)]
        if not worker.busy:
            for other in worker.ranks:
                client = other.host
                if client is not None:
                    self._tick(other, client)
        self.port.wake(worker)

    def publish_all(self) -> None:
        now = self.port.now
        for pool in self.pools:
            if not pool.published:
                continue
            pool.published = False
            for client in pool.clients:
                events = client.events
                if events:
                    client.events = []
                    worker = self.worker_of[id(client.rank)]
                    visible = worker.next_boundary(now) if worker.busy else now
                    self.port.publish(client.rank, events, visible, HOST_TIER)

    # -- report ------------------------------------------------------------------------------

    def g2_domains(self) -> list[dict[str, int]] | None:
        if self.shared is None:
            return None
        pool = self.shared
        return [{"capacity_blocks": pool.capacity, "resident_blocks": pool.resident(),
                 "used_blocks": pool.used()}]

    def g2_timeline(self, end_ns: int) -> dict[str, Any]:
        """Copies and occupancy over time until `end_ns` (host_timeline.py)."""
        names = [(name, "cluster_shared" if pool.shared else "dp_rank_local", pool.capacity)
                 for name, pool in zip(self.names, self.pools, strict=True)]
        return self.timeline.to_report(end_ns, names)

    def totals(self) -> dict[str, Any]:
        """Host-transfer totals over every pool (kvreplay's own figures; the reference has
        none of them)."""
        out: dict[str, Any] = {
            "d2h_transfers": 0, "d2h_blocks": 0, "d2h_bytes": 0, "h2d_transfers": 0,
            "h2d_blocks": 0, "h2d_bytes": 0, "store_cohorts_retried": 0,
            "restores_deferred": 0, "host_evicted_blocks": 0}
        for pool in self.pools:
            st = pool.stats
            out["d2h_transfers"] += st.stores
            out["d2h_blocks"] += st.stored_blocks
            out["d2h_bytes"] += st.stored_blocks * pool.block_bytes
            out["h2d_transfers"] += st.loads
            out["h2d_blocks"] += st.loaded_blocks
            out["h2d_bytes"] += st.loaded_blocks * pool.block_bytes
            out["store_cohorts_retried"] += st.cohorts_retried
            out["restores_deferred"] += st.restores_deferred
            out["host_evicted_blocks"] += st.evicted_blocks
        out["pools"] = len(self.pools)
        out["scopes"] = sorted({"cluster_shared" if p.shared else "dp_rank_local"
                                for p in self.pools})
        return out

    def check(self) -> None:
        for pool in self.pools:
            pool.check()


def _order(transfer: Transfer, pool: HostPool) -> int:
    """Same-instant completions: stores before loads, then pool, then transfer id."""
    return (transfer.kind << 60) | (pool.index << 40) | transfer.id


def _rank_name(rank: RankScheduler, ranks: bool) -> str:
    """`pool worker` (`pool worker.rank` with attention DP), as the HTML page names workers."""
    name = f"{rank.pool_name} {rank.worker_id}"
    return f"{name}.{rank.dp_rank}" if ranks else name
