"""Memory of `kvreplay run` against trace length: peak RSS and time per request at 12k .. 1M rows.

    python bench/bench_memory.py [--trace PATH] [--sizes 12031,100000,1000000] [--no-output]

The Mooncake conversation trace is tiled end to end (each copy shifted by the previous copy's
span plus one second; the same hash ids, so the KV state stays the size of one copy) to each
size. Regime: 8 aggregated workers, vLLM, 1000 GPU blocks of 512 tokens, fixed timing 20 / 5
ms, round robin, trace timestamps; `kvreplay run ... -o report.json` (per-request rows on) in a
fresh child process each, measured with wait4 (CPU, peak RSS). Goal (issue 11): under 300 MB at
1M rows and time per request within 1.3x of the 12k run. Results are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import SHARED_TRACE, require_trace

REPO = Path(__file__).resolve().parent.parent
CONFIG = """\
engine:
  model: meta-llama/Llama-3.1-8B
  workers:
    aggregated:
      parallelism: {{replicas: 8}}
      kv_cache: {{block_size: 512, capacity: {{type: fixed, blocks: 1000}}}}
      timing: {{type: fixed, prefill_ms: 20, decode_ms: 5}}
traffic:
  source: {{type: trace, format: mooncake, paths: [{trace}], block_size: 512}}
  load: {{type: trace_timestamps}}
"""


def tile(trace: Path, rows: int, out: Path) -> None:
    """The first `rows` rows of the trace repeated end to end, timestamps shifted per copy."""
    lines = trace.read_text(encoding="utf-8").splitlines()
    stamps = [json.loads(line)["timestamp"] for line in lines]
    span = max(stamps) + 1000
    with out.open("w", encoding="utf-8") as f:
        written = copy = 0
        while written < rows:
            for line in lines:
                if written >= rows:
                    break
                row = json.loads(line)
                row["timestamp"] += copy * span
                f.write(json.dumps(row) + "\n")
                written += 1
            copy += 1


def measure(config: Path, output: Path | None) -> dict[str, float]:
    cmd = [sys.executable, "-m", "kvreplay", "run", str(config), "--quiet", "--no-progress"]
    if output is not None:
        cmd += ["-o", str(output)]
    started = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    error = child.stderr.read().decode()[-200:] if child.stderr else ""
    if child.returncode != 0:
        raise SystemExit(f"kvreplay run failed ({child.returncode}): {error}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            "rss_mb": usage.ru_maxrss / 1024.0,
            "report_mb": output.stat().st_size / 1e6 if output is not None else 0.0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace", type=Path, default=SHARED_TRACE)
    parser.add_argument("--sizes", default="12031,100000,1000000")
    parser.add_argument("--no-output", action="store_true", help="run without -o")
    args = parser.parse_args()
    require_trace(args.trace, "bench_memory")
    print("rows       wall s   cpu s  peak RSS MB  report MB  us/request (cpu)  vs first")
    first = None
    with tempfile.TemporaryDirectory() as tmp:
        for rows in (int(s) for s in args.sizes.split(",")):
            trace = Path(tmp) / f"tiled-{rows}.jsonl"
            tile(args.trace, rows, trace)
            config = Path(tmp) / f"run-{rows}.yaml"
            config.write_text(CONFIG.format(trace=trace.name), encoding="utf-8")
            output = None if args.no_output else Path(tmp) / f"report-{rows}.json"
            cell = measure(config, output)
            per = cell["cpu_s"] / rows * 1e6
            first = first or per
            print(f"{rows:<9} {cell['wall_s']:>7.1f} {cell['cpu_s']:>7.1f} "
                  f"{cell['rss_mb']:>12.0f} {cell['report_mb']:>10.0f} {per:>17.1f} "
                  f"{per / first:>9.2f}", flush=True)
            if output is not None:
                output.unlink()
            trace.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
