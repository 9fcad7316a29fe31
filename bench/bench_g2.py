"""G2 engine speed: kvreplay and the reference engine side by side, CPU time first.

    python bench/bench_g2.py [--trace PATH] [--ref-python PATH] [--repeat N] [--rows N]

Regime: the full Mooncake conversation trace (12,031 requests), 8 aggregated workers, vLLM,
1000 GPU blocks of 512 tokens, fixed timing 20 / 5 ms, kv_cache_bytes_per_token 131072 (64 MiB
blocks), 32 GB/s host links; G2 private (4,000 host blocks per rank) or one shared pool (16,000
blocks, pool caps at the default 80 GB/s); round robin and kv_router. Each cell is a fresh child
process; CPU time (user + system of the child, the machine is shared) is the figure compared,
wall time and peak RSS are printed beside it. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from benchlib import (
    SHARED_TRACE,
    best,
    first_rows,
    measured,
    print_cells,
    require_trace,
    run_child,
    usage,
)

REPO = Path(__file__).resolve().parent.parent
RANK: dict[str, Any] = {"backend": "vllm", "block_size": 512, "num_gpu_blocks": 1000,
                        "kv_cache_bytes_per_token": 131072,
                        "timing_model": {"type": "fixed", "prefill_ms": 20.0, "decode_ms": 5.0}}
HOST = {"none": None,
        "dp_rank_local": {"scope": "dp_rank_local", "num_host_blocks": 4000,
                          "d2h_bandwidth_gbps": 32.0, "h2d_bandwidth_gbps": 32.0},
        "cluster_shared": {"scope": "cluster_shared", "num_host_blocks": 16000,
                           "kv_layout_id": "bench", "d2h_bandwidth_gbps": 32.0,
                           "h2d_bandwidth_gbps": 32.0}}
WORKERS = 8


def rank(scope: str) -> dict[str, Any]:
    out = dict(RANK)
    if HOST[scope] is not None:
        out["native_host_offload"] = dict(HOST[scope])  # type: ignore[arg-type]
    return out



def child_kvreplay(trace: Path, scope: str, router: str, rows: int) -> dict[str, Any]:
    sys.path.insert(0, str(REPO / "tests" / "engine"))
    from engine_support import mooncake_rows, mooncake_workload, native

    from kvreplay.engine import run_native
    from kvreplay.engine.report import report_from_run

    start, cpu0 = time.perf_counter(), usage()[0]
    workload = mooncake_workload(mooncake_rows(trace, rows or None), 512)
    result = run_native(native(rank(scope), workers=WORKERS, router=router), workload=workload)
    summary = report_from_run(result)["summary"]
    return measured(summary, start, cpu0)


def child_reference(trace: Path, scope: str, router: str, rows: int) -> dict[str, Any]:
    os.environ["DYN_LOG"] = "error"
    import tempfile

    from dynamo.replay import run_trace_replay

    with tempfile.TemporaryDirectory() as tmp:
        path = first_rows(trace, rows, tmp)
        start, cpu0 = time.perf_counter(), usage()[0]
        report = run_trace_replay([str(path)], extra_engine_args={"engine": rank(scope)},
                                  num_workers=WORKERS, router_mode=router,
                                  trace_format="mooncake", trace_block_size=512,
                                  capture_per_request=True)
        return measured(report.summary, start, cpu0)


def spawn(python: str, engine: str, args: argparse.Namespace, scope: str,
          router: str) -> dict[str, Any]:
    cmd = [python, __file__, "--child", engine, "--trace", str(args.trace), "--scope", scope,
           "--router", router, "--rows", str(args.rows)]
    return run_child(cmd)



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace", type=Path, default=SHARED_TRACE)
    parser.add_argument("--ref-python", default=os.environ.get("KVREPLAY_REF_PYTHON",
                                                               sys.executable))
    parser.add_argument("--repeat", type=int, default=1, help="runs per cell (best CPU kept)")
    parser.add_argument("--rows", type=int, default=0, help="first N rows (0 = all)")
    parser.add_argument("--child", choices=("kvreplay", "reference"))
    parser.add_argument("--scope", default="dp_rank_local", choices=sorted(HOST))
    parser.add_argument("--router", default="round_robin")
    args = parser.parse_args()
    require_trace(args.trace, "bench_g2")
    if args.child:
        run = child_kvreplay if args.child == "kvreplay" else child_reference
        print(json.dumps(run(args.trace, args.scope, args.router, args.rows)))
        return
    print(f"{args.trace.name} ({args.rows or 'all'} rows), {WORKERS} aggregated workers, 1000 x "
          "512-token G1 blocks, fixed 20/5 ms, G2 links 32 GB/s")
    print(f"{'G2':<15} {'router':<12} {'engine':<9} {'CPU s':>6} {'wall s':>7} {'RSS MB':>7} "
          f"{'reuse':>7} {'TTFT ms':>8}  CPU ratio")
    for scope in ("none", "dp_rank_local", "cluster_shared"):
        for router in ("round_robin", "kv_router"):
            cells = {engine: best([spawn(python, engine, args, scope, router)
                                   for _ in range(args.repeat)])
                     for engine, python in (("kvreplay", sys.executable),
                                            ("reference", args.ref_python))}
            print_cells(f"{scope:<15} {router:<12}", cells,
                        lambda c: f" {c['reuse']:>7.4f} {c['ttft']:>8.2f}")

if __name__ == "__main__":
    main()
