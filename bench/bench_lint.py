"""Lint speed: cold wall time of `kvreplay lint one.yaml`, and files per second in one process.

    python bench/bench_lint.py [--runs 15] [--files 500]

Goals (issue 4): cold single file under 0.3 s on a 2-core machine; at least 300 files/s warm.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


def cold(runs: int) -> list[float]:
    """Wall time of a fresh `kvreplay lint` process on one example (rules cache warm on disk)."""
    target = str(REPO / "examples" / "agentx-g2-shared-pd.yaml")
    command = [sys.executable, "-m", "kvreplay", "lint", target]
    subprocess.run(command, check=True, capture_output=True)  # fill the rules cache once
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return times


def python_floor(runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def warm(files: int) -> tuple[float, int]:
    """Files per second linting `files` configs (variants of the examples) in one process."""
    from kvreplay.cli.main import main

    folder = Path(tempfile.mkdtemp(prefix="kvreplay-bench-"))
    try:
        for i in range(files):
            source = EXAMPLES[i % len(EXAMPLES)]
            text = source.read_text().replace("traces/", str(source.parent / "traces") + "/")
            # vary one value so no two files are identical
            (folder / f"cfg-{i:04d}.yaml").write_text(text + f"# variant {i}\n")
        main(["lint", "--format", "concise", str(EXAMPLES[0])])  # warm imports and caches
        sink = io.StringIO()
        start = time.perf_counter()
        with redirect_stdout(sink):
            code = main(["lint", "--format", "concise", str(folder)])
        elapsed = time.perf_counter() - start
        return files / elapsed, code
    finally:
        shutil.rmtree(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--files", type=int, default=500)
    args = parser.parse_args()
    os.environ.setdefault("NO_COLOR", "1")
    floor = python_floor(5)
    times = cold(args.runs)
    print(f"python startup floor:        {floor * 1000:7.1f} ms (median of 5)")
    print(f"cold `kvreplay lint one.yaml`: median {statistics.median(times) * 1000:7.1f} ms, "
          f"min {min(times) * 1000:.1f} ms, max {max(times) * 1000:.1f} ms over {args.runs} runs "
          f"(goal < 300 ms: ratio {statistics.median(times) / 0.3:.2f})")
    rate, code = warm(args.files)
    print(f"warm lint of {args.files} files in one process: {rate:7.0f} files/s "
          f"({1000 / rate:.2f} ms per file; goal >= 300 files/s: ratio {rate / 300:.2f}); "
          f"exit {code}")


if __name__ == "__main__":
    main()
