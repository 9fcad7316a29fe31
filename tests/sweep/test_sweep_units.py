"""The scheduling loop (retries, crash isolation) on a scripted backend, the best-point choice,
and the table's cell encoding: no processes, no replays."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from kvreplay.sweep.best import choose_best
from kvreplay.sweep.executors import Crash, Outcome, execute
from kvreplay.sweep.model import Bound, Objective, Point, Setting, SweepPlan, Trace
from kvreplay.sweep.results import csv_text, make_row
from kvreplay.sweep.task import PointJob, PointResult

VERSION = "9.9"


class Scripted:
    """A backend whose every attempt of a job ends as scripted (then succeeds)."""

    isolate_crashes = True

    def __init__(self, script: dict[str, list[str]], capacity: int = 2) -> None:
        self.capacity = capacity
        self.script = script
        self.inflight: list[str] = []
        self.log: list[tuple[str, tuple[str, ...]]] = []  # (job, others in flight at submit)

    def submit(self, job: PointJob) -> Any:
        self.log.append((job.name, tuple(self.inflight)))
        self.inflight.append(job.name)
        return job.name

    def wait(self, handles: Sequence[Any], timeout: float) -> list[tuple[Any, Outcome]]:
        name = handles[0]
        self.inflight.remove(name)
        steps = self.script.get(name, [])
        step = steps.pop(0) if steps else "ok"
        if step == "crash":
            return [(name, Crash("killed"))]
        if step == "fail":
            return [(name, PointResult(name, VERSION, error="boom"))]
        if step == "old":
            return [(name, PointResult(name, "0.0", "{}", {}))]
        return [(name, PointResult(name, VERSION, "{}", {}))]

    def close(self, *, kill: bool) -> None:
        pass


def _jobs(*names: str) -> list[PointJob]:
    return [PointJob(n, "{}", n, None, None) for n in names]


def _run(backend: Scripted, names: Sequence[str]) -> tuple[dict[str, PointResult], Any]:
    results: dict[str, PointResult] = {}
    stats = execute(_jobs(*names), backend, lambda j, r: results.__setitem__(j.name, r),
                    tick=lambda: None, version=VERSION, tick_s=0)
    return results, stats


def test_a_failure_is_retried_once_then_succeeds() -> None:
    """One failed attempt, one retry: the point ends ok."""
    results, stats = _run(Scripted({"a": ["fail"]}), ["a", "b"])
    assert results["a"].ok and results["b"].ok
    assert (stats.retried, stats.failed, stats.ran) == (1, 0, 3)


def test_two_failures_record_the_point_as_failed_and_go_on() -> None:
    """A point that fails twice is recorded failed with its error; the others still run."""
    results, stats = _run(Scripted({"a": ["fail", "fail"]}), ["a", "b", "c"])
    assert results["a"].error == "boom" and results["b"].ok and results["c"].ok
    assert (stats.retried, stats.failed) == (1, 1)


def test_a_crashed_point_is_retried_alone() -> None:
    """After a worker death, the retry runs with nothing else in flight, and nothing starts
    beside it."""
    backend = Scripted({"b": ["crash"]})
    results, stats = _run(backend, ["a", "b", "c", "d"])
    assert all(r.ok for r in results.values()) and stats.retried == 1
    retry = [i for i, (name, _) in enumerate(backend.log) if name == "b"][1]
    assert backend.log[retry][1] == ()
    assert backend.log[retry + 1][1] == ()  # the next job was submitted after it finished


def test_a_point_crashing_twice_is_failed() -> None:
    """Two deaths: failed, saying the worker died."""
    results, stats = _run(Scripted({"a": ["crash", "crash"]}), ["a"])
    assert not results["a"].ok and "died" in (results["a"].error or "")
    assert stats.failed == 1


def test_a_worker_of_another_version_fails_the_point() -> None:
    """A report made by another kvreplay version is not taken."""
    results, _ = _run(Scripted({"a": ["old", "old"]}), ["a"])
    assert "0.0" in (results["a"].error or "")


GPU_HOURS = Objective("gpu_hours", "minimize")


def _plan(traces: int = 1, sla: tuple[Bound, ...] = (),
          objective: Objective = GPU_HOURS) -> SweepPlan:
    points = tuple(Point(i, (Setting("router.policy", v, ("grid", "router.policy", i)),),
                         "ok", spec_digest=f"d{i}")
                   for i, v in enumerate(["round_robin", "kv_router", None, "kv_router"]))
    return SweepPlan("s.yaml", None, (), points, ("router.policy",),
                     tuple(Trace(f"t{n}", f"/t{n}") for n in range(traces)), sla, objective)


def _row(plan: SweepPlan, point: int, trace: str | None, **figures: float) -> dict[str, Any]:
    return make_row(plan, point, trace, status="ok",
                    summary={"rejected_requests": 0, **figures})


def test_best_is_judged_on_the_worst_trace() -> None:
    """With two traces, a point meets the SLA only on both and counts its worse objective."""
    plan = _plan(traces=2, sla=(Bound("p90_ttft_ms", "max", 200.0),))
    rows = [_row(plan, 0, "t0", gpu_hours=1.0, p90_ttft_ms=100), _row(plan, 0, "t1", gpu_hours=5.0,
                                                                       p90_ttft_ms=100),
            _row(plan, 1, "t0", gpu_hours=2.0, p90_ttft_ms=100), _row(plan, 1, "t1", gpu_hours=3.0,
                                                                       p90_ttft_ms=150),
            _row(plan, 2, "t0", gpu_hours=0.5, p90_ttft_ms=100), _row(plan, 2, "t1", gpu_hours=0.5,
                                                                       p90_ttft_ms=300),
            make_row(plan, 3, "t0", status="skipped", rules=["G2-BACKEND"]),
            make_row(plan, 3, "t1", status="skipped", rules=["G2-BACKEND"])]
    best = choose_best(plan, rows, complete=True)
    assert best["best"]["point"] == 1 and best["best"]["value"] == 3.0
    assert best["runner_up"]["point"] == 0
    assert best["counts"] == {"points": 4, "meet_sla": 2, "miss_sla": 1, "skipped": 1,
                              "failed": 0, "pending": 0}
    assert "on its worst trace" in best["explanation"]


def test_ties_go_to_the_earlier_point_and_maximize_works() -> None:
    """Equal objectives: the lower point index wins; `maximize` picks the highest value."""
    plan = _plan(objective=Objective("request_throughput_rps", "maximize"))
    rows = [_row(plan, i, "t0", request_throughput_rps=v) for i, v in enumerate([1, 3, 3, 2])]
    best = choose_best(plan, rows, complete=True)
    assert best["best"]["point"] == 1 and best["runner_up"]["point"] == 2
    assert "highest request_throughput_rps" in best["explanation"]


def test_no_qualifying_point_and_an_interrupted_sweep() -> None:
    """No point meets the SLA: best is null; pending rows make the choice incomplete."""
    plan = _plan(sla=(Bound("p90_ttft_ms", "max", 1.0),))
    rows = [_row(plan, 0, "t0", gpu_hours=1.0, p90_ttft_ms=5.0),
            _row(plan, 1, "t0", gpu_hours=1.0),  # no TTFT measured: the bound is not met
            make_row(plan, 2, "t0", status="pending"),
            make_row(plan, 3, "t0", status="failed", error="boom")]
    best = choose_best(plan, rows, complete=False)
    assert best["best"] is None and best["complete"] is False
    assert best["counts"]["miss_sla"] == 2 and best["counts"]["pending"] == 1
    assert best["explanation"].startswith("no point qualifies (interrupted")


@pytest.mark.parametrize(("value", "cell"), [(None, "null"), ("kv_router", "kv_router"),
                                             ({"a": 1}, '{"a": 1}'), (2.5, "2.5"), (True, "true")])
def test_csv_cells_of_parameters(value: Any, cell: str) -> None:
    """A parameter set to null shows `null` (unset stays empty); mappings are JSON."""
    points = (Point(0, (Setting("x.y", value, ("points", 0, "x.y")),), "ok"), Point(1, (), "ok"))
    plan = SweepPlan("s.yaml", None, (), points, ("x.y",))
    rows = [make_row(plan, 0, None, status="ok"), make_row(plan, 1, None, status="ok")]
    header, first, second = csv_text(rows).splitlines()
    names = header.split(",")
    assert names.index("x.y") == 10
    import csv

    parsed = list(csv.reader([first, second]))
    assert parsed[0][10] == cell and parsed[1][10] == ""


def test_results_csv_quotes_and_neutralizes_text() -> None:
    """results.csv: a swept string beginning with `=`/`-`/`@`, an error with a CR, a trace
    named `+x`: one record per row, each formula behind a `'`; negative numbers stay numbers."""
    import csv

    values = ["=HYPERLINK(\"http://x.test\")", "-2+3", "@SUM(A1)", -1.5, 'a\rb,"c"']
    points = tuple(Point(i, (Setting("x.y", v, ("points", i, "x.y")),), "ok")
                   for i, v in enumerate(values))
    plan = SweepPlan("s.yaml", None, (), points, ("x.y",))
    rows = [make_row(plan, i, "+trace.jsonl", status="failed", error="line\rbreak")
            for i in range(len(values))]
    with_header = list(csv.reader(csv_text(rows).splitlines(keepends=True)))
    assert len(with_header) == 1 + len(values)
    header, *table = with_header
    column, trace, error = (header.index(n) for n in ("x.y", "trace", "error"))
    assert [line[column] for line in table] == ["'=HYPERLINK(\"http://x.test\")", "'-2+3",
                                                "'@SUM(A1)", "-1.5", 'a\rb,"c"']
    assert {line[trace] for line in table} == {"'+trace.jsonl"}
    assert {line[error] for line in table} == {"line\rbreak"}


@pytest.mark.parametrize(("given", "shown"), [
    ("examples/sweeps/a.yaml", "examples/sweeps/a.yaml"), ("./x/../a.yaml", "a.yaml"),
    ("../up/a.yaml", "../up/a.yaml"), ("/abs/olute/a.yaml", "a.yaml")])
def test_sweep_json_names_the_sweep_file_without_an_absolute_path(given: str, shown: str) -> None:
    """A relative path as given (normalized), an absolute one by its file name."""
    from kvreplay.sweep.manifest import shown_path

    assert shown_path(given) == shown


def _rejecting(plan: SweepPlan, point: int, count: int) -> dict[str, Any]:
    summary = {"gpu_hours": 1.0 + point, "rejected_requests": count, "rejections": [
        {"reason": "kv_cache", "limit_tokens": 1024, "count": count,
         "message": "prompt larger than the KV cache (max 1,024 tokens)"}] if count else []}
    return make_row(plan, point, "t0", status="ok", summary=summary)


def test_a_point_that_rejects_requests_misses_the_sla() -> None:
    """The cheapest point rejected a request: it misses the SLA (max_rejected 0) and the
    explanation says which point and why."""
    plan = _plan()
    rows = [_rejecting(plan, 0, 1), _rejecting(plan, 1, 0), _rejecting(plan, 2, 0),
            _rejecting(plan, 3, 0)]
    assert rows[0]["sla_ok"] is False
    assert rows[0]["rejections"] == "1 rejected: prompt larger than the KV cache (max 1,024 tokens)"
    best = choose_best(plan, rows, complete=True)
    assert best["best"]["point"] == 1 and best["sla"] == {"rejected_requests": {"max": 0}}
    assert "(no request rejected)" in best["explanation"]
    assert best["explanation"].endswith(
        " 1 point misses the SLA by rejecting requests, e.g. point 0: 1 rejected: prompt larger "
        "than the KV cache (max 1,024 tokens).")


def test_max_rejected_allows_that_many_rejections() -> None:
    """`sla.max_rejected: 2` lets a point with 2 rejected requests meet the SLA, not one with 3."""
    plan = attrs.evolve(_plan(), max_rejected=2)
    rows = [_rejecting(plan, 0, 3), _rejecting(plan, 1, 2)]
    assert [r["sla_ok"] for r in rows] == [False, True]
    best = choose_best(plan, rows, complete=True)
    assert best["best"]["point"] == 1 and "at most 2 requests rejected" in best["explanation"]


def _trace_job(path: str, digest: str) -> PointJob:
    from kvreplay.compiler.documents import compile_text

    config = ("engine:\n  model: m\n  workers:\n    aggregated:\n"
              "      kv_cache: {block_size: 512, capacity: {type: fixed, blocks: 100}}\n"
              "      timing: {type: fixed, prefill_ms: 20, decode_ms: 5}\n"
              "traffic:\n  source: {type: trace, format: mooncake, block_size: 512, "
              "paths: [t.jsonl]}\n  load: {type: trace_timestamps}\n")
    native = compile_text(config, "c.yaml").emitted()
    return PointJob("p", native, "d", digest, path, ".jsonl", private_copy=True)


def test_a_private_trace_copy_is_checked_and_kept_in_a_0700_folder(tmp_path: Any) -> None:
    """Ray's path transport: the worker replays a copy of the trace in its own mkdtemp folder
    (mode 0700, not a predictable name), made once the copy's digest is the sweep's; a trace
    whose bytes changed since the sweep digested it fails the point, saying so."""
    import os
    import stat

    from kvreplay.sweep import task

    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 600, "output_length": 3, '
                     '"hash_ids": [1, 2]}\n', encoding="utf-8")
    digest = task.trace_digest(str(trace))
    result = task.run_point(_trace_job(str(trace), digest))
    assert result.ok, result.error
    copy = task._COPIES[f"{digest}.jsonl"]
    folder = os.path.dirname(copy)
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert os.path.basename(folder) != "kvreplay-sweep-traces"
    changed = task.run_point(_trace_job(str(trace), "0123456789abcdef"))
    assert not changed.ok
    assert f"the trace at {trace} has digest {digest}, not the 0123456789abcdef" in str(
        changed.error)


def test_a_folder_of_plays_is_copied_whole_and_checked(tmp_path: Any) -> None:
    """The path transport on a folder of Weka plays: the private copy holds every file under
    its relative name, and its digest is the folder's."""
    from kvreplay.sweep import task

    plays = tmp_path / "plays"
    (plays / "b").mkdir(parents=True)
    (plays / "a.jsonl").write_text("{}\n", encoding="utf-8")
    (plays / "b" / "c.jsonl").write_text("[]\n", encoding="utf-8")
    digest = task.trace_digest(str(plays))
    job = PointJob("p", "{}", "d", digest, str(plays), "", private_copy=True)
    copy = task._private_copy(job)
    assert copy != str(plays) and task.trace_digest(copy) == digest
    assert (Path(copy) / "b" / "c.jsonl").read_text(encoding="utf-8") == "[]\n"
    assert task._private_copy(job) == copy  # made once per digest
