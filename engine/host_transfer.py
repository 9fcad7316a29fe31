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

D2H, H2D = 0, 1
INF = math.inf


def rate_of(gbps: float) -> float:
    """Bytes per nanosecond (1 GB/s = 1 byte/ns); 0 means unlimited."""
    return INF if gbps == 0 else gbps


def copy_ns(nbytes: int, rate: float) -> int:
    """Duration of a copy at a constant rate, rounded once to the nanosecond."""
    if rate == INF:
        return 0
    return math.floor(nbytes / rate + 0.5)


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
    __slots__ = ("client", "direction", "id", "link", "ready", "remaining", "serial")

    def __init__(self, serial: int, ident: int, direction: int, client: int, link: float,
                 nbytes: float, ready: int) -> None:
        self.serial = serial
        self.id = ident
        self.direction = direction
        self.client = client
        self.link = link
        self.remaining = nbytes
        self.ready = ready


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
        """Add a copy (advance to the current time first)."""
        self._serial += 1
        ready = max(not_before_ns + ttfb_ns, self.now)
        self.jobs[ident] = _Job(self._serial, ident, direction, client, rate_of(link_gbps),
                                float(nbytes), ready)

    def cancel(self, ident: int) -> None:
        self.jobs.pop(ident, None)

    def _rates(self) -> dict[int, float]:
        now = self.now
        all_ready = [0, 0]
        per_client: dict[tuple[int, int], int] = {}
        for job in self.jobs.values():
            if job.ready <= now:
                all_ready[job.direction] += 1
                key = (job.direction, job.client)
                per_client[key] = per_client.get(key, 0) + 1
        rates = {}
        for job in self.jobs.values():
            if job.ready <= now:
                link = job.link / per_client[(job.direction, job.client)]
                pool = self.pool_rates[job.direction] / all_ready[job.direction]
                rates[job.id] = link if link < pool else pool
        return rates

    def _event_times(self, rates: dict[int, float]) -> dict[int, int]:
        now = self.now
        out = {}
        for job in self.jobs.values():
            if job.ready > now:
                out[job.id] = job.ready
            else:
                rate = rates[job.id]
                out[job.id] = now if rate == INF else max(
                    now, math.floor(now + job.remaining / rate + 0.5))
        return out

    def next_event(self) -> int | None:
        """When the next copy completes or starts moving bytes (None: nothing in flight)."""
        if not self.jobs:
            return None
        return min(self._event_times(self._rates()).values())

    def advance(self, target: int) -> list[int]:
        """Progress every copy to `target`; return the ids that completed, in completion order
        (by time, then submission order)."""
        done: list[int] = []
        while self.jobs:
            rates = self._rates()
            events = self._event_times(rates)
            first = min(events.values())
            if first > target:
                break
            elapsed = first - self.now
            finished = []
            for job in self.jobs.values():
                if job.ready <= self.now:
                    if events[job.id] <= first:
                        job.remaining = 0.0
                    elif elapsed:
                        job.remaining -= elapsed * rates[job.id]
            self.now = first
            for job in self.jobs.values():
                if job.ready <= first and job.remaining == 0.0 and events[job.id] <= first:
                    finished.append(job)
            finished.sort(key=lambda j: j.serial)
            for job in finished:
                del self.jobs[job.id]
                done.append(job.id)
        if target > self.now:
            elapsed = target - self.now
            rates = self._rates()
            for job in self.jobs.values():
                if job.ready <= self.now:
                    job.remaining -= elapsed * rates[job.id]
            self.now = target
        return done
