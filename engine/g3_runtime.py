"""G3 in the event loop: the tier of a deployment, its copies' steps, and who sees them when.

G3 sits under G2 (host_runtime.py): each worker of a role with `g3_offload` gets a G3 client
beside its G2 client (g3_client.py), and the tier moves its copies as a fluid (g3_tier.py). The
runtime acts on the loop only through its port (port.py): the tier's next step is a G3_DONE
event; at a step, the copies that finished apply to the tier at once, and every worker sees them
at its next engine boundary (an idle one at once, a busy one at its pass end, which a
fast-forwarded stretch is cut to): the owner consumes its own (unpinning G2 entries, filling G2
reservations), and every worker's requests waiting on transfer progress wake up (the reference's
tier has one completion count for the whole deployment, whatever the scope).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kvreplay.engine.events import G3_DONE
from kvreplay.engine.g3_client import G3Client
from kvreplay.engine.g3_tier import READ, G3Pool, G3Tier, Job
from kvreplay.engine.host_timeline import HostTimeline
from kvreplay.engine.simtime import ms_to_ns, ns_to_ms

if TYPE_CHECKING:
    from kvreplay.engine.deployment import Pool
    from kvreplay.engine.host_runtime import HostRuntime
    from kvreplay.engine.port import LoopPort
    from kvreplay.engine.worker import Worker


class G3Runtime:
    """The deployment's G3 tier beside the loop. G3 runs in aggregated replay with attention
    DP 1 (config.check_spec refuses the rest), so a worker is one rank and one client."""

    __slots__ = ("clients", "gid_worker", "host", "port", "scope", "seen", "tier", "timeline",
                 "version", "woken", "workers")

    def __init__(self, port: LoopPort, host: HostRuntime, pools: Sequence[Pool]) -> None:
        self.port = port
        self.host = host
        pool = next(p for p in pools if p.role.g3_offload is not None)
        cfg = pool.role.g3_offload
        assert cfg is not None and cfg.num_g3_blocks is not None and cfg.scope is not None
        block_bytes = pool.role.host_block_bytes
        assert block_bytes is not None
        first = pool.workers[0].ranks[0].host
        assert first is not None
        self.scope = cfg.scope
        self.tier = G3Tier(
            shared=cfg.scope == "cluster_shared", workers=0,
            capacity=cfg.num_g3_blocks, block_bytes=block_bytes,
            read_gbps=cfg.read_bandwidth_gbps, write_gbps=cfg.write_bandwidth_gbps,
            shared_read_gbps=cfg.shared_read_bandwidth_gbps,
            shared_write_gbps=cfg.shared_write_bandwidth_gbps,
            ttfb_ns=ms_to_ns(cfg.latency_to_first_byte_ms), hash_of=first.pool.hash_of)
        self.workers: list[Worker] = []
        self.clients: list[G3Client] = []
        self.gid_worker: dict[int, Worker] = {}
        self.timeline = HostTimeline(port, len(self.tier.pools), directions=("write", "read"))
        for worker in pool.workers:
            self.join_worker(worker)
        self.version = 0
        self.seen = True  # every worker was told of every finished copy
        self.woken: set[int] = set()  # idle workers (gids) whose turn comes after the events

    def join_worker(self, worker: Worker) -> None:
        """A worker joins the tier (at the start, or added by scaling): its client beside its
        G2 client, and a pool of its own when G3 is worker-local (its index is its worker id:
        ids are never reused)."""
        index = len(self.workers)
        assert index == worker.worker_id
        host_client = worker.ranks[0].host
        assert host_client is not None
        if not self.tier.shared:
            self.tier.pools.append(G3Pool())
            self.timeline.add_pool()
        client = G3Client(self, self.tier, index, host_client)
        client.seen_epoch = self.tier.epoch  # a joining worker has no earlier copy to see
        host_client.g3 = client
        host_client.pool.holds_stores = True
        self.clients.append(client)
        self.workers.append(worker)
        self.gid_worker[worker.gid] = worker

    def leave(self, worker: Worker) -> None:
        """A worker was removed (scaling): its worker-local pool goes with it (the tier's
        resident count is the remaining workers')."""
        if not self.tier.shared:
            self.tier.pools[worker.worker_id] = G3Pool()

    # -- the tier's clock --------------------------------------------------------------------

    def advance(self) -> int:
        """Bring the tier to now (what finished is queued for its owner; the workers that did
        not see it are told at this instant's G3_DONE); return now."""
        now = self.port.now
        finished = self.tier.advance(now)
        if finished:
            for job in finished:
                self.clients[job.owner].completed.append(job)
            self.seen = False
        return now

    def submitted(self, job: Job) -> None:
        """A copy joined the tier: count it, and step the tier when it next changes."""
        view = _TimelinePool(self.tier, job.owner)
        if job.direction == READ:
            self.timeline.loaded(view, len(job.keys))
        else:
            self.timeline.stored(view, len(job.keys), job.evicted)
        self._reschedule()

    def on_event(self, version: int) -> None:
        """A G3_DONE event: the tier's next step (unless a later submission moved it), which
        every worker hears of; or (-1) a telling of copies that finished within a boundary
        to the workers that did not see them."""
        if version == self.version:
            finished = self.tier.epoch
            now = self.advance()
            # A copy finishing or starting to move bytes now is an event of the tier, which
            # wakes every worker; one that finished within a boundary at this instant was seen.
            self._tell(everyone=finished != self.tier.epoch or self.tier.started_at(now))
            self._reschedule()
        elif version == -1 and not self.seen:
            self._tell(everyone=False)

    def _reschedule(self) -> None:
        self.version += 1
        at = self.tier.next_event()
        now = self.port.now
        if not self.seen and (at is None or at > now):
            self.port.push(now, G3_DONE, 0, -1)
        if at is not None:
            self.port.push(max(at, now), G3_DONE, 0, self.version)

    def _tell(self, everyone: bool) -> None:
        """The tier moved (a copy finished, or started moving bytes): the workers wake, as the
        reference's workers wake at every event of the tier (`everyone`; else only those that
        did not see a finished copy yet). A busy worker sees it at its pass end (a
        fast-forwarded stretch is cut there when it must act); an idle one now, in the
        reference's order: a pass, its boundary (where it consumes its copies and its requests
        waiting on transfer progress wake), another pass (drive)."""
        self.seen = True
        epoch = self.tier.epoch
        for index, client in enumerate(self.clients):
            unseen = client.seen_epoch != epoch
            if not (everyone or unseen):
                continue
            worker = self.workers[index]
            if not worker.busy or client.completed or (unseen and any(
                    seq.sleeping for seq in client.host.rank.connector)):
                self.wake(worker)

    def wake(self, worker: Worker) -> None:
        """The worker has something to see: a busy one at its pass end (a fast-forwarded stretch
        is cut there); an idle one takes its turn once the instant's events ran (drive_woken)."""
        if worker.busy:
            self.port.wake(worker)
        else:
            self.woken.add(worker.gid)

    def drive_woken(self) -> None:
        """After the instant's events, before its arrivals: every woken idle worker's turn."""
        woken, self.woken = self.woken, set()
        for gid in sorted(woken):
            worker = self.gid_worker[gid]
            if not worker.busy:
                self.drive(worker)

    def drive(self, worker: Worker) -> None:
        """An idle worker gets its turn (the tier or one of its G2 copies woke it, or work
        arrived), in the reference's order: it tries a pass; when that starts nothing and it
        has not reached a boundary at this instant (a pass end), it reaches one (it consumes
        its copies; its requests waiting on transfer progress wake) and tries again. A worker
        that has not seen the tier's latest finished copy sees it first (the reference's
        adapter reports its internal work due at once while its completion epoch lags,
        g3_offload.rs `next_deadline`, and the worker processes it before its pass)."""
        host = worker.ranks[0].host
        assert host is not None and host.g3 is not None
        self.advance()
        if host.g3.seen_epoch != self.tier.epoch:
            host.tick()
        if self.port.start_now(worker):
            return
        if self.host.boundary_ns.get(worker.gid) == self.port.now and not _news(worker):
            return
        self.host.at_boundary(worker)
        self.port.start_now(worker)

    # -- report ------------------------------------------------------------------------------

    def g3_offload(self) -> dict[str, Any]:
        """The reference's `g3_offload` summary block (same keys, same order)."""
        st = self.tier.stats
        out: dict[str, Any] = {
            "lookup_probes": st.lookup_probes,
            "lookup_hits": st.lookup_hits,
            "lookup_pending": st.lookup_pending,
            "read": _io(st.read),
            "write": _io(st.write),
            "evictions": st.evictions,
            "cross_worker_read_blocks": st.cross_worker_read_blocks,
            "resident_blocks": self.tier.resident_blocks(),
            "pending_blocks": self.tier.pending_blocks(),
        }
        if st.bypassed_restores:
            out["bypassed_restores"] = st.bypassed_restores
        return out

    def g3_timeline(self, end_ns: int) -> dict[str, Any]:
        """Reads, writes and occupancy over time until `end_ns` (host_timeline.py)."""
        names = ([("shared", "cluster_shared", self.tier.capacity)] if self.tier.shared else
                 [(f"{w.pool_name} {w.worker_id}", "worker_local", self.tier.capacity)
                  for w in self.workers])
        return self.timeline.to_report(end_ns, names)

    def in_flight(self) -> bool:
        return bool(self.tier.jobs) or any(c.completed for c in self.clients)

    def check(self) -> None:
        self.tier.check()


def _news(worker: Worker) -> bool:
    """Whether the worker has copies to see or requests to wake at its next boundary."""
    for rank in worker.ranks:
        host = rank.host
        if host is not None and (host.delivered or (host.g3 is not None and host.g3.completed)
                                 or host.wakes()):
            return True
    return False


class _TimelinePool:
    """What the timeline reads of a pool (as of a HostPool): its index, block bytes, entries."""

    __slots__ = ("block_bytes", "entries", "index")

    def __init__(self, tier: G3Tier, worker: int) -> None:
        self.index = 0 if tier.shared else worker
        self.block_bytes = tier.block_bytes
        self.entries = tier.pool(worker).entries


def _io(io: Any) -> dict[str, Any]:
    return {"submitted_jobs": io.submitted_jobs, "completed_jobs": io.completed_jobs,
            "cancelled_jobs": io.cancelled_jobs, "completed_bytes": io.completed_bytes,
            "transfer_ms": ns_to_ms(io.transfer_ns)}
