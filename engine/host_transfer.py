"""G1 <-> G2 copy timing (engine.md section 3): FIFO lanes for private pools, equal shares for
shared ones. Times are integer nanoseconds; bandwidth is decimal GB/s, i.e. bytes per ns, and 0
means unlimited (the copy takes no time).

Private pool (`dp_rank_local`): one FIFO lane per direction (D2H stores, H2D loads), independent
of each other. A copy starts at max(lane tail, not_before + first-byte latency) and lasts
bytes / rate; its completion is fixed when it is submitted, and cancelling one never pulls the
lane's tail back.

Shared pool (`cluster_shared`): every copy of one direction that is past its first byte gets
min(its rank's link rate / that rank's ready copies, the pool's rate / all ready copies);
copies still before their first byte use nothing, and unused share is not redistributed. Rates
are recomputed whenever a copy is submitted, becomes ready, completes or is cancelled.
"""

from __future__ import annotations

import math

from kvreplay.engine.simtime import float_ns

D2H, H2D = 0, 1
INF = math.inf


def rate_of(gbps: float) -> float:
    """Bytes per nanosecond (1 GB/s = 1 byte/ns); 0 means unlimited."""
    return INF if gbps == 0 else gbps


def copy_ns(nbytes: int, rate: float) -> int:
    """Duration of a copy at a constant rate, rounded once to the nanosecond."""
    if rate == INF:
        return 0
    return float_ns(nbytes / rate)


class FifoLanes:
    """A private pool's two lanes."""

    __slots__ = ("rates", "tails", "ttfb_ns")

    def __init__(self, d2h_gbps: float, h2d_gbps: float, ttfb_ns: int) -> None:
        self.rates = (rate_of(d2h_gbps), rate_of(h2d_gbps))
        self.tails = [0, 0]
        self.ttfb_ns = ttfb_ns

    def submit(self, direction: int, nbytes: int, not_before_ns: int) -> int:
        """Queue a copy; return its completion time."""
        start = max(self.tails[direction], not_before_ns + self.ttfb_ns)
        end = start + copy_ns(nbytes, self.rates[direction])
        self.tails[direction] = end
        return end


class _Job:
    __slots__ = ("client", "direction", "event", "id", "link", "rate", "ready", "remaining",
                 "serial")

    def __init__(self, serial: int, ident: int, direction: int, client: int, link: float,
                 nbytes: float, ready: int) -> None:
        self.serial = serial
        self.id = ident
        self.direction = direction
        self.client = client
        self.link = link
        self.remaining = nbytes
        self.ready = ready
        self.rate = 0.0  # bytes per ns at the current step (0 before the first byte)
        self.event = 0  # when this copy next completes or starts moving bytes


class FairShare:
    """A shared pool's copies in both directions, progressed as a fluid."""

    __slots__ = ("_serial", "jobs", "now", "pool_rates")

    def __init__(self, shared_d2h_gbps: float, shared_h2d_gbps: float) -> None:
        self.pool_rates = (rate_of(shared_d2h_gbps), rate_of(shared_h2d_gbps))
        self.jobs: dict[int, _Job] = {}
        self.now = 0
        self._serial = 0

    def submit(self, ident: int, direction: int, client: int, link_gbps: float, nbytes: int,
               not_before_ns: int, ttfb_ns: int) -> None:
        """Add a copy (the caller advanced to the current time first)."""
        self._serial += 1
        ready = max(not_before_ns + ttfb_ns, self.now)
        self.jobs[ident] = _Job(self._serial, ident, direction, client, rate_of(link_gbps),
                                float(nbytes), ready)

    def cancel(self, ident: int) -> None:
        self.jobs.pop(ident, None)

    def _plan(self) -> int:
        """Set every copy's rate and next event at `now`; return the earliest event."""
        now = self.now
        all_ready = [0, 0]
        per_client: dict[tuple[int, int], int] = {}
        jobs = self.jobs.values()
        for job in jobs:
            if job.ready <= now:
                all_ready[job.direction] += 1
                key = (job.direction, job.client)
                per_client[key] = per_client.get(key, 0) + 1
        pool_rates = self.pool_rates
        first = -1
        for job in jobs:
            if job.ready > now:
                job.rate = 0.0
                event = job.ready
            else:
                link = job.link / per_client[(job.direction, job.client)]
                pool = pool_rates[job.direction] / all_ready[job.direction]
                rate = link if link < pool else pool
                job.rate = rate
                if rate == INF:
                    event = now
                else:
                    event = float_ns(now + job.remaining / rate)
                    if event < now:
                        event = now
            job.event = event
            if first < 0 or event < first:
                first = event
        return first

    def next_event(self) -> int | None:
        """When the next copy completes or starts moving bytes (None: nothing in flight)."""
        if not self.jobs:
            return None
        return self._plan()

    def advance(self, target: int) -> list[int]:
        """Progress every copy to `target`; return the ids that completed, in completion order
        (by time, then submission order)."""
        return [ident for ident, _ in self.advance_timed(target)]

    def advance_timed(self, target: int) -> list[tuple[int, int]]:
        """`advance`, with each copy's completion time (ns)."""
        done: list[tuple[int, int]] = []
        while self.jobs:
            first = self._plan()
            if first > target:
                break
            elapsed = first - self.now
            finished = []
            for job in self.jobs.values():
                if job.rate:
                    if job.event <= first:
                        job.remaining = 0.0
                        finished.append(job)
                    elif elapsed:
                        job.remaining -= elapsed * job.rate
            self.now = first
            if len(finished) > 1:
                finished.sort(key=lambda j: j.serial)
            for job in finished:
                del self.jobs[job.id]
                done.append((job.id, first))
        if target > self.now:
            if self.jobs:
                elapsed = target - self.now
                for job in self.jobs.values():
                    if job.rate:
                        job.remaining -= elapsed * job.rate
            self.now = target
        return done
