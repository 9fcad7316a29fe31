"""Agentic replay speed: kvreplay and the reference engine side by side, CPU time first.

    python bench/bench_agentic.py [--plays N] [--lanes N] [--ref-python PATH] [--repeat N]

Regime: a generated Weka corpus (seeded, written to a temporary folder) of 1,000 plays of 3-8
turns each, every play with blocking and background (async) subagents whose prompts extend the
parent's context (64-token blocks, prompts of 1k-14k tokens, 20-400 output tokens, think
times of 0.5-5 s); 64 lanes; 4 aggregated vLLM workers with 2,000 GPU blocks each, fixed timing
20 / 5 ms, 8 MB blocks; G2 private per rank (8,000 host blocks, 32 GB/s links) or none; round
robin and kv_router. Each cell is a fresh child process; CPU time (user + system of the child;
the machine is shared) is the figure compared, wall time and peak RSS printed beside it, with
the requests, reuse and mean TTFT each engine reports as a sanity check. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchlib import best, measured, print_cells, run_child, usage

REPO = Path(__file__).resolve().parent.parent
MODEL = "agent-model"
BLOCK = 64
WORKERS = 4
RANK: dict[str, Any] = {"backend": "vllm", "block_size": BLOCK, "num_gpu_blocks": 2000,
                        "kv_cache_bytes_per_token": 131072,
                        "timing_model": {"type": "fixed", "prefill_ms": 20.0, "decode_ms": 5.0}}
HOST = {"scope": "dp_rank_local", "num_host_blocks": 8000, "d2h_bandwidth_gbps": 32.0,
        "h2d_bandwidth_gbps": 32.0}


def corpus(plays: int, seed: int = 7) -> list[dict[str, Any]]:
    """Weka plays: a parent conversation growing turn by turn, with subagents branching off."""
    rng = random.Random(seed)
    out = []
    for p in range(plays):
        next_hash = 1
        context: list[int] = []

        def grow(base: list[int], blocks: int) -> list[int]:
            nonlocal next_hash
            fresh = list(range(next_hash, next_hash + blocks))
            next_hash += blocks
            return base + fresh

        def turn(t: float, hashes: list[int]) -> dict[str, Any]:
            return {"t": round(t, 3), "type": "s", "model": MODEL,
                    "in": len(hashes) * BLOCK - rng.randrange(BLOCK), "out": rng.randint(20, 400),
                    "hash_ids": hashes, "api_time": round(rng.uniform(0.5, 4.0), 3)}

        t = 0.0
        context = grow([], rng.randint(16, 40))  # system prompt and the task
        items = [turn(t, context)]
        for k in range(rng.randint(2, 7)):
            t += items[-1].get("api_time", 1.0) + rng.uniform(0.5, 5.0)
            kind = rng.choices(("turn", "blocking", "async"), (5, 3, 2))[0]
            if kind == "turn" or len(context) > 200:
                context = grow(context, rng.randint(2, 12))
                items.append(turn(t, context))
                continue
            inner = []
            u = t
            branch = grow(context[:rng.randint(8, 16)], rng.randint(4, 20))
            for _ in range(rng.randint(1, 3)):
                inner.append(turn(u, branch))
                u += inner[-1]["api_time"] + rng.uniform(0.2, 2.0)
                branch = grow(branch, rng.randint(2, 8))
            items.append({"t": round(t, 3), "type": "subagent", "agent_id": f"agent-{k}",
                          "subagent_type": "Explore",
                          "status": "completed" if kind == "blocking" else "async_launched",
                          "models": [MODEL], "requests": inner})
            if kind == "blocking":
                t = u
            context = grow(context, rng.randint(1, 4))
            items.append(turn(t + 0.1, context))
        out.append({"id": f"play-{p:05d}", "models": [MODEL], "block_size": BLOCK,
                    "hash_id_scope": "local", "requests": items})
    return out


def rank(g2: bool) -> dict[str, Any]:
    out = dict(RANK)
    if g2:
        out["native_host_offload"] = dict(HOST)
    return out



def child_kvreplay(trace: Path, g2: bool, router: str, lanes: int) -> dict[str, Any]:
    sys.path.insert(0, str(REPO / "tests" / "engine"))
    from engine_support import native

    from kvreplay.engine import run_native
    from kvreplay.engine.report import report_from_run
    from kvreplay.engine.traces import workload_from_traffic

    start, cpu0 = time.perf_counter(), usage()[0]
    doc = native(rank(g2), workers=WORKERS, router=router)
    doc["spec"]["model"] = MODEL
    doc["traffic"] = {"source_type": "trace", "trace_format": "weka",
                      "load_type": "trace_timestamps", "agentic_lanes": lanes,
                      "weka_nested_timestamp_basis": "absolute"}
    workload = workload_from_traffic(doc["traffic"], base_dir=str(trace.parent),
                                     trace_paths=[str(trace)], model=MODEL, block_size=BLOCK)
    summary = report_from_run(run_native(doc, workload=workload))["summary"]
    return measured(summary, start, cpu0)


def child_reference(trace: Path, g2: bool, router: str, lanes: int) -> dict[str, Any]:
    os.environ["DYN_LOG"] = "error"
    from dynamo.replay import run_trace_replay

    start, cpu0 = time.perf_counter(), usage()[0]
    report = run_trace_replay([str(trace)], extra_engine_args={"engine": rank(g2)},
                              num_workers=WORKERS, router_mode=router, trace_format="weka",
                              trace_block_size=BLOCK, execution_model=MODEL,
                              agentic_lanes=lanes, weka_nested_timestamp_basis="absolute",
                              capture_per_request=True)
    return measured(report.summary, start, cpu0)

def spawn(python: str, engine: str, trace: Path, g2: bool, router: str,
          lanes: int) -> dict[str, Any]:
    cmd = [python, __file__, "--child", engine, "--trace", str(trace), "--router", router,
           "--lanes", str(lanes)] + (["--g2"] if g2 else [])
    return run_child(cmd)



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--plays", type=int, default=1000)
    parser.add_argument("--lanes", type=int, default=64)
    parser.add_argument("--ref-python", default=os.environ.get("KVREPLAY_REF_PYTHON",
                                                               sys.executable))
    parser.add_argument("--repeat", type=int, default=1, help="runs per cell (best CPU kept)")
    parser.add_argument("--child", choices=("kvreplay", "reference"))
    parser.add_argument("--trace", type=Path)
    parser.add_argument("--g2", action="store_true")
    parser.add_argument("--router", default="round_robin")
    args = parser.parse_args()
    if args.child:
        run = child_kvreplay if args.child == "kvreplay" else child_reference
        print(json.dumps(run(args.trace, args.g2, args.router, args.lanes)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "agentic-corpus.jsonl"
        plays = corpus(args.plays)
        trace.write_text("".join(json.dumps(p, separators=(",", ":")) + "\n" for p in plays))
        nodes = sum(len(i["requests"]) if i["type"] == "subagent" else 1
                    for p in plays for i in p["requests"])
        print(f"{args.plays} generated plays ({nodes:,} requests, subagents included), "
              f"{args.lanes} lanes, {WORKERS} aggregated workers, 2000 x {BLOCK}-token G1 "
              "blocks, fixed 20/5 ms, G2 dp_rank_local 8000 blocks at 32 GB/s")
        print(f"{'G2':<14} {'router':<12} {'engine':<9} {'CPU s':>6} {'wall s':>7} "
              f"{'RSS MB':>7} {'requests':>8} {'reuse':>7} {'TTFT ms':>8}  CPU ratio")
        for g2 in (False, True):
            for router in ("round_robin", "kv_router"):
                cells = {engine: best([spawn(python, engine, trace, g2, router, args.lanes)
                                       for _ in range(args.repeat)])
                         for engine, python in (("kvreplay", sys.executable),
                                                ("reference", args.ref_python))}
                print_cells(f"{'dp_rank_local' if g2 else 'none':<14} {router:<12}", cells,
                            lambda c: f" {c['requests']:>8,} {c['reuse']:>7.4f} "
                                      f"{c['ttft']:>8.2f}")

if __name__ == "__main__":
    main()
