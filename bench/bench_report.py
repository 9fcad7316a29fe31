"""Report cost against replay time: building and writing the canonical report vs the replay.

    python bench/bench_report.py [--trace PATH] [--repeat 5] [--profile] [--only KIND]

Replays the 12k-request Mooncake conversation trace (the workplace's
shared/traces/mooncake/conversation_trace.jsonl; say --trace otherwise) in the regime of
bench_memory.py (8 aggregated workers, fixed timing 20 / 5 ms, round robin, trace timestamps),
in this process, as `kvreplay run -o` does, four ways, interleaved --repeat times:

- `bare`: a sink that drops every record (the replay alone: the ratio's denominator);
- `full`: the report sink with every per-request row (summary accumulated, rows printed and
  spilled as they end, as `run -o` does), then the report finished and written atomically;
- `summary`: the same with `--per-request summary-only`;
- `python`: `full` with the rows printed by the Python printers alone (as without a C compiler
  at install, or with KVREPLAY_PURE_PYTHON=1); `full` uses the compiled printer when built.

The report's cost is what it adds to the bare replay (the sink's own work and what it does to
the replay's caches), plus finishing the summary and writing the file (fsync included):
(replay with the sink - bare replay + finish + write) / bare replay, each phase the best of the
runs (the machine is shared), in wall time and in CPU time; and, for every row, the median over
the rounds of the same share within each round (the bare replay run just before). Goal (issue
14): at most 10% with every row. Also shown against the whole `kvreplay run` before the report
(compile, trace loading, replay). Printed, never asserted. Regime: aggregated workers, fixed
timing, round-robin routing, trace-timestamp load, no host tier (most rows of that trace hold one
admission and one routing decision).

`--profile` prints the report's functions by own time (cProfile) in one more `full` run; for a
sampling profile of the whole run: `py-spy record -f raw -o out.txt -- python
bench/bench_report.py --repeat 1`. `--only KIND` prepares and runs that one kind once and prints
nothing (`none`: only prepares), for instruction counts free of the machine's noise: the
report's cost is (full - bare) / (bare - none) of
`valgrind --tool=callgrind python bench/bench_report.py --only KIND`'s collected instructions.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_memory import CONFIG  # the same regime (bench/ is on sys.path)
from benchlib import SHARED_TRACE, require_trace

Clock = tuple[float, float]  # wall, CPU


def _now() -> Clock:
    return time.perf_counter(), time.process_time()


def _since(start: Clock) -> Clock:
    wall, cpu = _now()
    return wall - start[0], cpu - start[1]


def prepare(config: Path) -> tuple[Any, Callable[[], Any], Clock]:
    """The native document, a maker of its workload, and what compiling and loading cost."""
    from kvreplay.compiler.documents import compile_path
    from kvreplay.engine.traces import workload_from_traffic

    started = _now()
    native = compile_path(str(config)).native()

    def workload() -> Any:
        return workload_from_traffic(native["traffic"], base_dir=str(config.parent),
                                     block_size=512)

    workload()
    return native, workload, _since(started)


def run_once(native: Any, workload: Callable[[], Any], folder: str,
             kind: str) -> dict[str, Clock]:
    """One replay: `bare`, `full`, `summary` or `python` (see the module docstring)."""
    from kvreplay.engine import row_text, run_native
    from kvreplay.engine.report import sla_from_spec
    from kvreplay.engine.report_stream import ReportStream, write_report
    from kvreplay.io.output import Output

    loaded = workload()
    if kind == "bare":
        started = _now()
        run_native(native, workload=loaded, sink=lambda record: None)
        return {"replay": _since(started)}
    sink = ReportStream(sla_from_spec(native["spec"].get("sla")), rows=kind != "summary",
                        folder=folder)
    compiled = row_text.compiled_row
    if kind == "python":
        row_text.compiled_row = None
    try:
        started = _now()
        result = run_native(native, workload=loaded, sink=sink)
        replay = _since(started)
    finally:
        row_text.compiled_row = compiled
    started = _now()
    report = sink.finish(result, wall_time_ms=replay[0] * 1000.0)
    finish = _since(started)
    started = _now()
    with Output(os.path.join(folder, f"{kind}.json")) as out:  # as `kvreplay run -o` writes
        write_report(report, out, out.write_bytes)
        out.commit()
    write = _since(started)
    sink.close()
    return {"replay": replay, "finish": finish, "write": write}


def best(runs: list[dict[str, Clock]], phase: str, clock: int) -> float:
    return min(run[phase][clock] for run in runs)


def cost(runs: list[dict[str, Clock]], bare: list[dict[str, Clock]], clock: int) -> float:
    """Seconds the report adds: replay with the sink - bare replay + finish + write."""
    return (best(runs, "replay", clock) - best(bare, "replay", clock)
            + best(runs, "finish", clock) + best(runs, "write", clock))


def paired(runs: list[dict[str, Clock]], bare: list[dict[str, Clock]]) -> float:
    """The report's share of the replay's wall time, per round (a run and the bare replay just
    before it), the median of the rounds: steadier than the best of each when one bare replay
    is luckily fast."""
    shares = sorted((run["replay"][0] - alone["replay"][0] + run["finish"][0] + run["write"][0])
                    / alone["replay"][0] for run, alone in zip(runs, bare, strict=True))
    return statistics.median(shares)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace", type=Path, default=SHARED_TRACE)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--only", choices=["none", "bare", "full", "summary", "python"])
    args = parser.parse_args()
    require_trace(args.trace, "bench_report")
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "run.yaml"
        config.write_text(CONFIG.format(trace=args.trace.resolve()), encoding="utf-8")
        native, workload, before = prepare(config)
        from kvreplay.engine import row_text

        if args.only is not None:
            if args.only == "none":
                workload()  # as run_once loads it
            else:
                run_once(native, workload, tmp, args.only)
            return 0

        kinds = ["bare", "full", "summary"] + (["python"] if row_text.compiled_row else [])
        runs: dict[str, list[dict[str, Clock]]] = {kind: [] for kind in kinds}
        for _ in range(max(args.repeat, 1)):
            for kind, found in runs.items():
                found.append(run_once(native, workload, tmp, kind))
        size = os.path.getsize(os.path.join(tmp, "full.json"))
        bare = runs["bare"]
        print(f"report {size / 1e6:.1f} MB; best of {len(bare)} runs each, wall s (CPU s)")
        print("              replay      finish       write   report / bare replay")
        for kind in kinds:
            found = runs[kind]
            line = f"{kind:<8} " + "".join(
                f"{best(found, phase, 0):>6.3f} ({best(found, phase, 1):.3f})"
                if phase in found[0] else f"{'':>12}" for phase in ("replay", "finish", "write"))
            if kind != "bare":
                line += (f"   {cost(found, bare, 0) / best(bare, 'replay', 0):6.1%} "
                         f"({cost(found, bare, 1) / best(bare, 'replay', 1):.1%})")
            print(line)
        print("rows printed by the " + ("compiled printer (engine/_rowtext.c); `python`: by the "
                                        "Python printers" if row_text.compiled_row else
                                        "Python printers (the compiled one is not built)"))
        whole = before[0] + best(bare, "replay", 0)
        print(f"with every row: {cost(runs['full'], bare, 0) / best(bare, 'replay', 0):.1%} of "
              f"the replay's wall time (goal: at most 10%; median of the {len(bare)} rounds "
              f"{paired(runs['full'], bare):.1%}); "
              f"{cost(runs['full'], bare, 0) / whole:.1%} of compile + trace load + replay "
              f"({before[0]:.2f} s + {best(bare, 'replay', 0):.2f} s)")
        if args.profile:
            profile = cProfile.Profile()
            profile.runcall(run_once, native, workload, tmp, "full")
            stats = pstats.Stats(profile)
            stats.sort_stats("tottime").print_stats(r"report|row_text|canonical_json|metrics|"
                                                    r"output|printer", 25)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
