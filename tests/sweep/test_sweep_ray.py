"""`kvreplay sweep --executor ray` on a local Ray instance (`ray.init(num_cpus=2)`): the same
bytes as the local executor, with either trace transport, and a killed task process retried.

Marked `ray`: deselect with `-m 'not ray'`."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sweep_support import plan_of, run_cli, same_outputs

from kvreplay.sweep.run import SweepOptions, run_sweep
from kvreplay.sweep.task import PointJob, PointResult

pytestmark = pytest.mark.ray


def test_ray_results_are_byte_identical_to_local(full_run: tuple[Path, Path], local_ray: Any,
                                                 tmp_path: Path) -> None:
    """The 12-point sweep over 2,000 rows as Ray tasks (traces through the object store): the
    same tables, best point, manifest and reports, byte for byte, and so the same page."""
    from kvreplay.html import render_sweep_html
    from kvreplay.sweep.folder import read_results

    sweep, local = full_run
    out = tmp_path / "ray"
    assert run_cli("sweep", str(sweep), "-o", str(out), "--executor", "ray",
                   "--no-progress", "-q", "--html") == 0
    same_outputs(local, out)
    assert (out / "sweep.html").read_text() == render_sweep_html(read_results(str(local)))


def test_ray_path_transport_gives_the_same_bytes(small_run: tuple[Path, Path], local_ray: Any,
                                                 tmp_path: Path) -> None:
    """--trace-transport path (every node reads the trace from the same path)."""
    sweep, local = small_run
    out = tmp_path / "ray-path"
    assert run_cli("sweep", str(sweep), "-o", str(out), "--executor", "ray",
                   "--trace-transport", "path", "--no-progress", "-q") == 0
    same_outputs(local, out)


def _ancestors(pid: int) -> set[int]:
    found: set[int] = set()
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
                pid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        found.add(pid)
    return found


def _our_task_processes() -> list[int]:
    """Ray worker processes of this test's Ray instance that are running a point now."""
    mine = os.getpid()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                title = fh.read(64)
        except OSError:
            continue
        if title.startswith(b"ray::run_point") and mine in _ancestors(int(name)):
            out.append(int(name))
    return out


def test_a_killed_ray_task_process_is_retried(small_run: tuple[Path, Path], local_ray: Any,
                                              tmp_path: Path) -> None:
    """SIGKILL of the process running a point after the first point finished: the task fails
    with a crash, is retried once, and the table is complete and unchanged."""
    sweep, local = small_run
    out = tmp_path / "ray-killed"
    killed: list[int] = []
    watchers: list[threading.Thread] = []

    def watch() -> None:  # beside the sweep, which goes on submitting points meanwhile
        deadline = time.monotonic() + 60
        while not killed and time.monotonic() < deadline:
            busy = _our_task_processes()
            if busy:
                os.kill(busy[0], signal.SIGKILL)
                killed.append(busy[0])
            time.sleep(0.005)

    def kill_once(job: PointJob, result: PointResult) -> None:
        if not watchers:
            watchers.append(threading.Thread(target=watch, daemon=True))
            watchers[0].start()

    outcome = run_sweep(plan_of(sweep), SweepOptions(str(out), executor="ray"),
                        on_result=kill_once)
    watchers[0].join()
    assert killed and outcome.stats.retried >= 1 and outcome.stats.failed == 0
    assert [r["status"] for r in outcome.rows] == ["ok"] * 12 + ["skipped"]
    same_outputs(local, out)


@pytest.mark.parametrize("transport", ["object-store", "path"])
def test_a_trace_planted_in_the_shared_temp_folder_is_never_replayed(
        small_run: tuple[Path, Path], small_trace: Path, local_ray: Any, tmp_path: Path,
        transport: str) -> None:
    """Issue 30: another trace planted where workers used to keep their copy of the sweep's
    trace (`$TMPDIR/kvreplay-sweep-traces/<digest>.jsonl`) is not what the points replay:
    workers copy the trace into a private mkdtemp folder and check its digest, so the results
    are the undisturbed run's, byte for byte."""
    import tempfile

    from kvreplay.sweep.task import trace_digest

    sweep, local = small_run
    shared = Path(tempfile.gettempdir()) / "kvreplay-sweep-traces"
    shared.mkdir(exist_ok=True)
    planted = shared / f"{trace_digest(str(small_trace))}.jsonl"
    lines = small_trace.read_text(encoding="utf-8").splitlines(keepends=True)
    planted.write_text("".join(lines[:40]), encoding="utf-8")
    try:
        out = tmp_path / "ray-planted"
        assert run_cli("sweep", str(sweep), "-o", str(out), "--executor", "ray",
                       "--trace-transport", transport, "--no-progress", "-q") == 0
        same_outputs(local, out)
    finally:
        planted.unlink()


def test_an_unreachable_ray_address_fails_at_once_saying_so(small_run: tuple[Path, Path],
                                                           tmp_path: Path) -> None:
    """Issue 30: `--executor ray --address` where nothing listens waited a minute and more
    without a word; now the sweep says it cannot reach the cluster and exits 2, writing
    nothing (a port just closed on this machine: refused at once)."""
    import socket
    import subprocess
    import sys

    pytest.importorskip("ray")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sweep, _ = small_run
    out = tmp_path / "o"
    child = subprocess.run(
        [sys.executable, "-m", "kvreplay", "sweep", str(sweep), "-o", str(out), "--executor",
         "ray", "--address", f"127.0.0.1:{port}", "--no-progress"],
        capture_output=True, text=True, timeout=60)
    assert child.returncode == 2
    assert f"cannot reach the Ray cluster at 127.0.0.1:{port}: Connection refused" in child.stderr
    assert not out.exists()


def test_reach_leaves_addresses_without_a_port_to_ray() -> None:
    """`auto` and a bare host are Ray's to resolve; a bad port number is not checked either."""
    from kvreplay.sweep.executors import reach

    for address in ("auto", "head-node", "ray://", "host:port"):
        reach(address)
