"""Linting a big sweep file: the 9,999 points of a 99 x 101 grid over the router example
(replicas x GPU blocks), planned as `kvreplay lint` plans them (findings only) and as
`kvreplay sweep` does (each point's native JSON and spec digest too).

    python bench/bench_sweep_lint.py [--repeat N] [--no-memo]

`--no-memo` validates every point in full (no shared-subtree memo), for the figure before it.
Prints CPU seconds and points per second, best of N; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def sweep_text() -> str:
    replicas = list(range(1, 100))
    blocks = list(range(200, 301))
    return (f"kind: sweep\nbase: {REPO / 'examples' / 'kv-router-mooncake.yaml'}\n"
            f"grid:\n  engine.workers.aggregated.parallelism.replicas: {replicas}\n"
            f"  engine.workers.aggregated.kv_cache.capacity.blocks: {blocks}\n"
            "sla:\n  p90_ttft_ms: {max: 200}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-memo", action="store_true")
    args = parser.parse_args()

    from kvreplay.api import matrix_rules
    from kvreplay.compiler.documents import load_text
    from kvreplay.sweep import plan as plan_module

    if args.no_memo:
        plan_module.remembering = lambda memo: contextlib.nullcontext()  # type: ignore
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "big.yaml"
        path.write_text(sweep_text(), encoding="utf-8")
        rules = matrix_rules()
        for label, emit in (("lint (findings only)", False), ("sweep (native JSON too)", True)):
            best = float("inf")
            for _ in range(args.repeat):
                _, loaded = load_text(path.read_text(encoding="utf-8"), str(path))
                start = time.process_time()
                plan = plan_module.plan_sweep(loaded, rules=rules, emit=emit)
                best = min(best, time.process_time() - start)
            points = len(plan.points)
            print(f"{label:<26} {points:,} points  {best:6.2f} s CPU  "
                  f"{points / best:8,.0f} points/s")


if __name__ == "__main__":
    main()
