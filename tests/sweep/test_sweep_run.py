"""`kvreplay sweep` on local processes: the table, the reports, the best point, resuming, a
killed worker and Ctrl-C."""

from __future__ import annotations

import csv
import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import attrs
import pytest
from sweep_support import SLICE, invoke, plan_of, same_outputs, write_sweep

from kvreplay import __version__
from kvreplay.sweep.run import SweepOptions, run_sweep
from kvreplay.sweep.task import PointJob, PointResult


def _rows(out: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_local_sweep_writes_a_row_per_point_in_point_order(full_run: tuple[Path, Path]) -> None:
    """12 points ran, the refused one is skipped with its rule ID, rows follow point order."""
    _, out = full_run
    rows = _rows(out)
    assert [r["point"] for r in rows] == list(range(13))
    assert [r["status"] for r in rows] == ["ok"] * 12 + ["skipped"]
    assert rows[12]["rules"] == ["G2-BACKEND"] and rows[12]["report"] is None
    assert rows[0]["parameters"] == {"engine.workers.aggregated.parallelism.replicas": 1,
                                     "engine.workers.aggregated.kv_cache.capacity.blocks": 200,
                                     "router.policy": "round_robin"}
    assert rows[1]["parameters"]["router.policy"] == "kv_router"  # the last path varies fastest
    assert all(r["figures"]["num_requests"] == 2000 for r in rows[:12])


def test_reports_are_named_by_spec_digest_and_hold_no_wall_time(
        full_run: tuple[Path, Path]) -> None:
    """Each ok row's report is reports/<spec digest>.json, complete, stamped, without wall time."""
    _, out = full_run
    for row in _rows(out)[:12]:
        assert row["report"] == f"reports/{row['spec_digest']}.json"
        report = json.loads((out / row["report"]).read_text())
        assert report["meta"]["sweep_point"] == {"spec_digest": row["spec_digest"],
                                                 "trace_digest": row["trace_digest"]}
        assert report["meta"]["wall_time_ms"] is None
        assert report["meta"]["kvreplay_version"] == __version__
        assert report["summary"]["p90_ttft_ms"] == row["figures"]["p90_ttft_ms"]
        assert len(report["per_request"]) == 2000


def test_csv_matches_the_jsonl_rows(full_run: tuple[Path, Path]) -> None:
    """results.csv has the fixed columns, the swept paths, then the figures; one line a row."""
    _, out = full_run
    with (out / "results.csv").open(newline="") as fh:
        table = list(csv.DictReader(fh))
    rows = _rows(out)
    assert len(table) == len(rows)
    first = (out / "results.csv").read_text().splitlines()[0].split(",")
    assert first[:10] == ["point", "trace", "status", "rules", "error", "spec_digest",
                          "trace_digest", "report", "sla_ok", "rejections"]
    assert first[10:13] == ["engine.workers.aggregated.parallelism.replicas",
                           "engine.workers.aggregated.kv_cache.capacity.blocks", "router.policy"]
    for line, row in zip(table, rows, strict=True):
        assert line["status"] == row["status"]
        assert line["p90_ttft_ms"] == ("" if row["figures"]["p90_ttft_ms"] is None
                                       else repr(row["figures"]["p90_ttft_ms"]))
    assert table[12]["rules"] == "G2-BACKEND"
    assert table[12]["engine.workers.aggregated.parallelism.replicas"] == ""  # not set there


def test_best_point_is_the_cheapest_that_meets_the_sla(full_run: tuple[Path, Path]) -> None:
    """best.json names the lowest-gpu_hours point with p90 TTFT <= 200 ms and no rejected
    request (earliest on a tie)."""
    _, out = full_run
    rows = _rows(out)
    best = json.loads((out / "best.json").read_text())
    meeting = [r for r in rows if r["status"] == "ok" and r["figures"]["p90_ttft_ms"] <= 200
               and r["figures"]["rejected_requests"] == 0]
    expected = min(meeting, key=lambda r: (r["figures"]["gpu_hours"], r["point"]))
    assert best["complete"] is True
    assert best["best"]["point"] == expected["point"]
    assert best["best"]["value"] == expected["figures"]["gpu_hours"]
    assert best["counts"]["meet_sla"] == len(meeting)
    assert best["counts"]["skipped"] == 1
    assert f"point {expected['point']} (" in best["explanation"]
    assert "meet the SLA (p90_ttft_ms <= 200 and no request rejected)" in best["explanation"]


def test_parquet_holds_the_same_table(full_run: tuple[Path, Path]) -> None:
    """results.parquet has the CSV's columns and rows (figures as numbers)."""
    pq = pytest.importorskip("pyarrow.parquet")
    _, out = full_run
    table = pq.read_table(out / "results.parquet").to_pylist()
    rows = _rows(out)
    assert [t["point"] for t in table] == [r["point"] for r in rows]
    assert [t["gpu_hours"] for t in table] == [r["figures"]["gpu_hours"] for r in rows]
    assert table[12]["rules"] == "G2-BACKEND"


def _counted(out: Path, sweep: Path) -> tuple[list[str], object]:
    ran: list[str] = []

    def count(job: PointJob, result: PointResult) -> None:
        ran.append(job.name)

    outcome = run_sweep(plan_of(sweep), SweepOptions(str(out), jobs=2), on_result=count)
    return ran, outcome


def test_a_resumed_sweep_runs_no_finished_point(full_run: tuple[Path, Path],
                                                tmp_path: Path) -> None:
    """A rerun over finished reports runs nothing and touches no report; a missing and a cut
    report are run again, and only they; the tables come out identical."""
    sweep, done = full_run
    out = tmp_path / "results"
    shutil.copytree(done, out)
    stamps = {p.name: p.stat().st_mtime_ns for p in (out / "reports").iterdir()}
    ran, _ = _counted(out, sweep)
    assert ran == []
    assert {p.name: p.stat().st_mtime_ns for p in (out / "reports").iterdir()} == stamps
    same_outputs(done, out)
    rows = _rows(out)
    missing, cut = rows[3]["spec_digest"], rows[7]["spec_digest"]
    (out / "reports" / f"{missing}.json").unlink()
    text = (out / "reports" / f"{cut}.json").read_text()
    (out / "reports" / f"{cut}.json").write_text(text[: len(text) // 2])
    ran, _ = _counted(out, sweep)
    assert sorted(ran) == sorted([missing, cut])
    same_outputs(done, out)


def test_a_killed_pool_process_is_retried(small_run: tuple[Path, Path], tmp_path: Path) -> None:
    """SIGKILL of a pool process after the first point: the pool is rebuilt, the points it held
    are retried, and the table is complete and equal to an undisturbed run's."""
    sweep, reference = small_run
    out = tmp_path / "results"
    killed: list[int] = []

    def kill_once(job: PointJob, result: PointResult) -> None:
        if not killed:
            children = multiprocessing.active_children()
            assert children
            killed.append(children[0].pid or 0)
            os.kill(children[0].pid or 0, signal.SIGKILL)

    outcome = run_sweep(plan_of(sweep), SweepOptions(str(out), jobs=2), on_result=kill_once)
    assert killed and outcome.stats.retried >= 1 and outcome.stats.failed == 0
    assert [r["status"] for r in outcome.rows] == ["ok"] * 12 + ["skipped"]
    same_outputs(reference, out)


def test_ctrl_c_leaves_finished_reports_and_a_consistent_table(tmp_path: Path) -> None:
    """SIGINT to the whole process group mid-sweep, as a terminal's Ctrl-C: exit 130, no
    traceback from the sweep or its pool processes, every row present (ok with a valid report,
    or pending), best.json says the sweep is incomplete, no temp file is left."""
    sweep = write_sweep(tmp_path, SLICE)
    out = tmp_path / "results"
    child = subprocess.Popen(
        [sys.executable, "-m", "kvreplay", "sweep", str(sweep), "-o", str(out), "-j", "1",
         "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), start_new_session=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and child.poll() is None:
        reports = out / "reports"
        if reports.is_dir() and any(p.suffix == ".json" for p in reports.iterdir()):
            break
        time.sleep(0.02)
    os.killpg(child.pid, signal.SIGINT)
    _, err = child.communicate(timeout=120)
    assert child.returncode == 130, err
    assert "kvreplay: interrupted" in err and "Traceback" not in err
    assert "rerun the same command to resume" in err
    rows = _rows(out)
    assert [r["point"] for r in rows] == list(range(13))
    statuses = [r["status"] for r in rows]
    assert "pending" in statuses and statuses[12] == "skipped"
    for row in rows:
        if row["status"] == "ok":
            assert json.loads((out / row["report"]).read_text())["summary"]
    assert json.loads((out / "best.json").read_text())["complete"] is False
    assert not [p for p in out.rglob(".kvreplay-*")]


HALF_SENT = """\
import os, struct, time
from kvreplay.sweep.executors import LocalBackend
from kvreplay.sweep.task import PointJob

if __name__ == "__main__":
    backend = LocalBackend(2)
    job = PointJob("p", "{not json", "d", None, None)
    futures = [backend.submit(job), backend.submit(job)]
    while not all(f.done() for f in futures):
        time.sleep(0.05)
    # The head of a 1 MB result and 16 of its bytes: what a pool process killed while sending
    # its report leaves in the result pipe (the pool's manager thread now waits for the rest).
    os.write(backend.pool._result_queue._writer.fileno(), struct.pack("!i", 1 << 20) + bytes(16))
    time.sleep(0.5)
    backend.close(kill=True)  # what Ctrl-C does
"""


def test_ctrl_c_while_a_report_is_half_sent_does_not_hang_the_exit(tmp_path: Path) -> None:
    """Issue 22: after Ctrl-C with --jobs 2, about one sweep in ten waited in `_python_exit`
    for the pool's manager thread, stuck reading the report of a process killed mid-send.
    The same state made deterministic: the process exits at once."""
    script = tmp_path / "half_sent.py"
    script.write_text(HALF_SENT, encoding="utf-8")
    child = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = child.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        pytest.fail("the process hung at exit after closing the pool")
    assert child.returncode == 0, err


def _children(pid: int) -> list[int]:
    """The live processes whose parent is `pid` (from /proc)."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            state = _state(int(name))
            if state is not None and state[1] == pid and state[0] != "Z":
                out.append(int(name))
    return out


def _state(pid: int) -> tuple[str, int] | None:
    """(state letter, parent pid) of a process, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[1])


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_the_pool_dies_with_a_sigkilled_sweep(tmp_path: Path) -> None:
    """Issue 30: SIGKILL of the sweep process (no cleanup can run) left its pool processes
    replaying; they now end with it."""
    sweep = write_sweep(tmp_path, SLICE)
    child = subprocess.Popen(
        [sys.executable, "-m", "kvreplay", "sweep", str(sweep), "-o", str(tmp_path / "r"),
         "-j", "2", "--no-progress"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    deadline = time.monotonic() + 120
    pool: list[int] = []
    while time.monotonic() < deadline and child.poll() is None and len(pool) < 2:
        pool = [p for p in _children(child.pid)
                if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()]
        time.sleep(0.05)
    assert len(pool) == 2, "the pool did not start"
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(
            (_state(p) or ("Z", 0))[0] != "Z" for p in pool):
        time.sleep(0.05)
    left = [p for p in pool if (_state(p) or ("Z", 0))[0] != "Z"]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == []


ORPHAN = """\
import multiprocessing, os, sys, time

def orphan(parent, armed):
    from kvreplay.sweep import task
    task._death_signal = lambda: False  # the watch thread, as where no prctl exists
    task.die_with(parent)
    open(armed, "w").close()
    time.sleep(120)

if __name__ == "__main__":
    armed = sys.argv[1]
    child = multiprocessing.get_context("spawn").Process(target=orphan,
                                                         args=(os.getpid(), armed))
    child.start()
    while not os.path.exists(armed) and child.is_alive():
        time.sleep(0.02)
    print(child.pid, flush=True)
    os._exit(0)  # no cleanup, as after SIGKILL
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_without_a_death_signal_a_thread_ends_the_orphan(tmp_path: Path) -> None:
    """Where the kernel has no parent-death signal, a thread watching the parent's pid ends
    the worker within a second or two of the parent's death."""
    script = tmp_path / "orphan.py"
    script.write_text(ORPHAN, encoding="utf-8")
    armed = tmp_path / "armed"
    done = subprocess.run([sys.executable, str(script), str(armed)], capture_output=True,
                          text=True, timeout=60)
    assert armed.exists(), done.stderr
    orphan = int(done.stdout.split()[0])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (_state(orphan) or ("Z", 0))[0] != "Z":
        time.sleep(0.05)
    alive = (_state(orphan) or ("Z", 0))[0] != "Z"
    if alive:
        os.kill(orphan, signal.SIGKILL)
    assert not alive


def test_without_ray_the_ray_executor_is_a_usage_error(
        small_run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """--executor ray without Ray installed: exit 2, one line saying what to install."""
    sweep, _ = small_run
    monkeypatch.setitem(sys.modules, "ray", None)
    ran = invoke(capsys, "sweep", str(sweep), "-o", str(tmp_path / "o"), "--executor", "ray")
    assert ran.code == 2
    assert "pip install 'kvreplay[ray]'" in ran.err and "Traceback" not in ran.err
    assert not (tmp_path / "o").exists()


def test_a_point_failing_twice_is_recorded_and_the_sweep_goes_on(
        small_run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A point whose runs fail is retried once, then its row says failed with the error; the
    other points finish and the command exits 1."""
    from kvreplay.sweep import run as run_module
    from kvreplay.sweep.executors import LocalBackend

    class FailFirst(LocalBackend):
        def submit(self, job: PointJob) -> object:
            first = sorted(j.name for j in jobs)[0]
            if job.name == first:
                job = attrs.evolve(job, native="{not json")
            return super().submit(job)

    jobs: list[PointJob] = []
    real = run_module.execute

    def spy(given: list[PointJob], *args: object, **kwargs: object) -> object:
        jobs.extend(given)
        return real(given, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(run_module, "execute", spy)
    monkeypatch.setattr(run_module, "_backend", lambda options, count, traces: FailFirst(2))
    sweep, _ = small_run
    out = tmp_path / "results"
    ran = invoke(capsys, "sweep", str(sweep), "-o", str(out), "--no-progress")
    assert ran.code == 1 and "1 failed; 1 run(s) retried" in ran.out
    rows = _rows(out)
    failed = [r for r in rows if r["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["error"] and failed[0]["report"] is None
    assert [r["status"] for r in rows].count("ok") == 11
