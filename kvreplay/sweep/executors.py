"""Where points run: a local process pool or Ray tasks, behind one scheduling loop that retries.

The loop keeps at most `capacity` points in flight. A point that fails is retried once, then
recorded as failed; the sweep goes on. A worker process that dies takes its pool down with it
(`BrokenProcessPool`): every point then in flight is retried once, alone, so that the point that
killed its worker is told apart from the ones that only shared the pool.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import signal
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import attrs

from kvreplay.sweep.task import PointJob, PointResult, run_point, worker_init


class Crash(Exception):
    """The process running a point died (killed, out of memory, node lost)."""


class ExecutorUnavailable(Exception):
    """The executor cannot start (Ray not installed, no cluster at the address)."""


Outcome = PointResult | BaseException


class Backend(Protocol):
    capacity: int
    isolate_crashes: bool

    def submit(self, job: PointJob) -> Any: ...

    def wait(self, handles: Sequence[Any], timeout: float) -> list[tuple[Any, Outcome]]: ...

    def close(self, *, kill: bool) -> None: ...


@attrs.define
class Stats:
    ran: int = 0  # point runs finished (retries included)
    retried: int = 0
    failed: int = 0


def execute(jobs: Sequence[PointJob], backend: Backend,
            done: Callable[[PointJob, PointResult], None], *, tick: Callable[[], None],
            version: str, tick_s: float = 0.5) -> Stats:
    """Run every job; `done` gets each final result (failed ones have `error`), in completion
    order; `tick` is called at least every `tick_s` seconds."""
    stats = Stats()
    queue: collections.deque[tuple[PointJob, int, bool]] = collections.deque(
        (job, 0, False) for job in jobs)
    inflight: dict[Any, tuple[PointJob, int, bool]] = {}
    while queue or inflight:
        while queue and len(inflight) < backend.capacity:
            job, attempt, alone = queue[0]
            if (alone and inflight) or any(a for _, _, a in inflight.values()):
                break
            queue.popleft()
            inflight[backend.submit(job)] = (job, attempt, alone)
        for handle, outcome in backend.wait(list(inflight), tick_s):
            job, attempt, _ = inflight.pop(handle)
            stats.ran += 1
            result = _result(job, outcome, version)
            if result.ok:
                done(job, result)
            elif attempt == 0:
                stats.retried += 1
                crashed = isinstance(outcome, Crash)
                if crashed and backend.isolate_crashes:
                    queue.appendleft((job, 1, True))
                else:
                    queue.append((job, 1, False))
            else:
                stats.failed += 1
                done(job, result)
        tick()
    return stats


def _result(job: PointJob, outcome: Outcome, version: str) -> PointResult:
    if isinstance(outcome, PointResult):
        if outcome.ok and outcome.version != version:
            return PointResult(job.name, outcome.version, error=f"the worker runs kvreplay "
                               f"{outcome.version}, this sweep {version}")
        return outcome
    if isinstance(outcome, Crash):
        return PointResult(job.name, version, error=f"the worker process died ({outcome})")
    return PointResult(job.name, version, error=f"{type(outcome).__name__}: {outcome}")


class LocalBackend:
    """A process pool (spawn: no state inherited from the sweep's own process)."""

    isolate_crashes = True

    def __init__(self, jobs: int) -> None:
        self.capacity = max(1, jobs)
        self.pool = self._new_pool()

    def _new_pool(self) -> Any:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        return ProcessPoolExecutor(self.capacity, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=worker_init, initargs=(os.getpid(),))

    def submit(self, job: PointJob) -> Any:
        from concurrent.futures.process import BrokenProcessPool

        from kvreplay.io.signals import deferred

        # Ctrl-C is held back while pool processes may be spawned: they inherit it blocked, so a
        # terminal's SIGINT to the whole group reaches only the sweep, which stops them (a child
        # still importing would print a traceback). It arrives right after.
        with deferred({signal.SIGINT}):
            try:
                return self.pool.submit(run_point, job)
            except BrokenProcessPool:  # a worker died since the last submit: a fresh pool
                self.close(kill=True)
                self.pool = self._new_pool()
                return self.pool.submit(run_point, job)

    def wait(self, handles: Sequence[Any], timeout: float) -> list[tuple[Any, Outcome]]:
        from concurrent.futures import FIRST_COMPLETED
        from concurrent.futures import wait as wait_futures
        from concurrent.futures.process import BrokenProcessPool

        finished, _ = wait_futures(handles, timeout=timeout, return_when=FIRST_COMPLETED)
        out: list[tuple[Any, Outcome]] = []
        for future in finished:
            error = future.exception()
            if isinstance(error, BrokenProcessPool):
                out.append((future, Crash("a pool process was killed")))
            else:
                out.append((future, error if error is not None else future.result()))
        return out

    def close(self, *, kill: bool) -> None:
        processes = list((getattr(self.pool, "_processes", None) or {}).values()) if kill \
            else []
        results = getattr(self.pool, "_result_queue", None) if kill else None
        self.pool.shutdown(wait=not kill, cancel_futures=True)
        for process in processes:  # a point in progress is abandoned, not awaited
            if process.is_alive():
                process.kill()
        for process in processes:
            process.join(5)
        # A process killed while sending its result (a report is megabytes) leaves the pool's
        # manager thread reading the rest of the message forever, and the interpreter joins
        # that thread at exit: the sweep would hang after "interrupted". This process holds the
        # last write end of the result pipe once the processes are dead; closing it turns the
        # wait into an end of file, on which the thread marks the pool broken and ends.
        writer = getattr(results, "_writer", None)
        if writer is not None:
            with contextlib.suppress(OSError):
                writer.close()


CONNECT_TIMEOUT_S = 5.0


def reach(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """ExecutorUnavailable, within `timeout_s`, when nothing listens at a Ray address
    (`host:port`, `ray://host:port`); `auto` and addresses without a port are left to Ray.
    Ray itself retries an unreachable cluster for minutes without a word."""
    import socket

    rest = address.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return
    host = host.strip("[]")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except TimeoutError:
        raise ExecutorUnavailable(f"cannot reach the Ray cluster at {address}: no answer in "
                                  f"{timeout_s:g} s (is the head node up and the port open "
                                  "from here?)") from None
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ExecutorUnavailable(f"cannot reach the Ray cluster at {address}: {reason} (is "
                                  "`ray start --head` running there, on that port?)") from None


class RayBackend:
    """Each point a Ray task on a local Ray instance or an existing cluster (`address`)."""

    isolate_crashes = False

    def __init__(self, jobs: int | None, address: str | None, transport: str,
                 traces: dict[str, tuple[str, str]],
                 say: Callable[[str], None] | None = None) -> None:
        import importlib

        try:  # typed as Any: the stubs differ between Ray versions
            ray: Any = importlib.import_module("ray")
        except ImportError:
            raise ExecutorUnavailable("--executor ray needs Ray: pip install 'kvreplay[ray]'") \
                from None
        self.ray = ray
        self.owned = False
        if not ray.is_initialized():
            if address:
                reach(address)
                if say is not None:
                    say(f"connecting to the Ray cluster at {address} (Ray waits up to a "
                        "minute for its GCS to answer)")
            try:
                if address:
                    ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
                else:
                    # "local": a new instance, never a cluster found on this machine
                    ray.init(address="local", num_cpus=jobs or os.cpu_count() or 1,
                             include_dashboard=False,
                             logging_level=logging.ERROR, log_to_driver=False)
            except Exception as exc:  # a cluster that is not there, a port in use
                raise ExecutorUnavailable(f"cannot start Ray: {exc}") from None
            self.owned = True
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.capacity = max(1, jobs or cpus)
        self.remote = ray.remote(run_point).options(num_cpus=1, max_retries=0)
        self.pending: set[Any] = set()
        # digest -> object ref of the trace bytes, put once for every task that replays it
        self.shipped: dict[str, Any] = {}
        if transport == "object-store":
            for digest, (path, _) in traces.items():
                with open(path, "rb") as fh:
                    self.shipped[digest] = ray.put(fh.read())

    def submit(self, job: PointJob) -> Any:
        if job.trace_digest is not None and job.trace_digest in self.shipped:
            ref = self.remote.remote(attrs.evolve(job, trace_path=None),
                                     self.shipped[job.trace_digest])
        else:  # the path transport: each task replays a private copy it checked
            ref = self.remote.remote(attrs.evolve(job, private_copy=True))
        self.pending.add(ref)
        return ref

    def wait(self, handles: Sequence[Any], timeout: float) -> list[tuple[Any, Outcome]]:
        ready, _ = self.ray.wait(list(handles), num_returns=1, timeout=timeout)
        out: list[tuple[Any, Outcome]] = []
        for ref in ready:
            self.pending.discard(ref)
            try:
                out.append((ref, self.ray.get(ref)))
            except self.ray.exceptions.RayTaskError as exc:
                out.append((ref, exc))
            except self.ray.exceptions.RayError as exc:  # the worker or its node died
                out.append((ref, Crash(type(exc).__name__)))
        return out

    def close(self, *, kill: bool) -> None:
        if kill:
            for ref in self.pending:
                self.ray.cancel(ref, force=True)
        self.pending.clear()
        if self.owned:
            self.ray.shutdown()
