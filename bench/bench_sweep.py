"""Sweep executors side by side: the 12-point sweep of the tests (3 x 2 x 2 grid over the 2,000
Mooncake conversation rows of tests/data/sweep) with 1 and 2 local processes and as Ray tasks.

    python bench/bench_sweep.py [--repeat N] [--rows N] [--trace PATH] [--no-ray]

(`--trace` another Mooncake trace, e.g. the whole conversation trace, for longer points.)

Prints wall times, the speedup of 2 processes over 1 (goal: >= 1.8x on 2 cores) and Ray's
overhead per point against a point's own run time (goal: < 10%), measured as
(Ray sweep wall x CPUs / points) - (one point's run time, replayed in this process). Ray's
start-up (`ray.init`) is timed apart: a cluster pays it once, not per sweep. Figures are
printed, never asserted; on a shared machine, compare runs made at the same time.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SLICE = REPO / "tests" / "data" / "sweep" / "mooncake-conversation-2000.jsonl"
# Pool processes are spawned: they import this module again (as __mp_main__), so it imports
# nothing heavy at its top, as the `kvreplay` console script does not.


def _sweep(folder: Path, source: Path, rows: int) -> Path:
    sys.path.insert(0, str(REPO / "tests" / "sweep"))
    from sweep_support import write_sweep

    trace = folder / f"mooncake-{rows}.jsonl"
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)[:rows]
    trace.write_text("".join(lines), encoding="utf-8")
    return write_sweep(folder, trace)


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _timed_sweep(sweep: Path, out: Path, **options: object) -> tuple[float, float]:
    """(wall s, CPU s of the pool processes: not counted for Ray's workers)."""
    from sweep_support import plan_of

    from kvreplay.sweep.run import SweepOptions, run_sweep

    shutil.rmtree(out, ignore_errors=True)
    plan = plan_of(sweep)
    cpu = _children_cpu()
    started = time.perf_counter()
    outcome = run_sweep(plan, SweepOptions(str(out), **options))  # type: ignore[arg-type]
    wall = time.perf_counter() - started
    assert outcome.stats.failed == 0
    return wall, _children_cpu() - cpu


def _point_time(sweep: Path) -> tuple[float, int]:
    """Mean run time of one point replayed in this process (no pool, no Ray), and the count."""
    from sweep_support import plan_of

    from kvreplay.sweep.task import PointJob, run_point

    plan = plan_of(sweep)
    trace = plan.traces[0].path
    jobs = [PointJob(str(p.index), p.native, p.spec_digest, None, trace)
            for p in plan.points if p.native is not None and p.spec_digest is not None]
    run_point(jobs[0])  # imports
    started = time.perf_counter()
    for job in jobs:
        assert run_point(job).ok
    return (time.perf_counter() - started) / len(jobs), len(jobs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="best of N for each cell")
    parser.add_argument("--rows", type=int, default=2000, help="the first N rows of the trace")
    parser.add_argument("--trace", type=Path, default=SLICE,
                        help="a Mooncake trace (default: the tests' 2,000-row slice)")
    parser.add_argument("--no-ray", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        sweep = _sweep(folder, args.trace, args.rows)
        point_s, points = _point_time(sweep)
        cells = {}
        for label, options in (("local, 1 process", {"jobs": 1}),
                               ("local, 2 processes", {"jobs": 2})):
            cells[label] = min(_timed_sweep(sweep, folder / "out", **options)
                               for _ in range(args.repeat))
        init_s = None
        if not args.no_ray:
            import logging

            import ray

            started = time.perf_counter()
            ray.init(address="local", num_cpus=2, include_dashboard=False,
                     logging_level=logging.ERROR, log_to_driver=False)
            init_s = time.perf_counter() - started
            cells["ray, 2 CPUs"] = min(_timed_sweep(sweep, folder / "out", executor="ray")
                                       for _ in range(args.repeat))
            ray.shutdown()
    load = os.getloadavg()
    print(f"sweep: {points} points x {args.rows:,} Mooncake conversation rows (kv_router / "
          f"round_robin, fixed timing); one point replays in {point_s:.2f} s in-process")
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.1f} / {load[1]:.1f} "
          "(shared with other work: figures vary)")
    print(f"{'executor':<22}{'wall s':>8}{'per point s':>13}{'pool CPU s':>12}")
    for label, (wall, cpu) in cells.items():
        shown = f"{cpu:>12.2f}" if cpu else f"{'-':>12}"
        print(f"{label:<22}{wall:>8.2f}{wall / points:>13.2f}{shown}")
    one, two = cells["local, 1 process"][0], cells["local, 2 processes"][0]
    print(f"speedup, 2 processes over 1: {one / two:.2f}x (goal >= 1.8x); the pool's fixed "
          f"cost (spawn, imports, writing reports): {one - points * point_s:.2f} s with 1 "
          "process")
    if init_s is not None:
        per_point = cells["ray, 2 CPUs"][0] * 2 / points
        overhead = per_point - point_s
        print(f"ray: init {init_s:.1f} s (once per cluster, not counted); per point "
              f"{per_point:.2f} s of a CPU vs {point_s:.2f} s in-process: overhead "
              f"{overhead:+.2f} s = {overhead / point_s:+.0%} of a point (goal < 10%)")


if __name__ == "__main__":
    main()
