"""Engine speed: kvreplay's bundled engine and the reference engine, side by side.

    python bench/bench_engine.py [--trace PATH] [--ref-python PATH] [--repeat N]

Full Mooncake conversation trace (12,031 requests), 8 aggregated workers, vLLM, 1000 GPU blocks
of 512 tokens, fixed timing 20 / 5 ms; round robin and kv_router. Each run is a fresh child
process (so peak RSS is its own); the reference runs under its own venv's python with
DYN_LOG=error. Prints wall time, the kvreplay/reference ratio, peak RSS, a few summary numbers
for a sanity check, and kvreplay's cost per request at 2k, 4k, 8k and 12k requests.
Results are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchlib import first_rows

REPO = Path(__file__).resolve().parent.parent
TRACE = REPO.parent / "shared" / "traces" / "mooncake" / "conversation_trace.jsonl"
REF_PYTHON = os.environ.get("KVREPLAY_REF_PYTHON", "/tmp/refvenv/bin/python")
RANK = {"backend": "vllm", "block_size": 512, "num_gpu_blocks": 1000,
        "timing_model": {"type": "fixed", "prefill_ms": 20.0, "decode_ms": 5.0}}
WORKERS = 8
ROUTERS = ("round_robin", "kv_router")
SIZES = (2000, 4000, 8000, 12031)


# -- children: one run each, JSON on stdout -------------------------------------------------------

def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def child_kvreplay(trace: Path, router: str, rows: int) -> dict[str, Any]:
    import time

    from kvreplay.engine import run_native
    from kvreplay.engine.traces.request import TraceRequest, runs_from_hash_ids

    class Rows:
        """Open-loop workload over Mooncake rows (timestamps normalized to start at 0)."""

        def __init__(self, requests: list[TraceRequest]) -> None:
            self.requests = requests
            self.total_requests = len(requests)
            self.i = 0

        def next_release_ms(self) -> float | None:
            return self.requests[self.i].release_ms if self.i < len(self.requests) else None

        def release(self, now_ms: float) -> list[TraceRequest]:
            out = []
            while self.i < len(self.requests) and self.requests[self.i].release_ms <= now_ms:
                out.append(self.requests[self.i])
                self.i += 1
            return out

        def on_terminal(self, request: TraceRequest, now_ms: float, **_: Any) -> None:
            pass

        def exhausted(self) -> bool:
            return self.i >= len(self.requests)

    start = time.perf_counter()
    requests = []
    with trace.open() as f:
        for i, line in zip(range(rows), f, strict=False):
            row = json.loads(line)
            length = row.get("input_length", len(row["hash_ids"]) * 512)
            requests.append(TraceRequest(i, f"row{i}", float(row["timestamp"]), length,
                                         row["output_length"],
                                         runs_from_hash_ids(row["hash_ids"], 512, length)))
    t0 = requests[0].release_ms
    for r in requests:
        r.release_ms -= t0
    topology = {"kind": "aggregated", "workers": {"initial_workers": WORKERS}}
    document = {"spec": {"topology": topology, "engine": {"dp_size": 1, "rank": dict(RANK)},
                         "adapters": {"placement": {"provider": router, "config": None}}},
                "traffic": {"trace_format": "mooncake"}}
    result = run_native(document, workload=Rows(requests))
    wall = time.perf_counter() - start
    records = result.records
    ttft = [r.first_token_ms - r.arrival_time_ms for r in records if r.first_token_ms is not None]
    return {"wall_s": wall, "peak_rss_mb": _peak_rss_mb(), "requests": len(records),
            "reuse": sum(r.reused_input_tokens for r in records)
            / sum(r.input_length for r in records),
            "mean_ttft_ms": sum(ttft) / len(ttft), "duration_ms": result.facts.duration_ms,
            "passes": result.facts.passes,
            "fast_forwarded_passes": result.facts.fast_forwarded_passes}


def child_reference(trace: Path, router: str, rows: int) -> dict[str, Any]:
    import time

    os.environ["DYN_LOG"] = "error"
    from dynamo.replay import run_trace_replay

    with tempfile.TemporaryDirectory() as tmp:
        path = first_rows(trace, rows, tmp)
        start = time.perf_counter()
        report = run_trace_replay([str(path)], extra_engine_args={"engine": dict(RANK)},
                                  num_workers=WORKERS, router_mode=router,
                                  trace_format="mooncake", trace_block_size=512,
                                  capture_per_request=True)
        wall = time.perf_counter() - start
    summary = report.summary
    return {"wall_s": wall, "peak_rss_mb": _peak_rss_mb(), "requests": summary["num_requests"],
            "reuse": summary["prefix_cache_reused_ratio"], "mean_ttft_ms": summary["mean_ttft_ms"],
            "duration_ms": summary["duration_ms"]}


# -- parent ---------------------------------------------------------------------------------------

def spawn(python: str, engine: str, trace: Path, router: str, rows: int) -> dict[str, Any]:
    env = dict(os.environ, DYN_LOG="error")
    cmd = [python, __file__, "--child", engine, "--trace", str(trace), "--router", router,
           "--rows", str(rows)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr else "failed"}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def best_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    good = [r for r in runs if "error" not in r]
    return min(good, key=lambda r: r["wall_s"]) if good else runs[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--ref-python", default=REF_PYTHON)
    parser.add_argument("--repeat", type=int, default=1, help="runs per cell (best is kept)")
    parser.add_argument("--child", choices=("kvreplay", "reference"))
    parser.add_argument("--router", default="round_robin")
    parser.add_argument("--rows", type=int, default=0)
    args = parser.parse_args()
    if args.child:
        run = child_kvreplay if args.child == "kvreplay" else child_reference
        print(json.dumps(run(args.trace, args.router, args.rows or 10**9)))
        return

    have_ref = Path(args.ref_python).exists()
    print(f"trace {args.trace.name}, {WORKERS} aggregated workers, 1000 blocks x 512 tokens, "
          "fixed 20/5 ms")
    print(f"{'router':<12} {'engine':<9} {'wall s':>7} {'RSS MB':>7} {'reuse':>7} "
          f"{'TTFT ms':>8} {'duration ms':>12}")
    for router in ROUTERS:
        cells = {"kvreplay": best_of([spawn(sys.executable, "kvreplay", args.trace, router, 0)
                                      for _ in range(args.repeat)])}
        if have_ref:
            cells["reference"] = best_of([spawn(args.ref_python, "reference", args.trace, router,
                                                0) for _ in range(args.repeat)])
        for engine, cell in cells.items():
            if "error" in cell:
                print(f"{router:<12} {engine:<9} error: {cell['error']}")
                continue
            print(f"{router:<12} {engine:<9} {cell['wall_s']:>7.2f} {cell['peak_rss_mb']:>7.0f} "
                  f"{cell['reuse']:>7.4f} {cell['mean_ttft_ms']:>8.2f} "
                  f"{cell['duration_ms']:>12.0f}")
        mine, ref = cells["kvreplay"], cells.get("reference")
        if ref and "error" not in ref and "error" not in mine:
            wall = mine["wall_s"] / ref["wall_s"]
            rss = mine["peak_rss_mb"] / ref["peak_rss_mb"]
            print(f"{router:<12} ratio     kvreplay/reference wall {wall:.2f}, RSS {rss:.2f}")
    print("\nkvreplay cost per request (round robin)")
    print(f"{'requests':>9} {'wall s':>7} {'us/request':>11} {'passes':>8} {'fast-forwarded':>15}")
    for size in SIZES:
        cell = best_of([spawn(sys.executable, "kvreplay", args.trace, "round_robin", size)
                        for _ in range(args.repeat)])
        if "error" in cell:
            print(f"{size:>9} error: {cell['error']}")
            continue
        print(f"{cell['requests']:>9} {cell['wall_s']:>7.2f} "
              f"{cell['wall_s'] / cell['requests'] * 1e6:>11.0f} {cell['passes']:>8} "
              f"{cell['fast_forwarded_passes']:>15}")


if __name__ == "__main__":
    main()
