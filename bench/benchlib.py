"""What the side-by-side benchmarks share: child processes, CPU time, the best of N runs."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The full Mooncake conversation trace (12,031 rows) is not part of the repository: it is read
# from the workplace's shared folder beside it, or from --trace. (The tests use the vendored
# 2,000-row slice in tests/cases/mooncake/ instead.)
SHARED_TRACE = (Path(__file__).resolve().parents[2] / "shared" / "traces" / "mooncake"
                / "conversation_trace.jsonl")


def require_trace(path: Path, script: str) -> None:
    """Exit 2 with a message saying where the trace was looked for when it is not there."""
    if not path.is_file():
        print(f"{script}: no trace at {path}. The full Mooncake conversation trace is not in "
              "the repository: put the shared folder beside it (../shared/traces/mooncake/) or "
              "pass --trace PATH.", file=sys.stderr)
        raise SystemExit(2)


def usage() -> tuple[float, float]:
    """(CPU seconds, user + system, and peak RSS in MB) of this process so far."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024.0


def run_child(cmd: list[str]) -> dict[str, Any]:
    """Run a benchmark child; its last stdout line is its JSON result ({"error"} on failure)."""
    done = subprocess.run(cmd, capture_output=True, text=True, check=False,
                          env=dict(os.environ, DYN_LOG="error"))
    if done.returncode != 0:
        last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"
        return {"error": last[:110]}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the least CPU time (the machine is shared), or the first failure."""
    good = [r for r in runs if "error" not in r]
    return min(good, key=lambda r: r["cpu_s"]) if good else runs[0]


def print_cells(label: str, cells: dict[str, dict[str, Any]],
                extra: Callable[[dict[str, Any]], str]) -> None:
    """One line per engine: CPU s, wall s, RSS MB, `extra` columns, kvreplay/reference CPU."""
    ref = cells["reference"]
    for engine, cell in cells.items():
        head = f"{label} {engine:<9}"
        if "error" in cell:
            print(f"{head} failed: {cell['error']}")
            continue
        ratio = ""
        if engine == "kvreplay" and "error" not in ref:
            ratio = f"  {cell['cpu_s'] / ref['cpu_s']:.2f}"
        print(f"{head} {cell['cpu_s']:>6.2f} {cell['wall_s']:>7.2f} {cell['rss_mb']:>7.0f}"
              f"{extra(cell)}{ratio}")


def measured(summary: Any, start_wall: float, start_cpu: float) -> dict[str, Any]:
    """A child's result: CPU and wall seconds since the start, peak RSS, sanity figures."""
    cpu, rss = usage()
    return {"cpu_s": cpu - start_cpu, "wall_s": time.perf_counter() - start_wall,
            "rss_mb": rss, "reuse": summary["prefix_cache_reused_ratio"],
            "ttft": summary["mean_ttft_ms"], "requests": summary["num_requests"]}


def first_rows(trace: Path, rows: int, folder: str) -> Path:
    """The trace itself, or a copy of its first `rows` lines in `folder` (rows > 0)."""
    if not rows:
        return trace
    path = Path(folder) / "trace.jsonl"
    with trace.open() as f, path.open("w") as out:
        for _, line in zip(range(rows), f, strict=False):
            out.write(line)
    return path
