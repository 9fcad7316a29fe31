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


def worker_init() -> None:
    """A pool worker leaves Ctrl-C to the sweep (which stops the pool) and loads the engine
    before its first point."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import kvreplay.engine.api
    import kvreplay.replay  # noqa: F401


def _materialize(data: bytes, job: PointJob) -> str:
    """A trace shipped as bytes, as a file in this worker's temp folder (once per digest)."""
    if digest_bytes(data) != job.trace_digest:
        raise ValueError("the shipped trace does not match its digest")
    folder = os.path.join(tempfile.gettempdir(), "kvreplay-sweep-traces")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{job.trace_digest}{job.trace_suffix}")
    if not os.path.exists(path):
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    return path


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

    trace = _materialize(trace_data, job) if trace_data is not None else job.trace_path
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
