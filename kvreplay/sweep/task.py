"""One sweep point on one trace, as a pure function a worker process (or a Ray task) runs:
native JSON and a trace in, the canonical report text and its summary out.

Nothing here raises for a bad point: every failure is a `PointResult` with an error line, so a
pool or a cluster only ever loses a point when its process dies.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import tempfile
from collections.abc import Callable
from typing import Any

import attrs


@attrs.frozen
class PointJob:
    """What a worker needs: the point's native spec, and where its trace is."""

    name: str  # the report's file name (without .json)
    native: str
    spec_digest: str
    trace_digest: str | None
    trace_path: str | None  # the trace as every worker sees it (None: shipped as bytes)
    trace_suffix: str = ".jsonl"
    # Replay a private copy of the trace, checked against trace_digest, not the path itself
    # (Ray's path transport: the path is on a filesystem others write to).
    private_copy: bool = False


@attrs.frozen
class PointResult:
    name: str
    version: str
    report_text: str | None = None
    summary: dict[str, Any] | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.report_text is not None


def digest_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def trace_digest(path: str) -> str:
    """The content digest of a trace file, or of a folder of Weka plays (names and bytes)."""
    if not os.path.isdir(path):
        with open(path, "rb") as fh:
            return digest_bytes(fh.read())
    h = hashlib.sha256()
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            h.update(os.path.relpath(full, path).encode("utf-8") + b"\0")
            with open(full, "rb") as fh:
                h.update(hashlib.sha256(fh.read()).digest())
    return h.hexdigest()[:16]


def worker_init(parent: int | None = None) -> None:
    """A pool worker leaves Ctrl-C to the sweep (which stops the pool), dies with the sweep
    process `parent` (a SIGKILLed sweep cannot stop its pool), and loads the engine before its
    first point."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if parent is not None:
        die_with(parent)
    import kvreplay.engine.api
    import kvreplay.replay  # noqa: F401


def die_with(parent: int) -> None:
    """End this process when `parent` ends: at once on Linux (PR_SET_PDEATHSIG), else within
    a second (a thread watching the parent's pid)."""
    if not _death_signal():
        import threading

        threading.Thread(target=_watch, args=(parent,), name="kvreplay-parent-watch",
                         daemon=True).start()
    if os.getppid() != parent:  # the parent died before the signal was asked for
        os._exit(1)


def _death_signal() -> bool:
    """SIGKILL on the parent's death (Linux prctl); False where there is none."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(1, signal.SIGKILL, 0, 0, 0) == 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        return False


def _watch(parent: int) -> None:
    import time

    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


class TraceMismatch(ValueError):
    """The trace a worker was given is not the one the sweep digested."""


# This process's private folder for trace copies (mkdtemp: an unpredictable name, mode 0700),
# and the copies made in it, by digest and suffix: a file planted in a shared temp folder
# under a name someone could predict is never read.
_FOLDER: list[str] = []
_COPIES: dict[str, str] = {}


def _private_folder() -> str:
    if not _FOLDER:
        import atexit
        import shutil

        _FOLDER.append(tempfile.mkdtemp(prefix="kvreplay-sweep-traces-"))
        atexit.register(shutil.rmtree, _FOLDER[0], True)
    return _FOLDER[0]


def _materialize(data: bytes, job: PointJob) -> str:
    """A trace shipped as bytes, checked against its digest and written once per digest into
    this worker's private folder."""
    if digest_bytes(data) != job.trace_digest:
        raise TraceMismatch("the shipped trace does not match its digest")
    return _keep(job, lambda target: _write_new(target, data))


def _private_copy(job: PointJob) -> str:
    """The trace at `job.trace_path` copied into this worker's private folder once per digest;
    the copy's digest is the sweep's or the point fails (the path changed since the sweep
    digested it, or another file sits there)."""
    assert job.trace_path is not None

    def copy(target: str) -> None:
        if os.path.isdir(job.trace_path or ""):
            _copy_tree(job.trace_path or "", target)
        else:
            with open(job.trace_path or "", "rb") as fh:
                _write_new(target, fh.read())
        found = trace_digest(target)
        if found != job.trace_digest:
            raise TraceMismatch(f"the trace at {job.trace_path} has digest {found}, not the "
                                f"{job.trace_digest} the sweep read: it changed since")

    return _keep(job, copy)


def _keep(job: PointJob, make: Callable[[str], None]) -> str:
    """The private copy of the job's trace, made by `make(path)` the first time."""
    name = f"{job.trace_digest}{job.trace_suffix}"
    path = _COPIES.get(name)
    if path is None:
        target = os.path.join(_private_folder(), name)
        try:
            make(target)
        except BaseException:
            _remove(target)
            raise
        path = _COPIES[name] = target
    return path


def _write_new(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _copy_tree(source: str, target: str) -> None:
    """A folder of Weka plays, file by file (symlinks read as the files they lead to)."""
    os.mkdir(target, 0o700)
    for root, dirs, files in os.walk(source):
        dirs.sort()
        here = os.path.join(target, os.path.relpath(root, source))
        for name in dirs:
            os.mkdir(os.path.join(here, name), 0o700)
        for name in sorted(files):
            with open(os.path.join(root, name), "rb") as fh:
                _write_new(os.path.join(here, name), fh.read())


def _remove(path: str) -> None:
    import shutil

    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        with contextlib.suppress(OSError):
            os.unlink(path)


def run_point(job: PointJob, trace_data: bytes | None = None) -> PointResult:
    """Replay one point; the report has no wall time in it (equal runs, equal bytes)."""
    from kvreplay import __version__

    try:
        return _run(job, trace_data, __version__)
    except Exception as exc:  # a bug must cost one point, not the sweep
        return PointResult(job.name, __version__, error=f"{type(exc).__name__}: {exc}")


def _run(job: PointJob, trace_data: bytes | None, version: str) -> PointResult:
    from kvreplay.compiler.documents import compile_text
    from kvreplay.engine.report_stream import report_chunks
    from kvreplay.replay import replay

    if trace_data is not None:
        trace: str | None = _materialize(trace_data, job)
    elif job.private_copy and job.trace_path is not None:
        trace = _private_copy(job)
    else:
        trace = job.trace_path
    compiled = compile_text(job.native, f"{job.name}.json")
    outcome = replay(compiled, base_dir=os.getcwd(), trace_paths=[trace] if trace else None,
                     stream=True, timed=False)
    if outcome.report is None:
        errors = [d for d in outcome.diagnostics if d.severity == "error"]
        reason = outcome.error or "; ".join(outcome.refusals) or (
            f"{errors[0].rule} {errors[0].message}" if errors else "no report")
        return PointResult(job.name, version, error=reason)
    report = outcome.report
    rows = report.get("per_request")
    try:
        report["meta"]["sweep_point"] = {"spec_digest": job.spec_digest,
                                         "trace_digest": job.trace_digest}
        text = "".join(report_chunks(report))
    finally:
        close = getattr(rows, "close", None)
        if close is not None:
            with contextlib.suppress(OSError):
                close()
    return PointResult(job.name, version, text, report["summary"])
