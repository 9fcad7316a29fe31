"""Is kvreplay's KV-router figure one draw of the reference's spread, or biased?

    python bench/router_spread.py [--runs 20] [--rows N] [--workers 8] [--g1-blocks 1000]
                                  [--host-blocks 4000] [--queue-threshold 1.0] [--speedup 10]

The reference breaks equal-cost placements at random (unseeded), kvreplay with a rotating
cursor, so one kvreplay run is compared with the distribution of `--runs` reference runs, and
with `--runs` kvreplay runs whose ties are drawn the reference's way (uniformly among the tied
schedulers, seeds 0..runs-1; the cursor replaced in this process only). If the random-tie runs
and the reference runs cannot be told apart (a two-sided permutation test on the difference of
means), the engine replays the same distribution and the cursor's figure is one draw of it.
Regime: the Mooncake conversation trace (its first `--rows`, all by default), vLLM ranks of
512-token blocks, fixed 20/5 ms timing, private G2 per rank at 32 GB/s, KV router with the
router queue, arrivals `--speedup` times faster. Results are printed, never asserted; docs/engine.md
("Deliberate differences") quotes them.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchlib import SHARED_TRACE, require_trace

BLOCK = 512
KEYS = ("mean_ttft_ms", "median_ttft_ms", "mean_e2e_latency_ms", "prefix_cache_reused_ratio")


def rank(args: argparse.Namespace) -> dict[str, Any]:
    return {"backend": "vllm", "block_size": BLOCK, "num_gpu_blocks": args.g1_blocks,
            "timing_model": {"type": "fixed", "prefill_ms": 20.0, "decode_ms": 5.0},
            "kv_cache_bytes_per_token": 131072,
            "native_host_offload": {"num_host_blocks": args.host_blocks,
                                    "d2h_bandwidth_gbps": 32.0, "h2d_bandwidth_gbps": 32.0}}


def reference(args: argparse.Namespace, trace: Path) -> dict[str, float]:
    os.environ["DYN_LOG"] = "error"
    from dynamo._core import KvRouterConfig
    from dynamo.replay import run_trace_replay

    report = run_trace_replay(
        [str(trace)], extra_engine_args={"engine": rank(args), "dp_size": 1},
        num_workers=args.workers, router_mode="kv_router", trace_format="mooncake",
        router_config=KvRouterConfig(router_queue_threshold=args.queue_threshold),
        trace_block_size=BLOCK, arrival_speedup_ratio=args.speedup)
    summary = dict(report.summary)
    return {k: float(summary[k]) for k in KEYS}


def kvreplay(args: argparse.Namespace, trace: Path) -> dict[str, float]:
    from kvreplay.engine import run_native
    from kvreplay.engine.report import report_from_run
    from kvreplay.engine.traces import workload_from_traffic

    traffic = {"source_type": "trace", "trace_format": "mooncake", "trace_paths": [str(trace)],
               "load_type": "trace_timestamps", "trace_block_size": BLOCK,
               "speedup": args.speedup}
    document = {
        "spec": {"version": 1, "model": "bench",
                 "topology": {"kind": "aggregated", "workers": {"initial_workers": args.workers}},
                 "engine": {"dp_size": 1, "tensor_parallel_size": 1, "speculation": None,
                            "rank": {**rank(args), "worker_type": "aggregated"}},
                 "adapters": {"placement": {"provider": "kv_router",
                                            "config": {"queue_threshold": args.queue_threshold}},
                              "scaling": {"provider": "none", "config": None}},
                 "max_sim_time_ms": None, "record_per_request": False, "sla": None},
        "traffic": traffic}
    workload = workload_from_traffic(traffic, base_dir=str(trace.parent), block_size=BLOCK)
    summary = report_from_run(run_native(document, workload=workload))["summary"]
    return {k: float(summary[k]) for k in KEYS}


def draw_ties_at_random(seed: int) -> None:
    """Ties broken as the reference's selector does (reservoir sampling over the tied)."""
    from kvreplay.engine import router

    rng = random.Random(seed)

    def pick(self: Any, costs: list[float]) -> int:
        best, tied, chosen = float("inf"), 0, -1
        for s, cost in enumerate(costs):
            if cost < best:
                best, tied, chosen = cost, 1, s
            elif cost == best:
                tied += 1
                if rng.randrange(tied) == 0:
                    chosen = s
        return chosen

    router.KvRouter._pick = pick  # type: ignore[method-assign]


def permutation_p(a: list[float], b: list[float], rounds: int = 20000) -> float:
    """Two-sided permutation test on the difference of means (seeded)."""
    rng = random.Random(1)
    observed = abs(statistics.mean(a) - statistics.mean(b))
    pooled, hits = a + b, 0
    for _ in range(rounds):
        rng.shuffle(pooled)
        if abs(statistics.mean(pooled[:len(a)]) - statistics.mean(pooled[len(a):])) >= observed:
            hits += 1
    return (hits + 1) / (rounds + 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--rows", type=int, default=0, help="first N trace rows (0: all)")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--g1-blocks", type=int, default=1000)
    parser.add_argument("--host-blocks", type=int, default=4000)
    parser.add_argument("--queue-threshold", type=float, default=1.0)
    parser.add_argument("--speedup", type=float, default=10.0)
    parser.add_argument("--trace", type=Path, default=SHARED_TRACE)
    args = parser.parse_args()
    require_trace(args.trace, "router_spread.py")
    with tempfile.TemporaryDirectory() as tmp:
        trace = args.trace
        if args.rows:
            trace = Path(tmp) / "trace.jsonl"
            with args.trace.open() as src, trace.open("w") as out:
                out.writelines(itertools.islice(src, args.rows))
        cursor = kvreplay(args, trace)
        refs = [reference(args, trace) for _ in range(args.runs)]
        drawn = []
        for seed in range(args.runs):
            draw_ties_at_random(seed)
            drawn.append(kvreplay(args, trace))
    for key in KEYS:
        r, q, c = [x[key] for x in refs], [x[key] for x in drawn], cursor[key]
        print(f"{key}: reference mean {statistics.mean(r):.4f} (sd {statistics.pstdev(r):.4f}, "
              f"{min(r):.4f}-{max(r):.4f}); random ties mean {statistics.mean(q):.4f} "
              f"(sd {statistics.pstdev(q):.4f}), permutation p {permutation_p(r, q):.3f}; "
              f"cursor {c:.4f} ({(c / statistics.mean(r) - 1) * 100:+.2f}%, above "
              f"{sum(v < c for v in r)} of {len(r)} reference runs)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
