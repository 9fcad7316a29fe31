"""Engine speed: kvreplay and the reference engine side by side, regime by regime.

    python bench/bench_engine.py [--regimes a,b] [--rows N] [--repeat N] [--scaling]
                                 [--trace PATH] [--ref-python PATH] [--sha256] [--pure]

The 12k regimes replay the Mooncake conversation trace (all 12,031 rows unless `--rows N` keeps
the first N; hash ids are 512-token blocks) on vLLM ranks of 1000 GPU blocks x 512 tokens:

    fixed-rr   8 aggregated workers, fixed timing 20 ms prefill / 5 ms decode, round robin
    fixed-kv   fixed-rr with kv_router placement (default router settings)
    poly       fixed-rr with polynomial timing (the default timing model)
    load10x    fixed-rr with arrivals compressed 10x (kvreplay traffic `speedup: 10`,
               reference `arrival_speedup_ratio=10.0`)
    pd         4 prefill + 4 decode workers, round robin; every rank with
               kv_cache_bytes_per_token and kv_transfer_bytes_per_token 131072 (64 MiB blocks)
               and kv_transfer_bandwidth 25 GB/s
    g2-local   fixed-rr plus G2 host offload per rank (4,000 host blocks, 32 GB/s both ways,
               kv_cache_bytes_per_token 131072)
    g2-shared  fixed-rr plus one cluster-shared G2 pool (16,000 host blocks, same links)
    mtp        fixed-rr with MTP on every rank (aic_nextn 2, rates 0.8, 0.6, seed 42)
    g3-local   fixed-rr plus G2 per rank (1,000 host blocks) and a worker-local G3 pool per
               worker (16,000 blocks, 4 GB/s read and write, 0.1 ms first byte)
    g3-shared  the same G2 and one cluster-shared G3 pool (64,000 blocks, 4 GB/s per worker,
               16 GB/s pool caps), on the trace's first 4,000 rows (the reference's run of the
               whole trace did not finish in 40 minutes)
    floor      fixed-rr on the trace's first row alone: the process floor (start-up, reading
               the spec, the report). kvreplay runs as a user runs it, `python -m kvreplay run
               SPEC.json --trace ONE_ROW --format json` (the CLI, its argument parsing and
               checks); the reference through this script's child, as in every regime
    sglang     fixed-rr on SGLang ranks (its scheduler, radix cache of 1000 x 512-token pages)
    trtllm     fixed-rr on TensorRT-LLM ranks (guaranteed_no_evict)

The realistic mix (`--regimes mix` runs all nine; each its own regime, their CPU summed at the
end) is small and mid-size scenarios on the vendored slices of tests/cases/mooncake/ (no shared
trace needed): mix-poly, mix-g2-local, mix-g2-shared, mix-pd, mix-dp (attention DP 4),
mix-kv-lag (kv_event_lag_ms 20), mix-agentic (bench_agentic's seeded corpus of 150 plays, 16
lanes), mix-preempt (300 GPU blocks a worker) and mix-load10x; MIX below says each one's setting.

    overload   one worker, the reference's default rank (16,384 x 64-token blocks, polynomial
               timing), 20,000 synthetic requests of 1024 in / 128 out at a constant 40 req/s
               (kvreplay `constant_rate`, reference `run_synthetic_trace_replay(...,
               arrival_interval_ms=25)`): thousands wait in the one queue
    agentic    bench_agentic.py's regime (its G2-private, round-robin cell): its seeded corpus of
               1,000 Weka plays (9,984 requests, subagents included), 64 lanes, 4 workers x
               2,000 blocks of 64 tokens, fixed 20/5 ms, G2 per rank 8,000 host blocks at 32 GB/s
    telemetry  fixed-rr sampled every 1,000 ms of simulated time (kvreplay `spec.telemetry`,
               reference `TelemetryOptions(sample_interval_ms=1000)`)
    scaled     fixed-rr under one scaling policy object on both engines (kvreplay
               `run_native(..., scaling_policy=)`, the reference's core
               `run_mocker_trace_replay(..., scaling_policy=)`): 2 workers, a tick every 5 s,
               8 workers from 300 s, 4 from 2,000 s, 30 s start-up

Both engines take the path a user takes. kvreplay: a native JSON document, its traffic section
read by `workload_from_traffic`, `run_native`, then `report_from_run`. Reference:
`run_trace_replay(..., capture_per_request=True)`, which builds its report too. Each run is a
fresh child process, the engines alternating within a repetition; the parent reads the child's
CPU time (user + system) and peak RSS from wait4, and its wall time from launch to exit. The
machine is shared, so CPU time is the fair comparison; wall time is printed beside it. Per
regime the table gives min and median over `--repeat` runs (default 3), the kvreplay/reference
ratios, and the completed requests, prefix reuse ratio, mean TTFT and simulated duration each
engine reports: a sanity check that both ran the same thing, flagged when they disagree by more
than 1% (kv_router breaks placement ties at random in the reference, so small drifts there are
expected). `--scaling` adds kvreplay's CPU cost per request at 2k, 4k, 8k and 12k requests
(fixed-rr). Results are printed, never asserted.

`--sha256` runs kvreplay alone, once per regime, and prints the sha256 of each regime's
canonical report without `meta` (its summary, per_request rows and telemetry: what the
simulation decides; meta counts how the engine ran, e.g. fast-forwarded passes): the
byte-identity guard of a speed change, one table before and one after.

`--pure` runs kvreplay a second time beside itself in every repetition, with
KVREPLAY_PURE_PYTHON=1 (the engine's Python sources instead of the compiled core,
engine/compiled.py): the table gets a `kv-pure` row and both ratios, and every kvreplay child
also hashes its report as `--sha256` does (the hashing's own CPU, measured by the child, is taken
off its figure), so the table says whether compiled and pure reports are byte-identical. With
`--sha256`, `--pure` prints both hashes per regime. Each kvreplay row names the core its child
ran (`compiled`, or `pure` when the core is not built or not current: `pip install -e .`).
"""

from __future__ import annotations

import argparse
import gc
import gzip
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchlib import SHARED_TRACE, first_rows, require_trace

REPO = Path(__file__).resolve().parent.parent
BLOCK = 512
WORKERS = 8
FIXED: dict[str, Any] = {"type": "fixed", "prefill_ms": 20.0, "decode_ms": 5.0}
BYTES_PER_TOKEN = 131072
LINK_GBPS = 32.0
SCALING_SIZES = (2000, 4000, 8000)
TOLERANCE = 0.01  # relative disagreement of a sanity figure worth flagging


@dataclass(frozen=True)
class Regime:
    """One benchmark setting, run the same way by both engines."""

    name: str
    label: str
    router: str = "round_robin"
    timing: dict[str, Any] = field(default_factory=lambda: dict(FIXED))
    speedup: float = 1.0
    disaggregated: bool = False
    host: dict[str, Any] | None = None
    source: str = "conversation"  # a key of SOURCES: the trace (or synthetic traffic) replayed
    rows: int = 0  # the first N rows of a vendored slice (0: all of it)
    workers: int = WORKERS
    dp: int = 1
    blocks: int = 1000
    block: int = BLOCK
    lag_ms: float | None = None  # the KV router's kv_event_lag_ms
    lanes: int | None = None  # agentic lanes (source "agentic")
    plays: int = 150  # bench_agentic corpus plays (source "agentic"; AGENTIC_PLAYS)
    cli: bool = False  # kvreplay's child is `python -m kvreplay run`, not the API
    telemetry_ms: float | None = None  # spec.telemetry's sample interval
    backend: str = "vllm"
    mtp: dict[str, Any] | None = None  # the rank's aic_* keys
    g3: dict[str, Any] | None = None
    state: dict[str, Any] | None = None  # the rank's state_cache (hybrid KV)
    startup_s: float | None = None  # under BenchSchedule (the `scaled` regime), this start-up

    def rank(self, worker_type: str | None) -> dict[str, Any]:
        """The engine settings of one rank (`worker_type` None: leave the field out)."""
        out: dict[str, Any] = {"backend": self.backend, "block_size": self.block,
                               "num_gpu_blocks": self.blocks, "timing_model": dict(self.timing)}
        if self.disaggregated:
            out.update(kv_cache_bytes_per_token=BYTES_PER_TOKEN,
                       kv_transfer_bytes_per_token=BYTES_PER_TOKEN, kv_transfer_bandwidth=25.0)
        if self.host is not None:
            out.update(kv_cache_bytes_per_token=BYTES_PER_TOKEN,
                       native_host_offload=dict(self.host))
        if self.mtp is not None:
            out.update(self.mtp)
        if self.g3 is not None:
            out["g3_offload"] = dict(self.g3)
        if self.state is not None:
            out.update(kv_cache_bytes_per_token=BYTES_PER_TOKEN, state_cache=dict(self.state))
        if worker_type is not None:
            out["worker_type"] = worker_type
        return out


AGG = f"{WORKERS} aggregated vLLM workers, 1000 x {BLOCK}-token blocks"
HOST_LINKS = {"d2h_bandwidth_gbps": LINK_GBPS, "h2d_bandwidth_gbps": LINK_GBPS}
G3_LINKS = {"read_bandwidth_gbps": 4.0, "write_bandwidth_gbps": 4.0,
            "latency_to_first_byte_ms": 0.1}
REGIMES = {r.name: r for r in (
    Regime("fixed-rr", f"{AGG}, fixed 20/5 ms, round robin"),
    Regime("fixed-kv", f"{AGG}, fixed 20/5 ms, kv_router", router="kv_router"),
    Regime("poly", f"{AGG}, polynomial timing, round robin", timing={"type": "polynomial"}),
    Regime("load10x", f"{AGG}, fixed 20/5 ms, round robin, arrivals 10x faster", speedup=10.0),
    Regime("pd", f"4 prefill + 4 decode vLLM workers, 1000 x {BLOCK}-token blocks, fixed 20/5 "
           f"ms, round robin, KV transfer {BYTES_PER_TOKEN} B/token at 25 GB/s",
           disaggregated=True),
    Regime("g2-local", f"{AGG}, fixed 20/5 ms, round robin, G2 per rank 4,000 host blocks, "
           f"{LINK_GBPS:g} GB/s links", host={"num_host_blocks": 4000, **HOST_LINKS}),
    Regime("g2-shared", f"{AGG}, fixed 20/5 ms, round robin, G2 cluster-shared 16,000 host "
           f"blocks, {LINK_GBPS:g} GB/s links",
           host={"scope": "cluster_shared", "num_host_blocks": 16000, "kv_layout_id": "bench",
                 **HOST_LINKS}),
    Regime("mtp", f"{AGG}, fixed 20/5 ms, round robin, MTP nextn 2, rates 0.8, 0.6",
           mtp={"aic_nextn": 2, "aic_nextn_accept_rates": "0.8,0.6", "aic_mtp_seed": 42}),
    Regime("floor", f"{AGG}, fixed 20/5 ms, round robin, the first trace row alone; kvreplay "
           "through `python -m kvreplay run`", rows=1, cli=True),
    Regime("telemetry", f"{AGG}, fixed 20/5 ms, round robin, telemetry every 1,000 ms",
           telemetry_ms=1000.0),
    Regime("sglang", f"{WORKERS} aggregated SGLang workers, 1000 x {BLOCK}-token pages, fixed "
           "20/5 ms, round robin, fifo", backend="sglang"),
    Regime("trtllm", f"{WORKERS} aggregated TensorRT-LLM workers, 1000 x {BLOCK}-token blocks, "
           "fixed 20/5 ms, round robin, guaranteed_no_evict", backend="trtllm"),
    Regime("g3-local", f"{AGG}, fixed 20/5 ms, round robin, G2 per rank 1,000 host blocks, "
           "G3 per worker 16,000 blocks at 4 GB/s, 0.1 ms first byte",
           host={"num_host_blocks": 1000, **HOST_LINKS}, g3={**G3_LINKS, "scope": "worker_local",
                                                               "num_g3_blocks": 16000}),
    # The first 4,000 rows: on the whole trace the reference's run did not finish in 40 minutes
    # (its cost grows faster than the trace: 10.6 s of CPU at 2,000 rows, 31.7 s at 4,000).
    Regime("g3-shared", f"{AGG}, fixed 20/5 ms, round robin, G2 per rank 1,000 host blocks, "
           "G3 cluster-shared 64,000 blocks at 4 GB/s per worker, 16 GB/s pool caps; the "
           "conversation trace's first 4,000 rows", rows=4000,
           host={"num_host_blocks": 1000, **HOST_LINKS},
           g3={**G3_LINKS, "scope": "cluster_shared", "num_g3_blocks": 64000,
               "shared_read_bandwidth_gbps": 16.0, "shared_write_bandwidth_gbps": 16.0}),
    Regime("hybrid", f"{AGG}, fixed 20/5 ms, round robin, hybrid KV: a 100 MB state per request "
           "(2 blocks) with its checkpoints", state={"bytes_per_request": 100_000_000}),
)}

# The realistic mix: small and mid-size scenarios of the kinds users run, each on a vendored
# slice (tests/cases/mooncake/, 512-token hash blocks) or, for agentic plays, on
# bench_agentic's seeded corpus (no vendored agentic trace is that large).
CONV, SYNTH = "conv-slice", "synth-slice"
G2_RANK = {"num_host_blocks": 2000, **HOST_LINKS}
MIX = [
    Regime("mix-poly", "conversation slice 2,000 rows, 4 workers, polynomial timing, round "
           "robin", timing={"type": "polynomial"}, source=CONV, workers=4),
    Regime("mix-g2-local", "conversation slice 2,000 rows, 4 workers, fixed 20/5 ms, round "
           "robin, G2 per rank 2,000 host blocks", source=CONV, workers=4, host=G2_RANK),
    # round robin: with kv_router, the reference fails on this slice ("placement policy error:
    # failed to apply replay KV event ... removed")
    Regime("mix-g2-shared", "conversation slice 2,000 rows, 4 workers, polynomial, round robin, "
           "G2 cluster-shared 8,000 host blocks", source=CONV, workers=4,
           timing={"type": "polynomial"},
           host={"scope": "cluster_shared", "num_host_blocks": 8000, "kv_layout_id": "bench",
                 **HOST_LINKS}),
    Regime("mix-pd", "conversation slice 2,000 rows, 2 prefill + 2 decode, fixed 20/5 ms, "
           "KV transfer 25 GB/s", source=CONV, workers=4, disaggregated=True),
    Regime("mix-dp", "synthetic slice 1,000 rows, 2 workers x attention DP 4, fixed 20/5 ms, "
           "round robin", source=SYNTH, workers=2, dp=4),
    Regime("mix-kv-lag", "conversation slice 2,000 rows, 4 workers, fixed 20/5 ms, kv_router "
           "with kv_event_lag_ms 20", source=CONV, workers=4, router="kv_router", lag_ms=20.0),
    Regime("mix-agentic", "bench_agentic corpus 150 plays (about 1.5k requests), 16 lanes, 2 "
           "workers x 2,000 blocks of 64 tokens, fixed 20/5 ms, round robin", source="agentic",
           workers=2, blocks=2000, block=64, lanes=16),
    Regime("mix-preempt", "conversation slice first 1,000 rows, 2 workers x 300 GPU blocks "
           "(preemption), fixed 20/5 ms, round robin", source=CONV, rows=1000, workers=2,
           blocks=300),
    Regime("mix-load10x", "synthetic slice 1,000 rows, 4 workers, polynomial, round robin, "
           "arrivals 10x faster", source=SYNTH, workers=4, speedup=10.0,
           timing={"type": "polynomial"}),
]
# bench_agentic's regime (its G2 private cell, round robin): 1,000 plays, 64 lanes, 4 workers.
AGENTIC = Regime("agentic", "bench_agentic corpus 1,000 plays (9,984 requests), 64 lanes, 4 "
                 "workers x 2,000 blocks of 64 tokens, fixed 20/5 ms, round robin, G2 per rank "
                 "8,000 host blocks, 32 GB/s links", source="agentic", workers=4, blocks=2000,
                 block=64, lanes=64, plays=1000,
                 host={"scope": "dp_rank_local", "num_host_blocks": 8000, **HOST_LINKS})
AGENTIC_MODEL = "agent-model"  # bench_agentic's model name
AGENTIC_PLAYS = 150  # the mix's corpus
# Overload: one worker far past its capacity (the reference's own default rank: 64-token blocks,
# 16,384 of them, polynomial timing); 20,000 synthetic requests of 1024 in / 128 out tokens at a
# constant 40 req/s (kvreplay `constant_rate`, the reference's `arrival_interval_ms=25`): the
# queue grows to thousands waiting.
OVERLOAD = Regime("overload", "1 vLLM worker, 16,384 x 64-token blocks, polynomial timing; "
                  "synthetic 1024 in / 128 out, 40 req/s constant, 20,000 requests",
                  timing={"type": "polynomial"}, source="synthetic", workers=1, blocks=16384,
                  block=64)
SYNTHETIC = {"input_tokens": 1024, "output_tokens": 128, "requests": 20000, "rate": 40.0}
SCALED = Regime("scaled", f"aggregated vLLM workers, 1000 x {BLOCK}-token blocks, fixed 20/5 ms, "
                "round robin, scaling 2 -> 8 (300 s) -> 4 (2,000 s), a tick every 5 s, 30 s "
                "start-up", workers=2, startup_s=30.0)
REGIMES.update({r.name: r for r in (*MIX, OVERLOAD, SCALED, AGENTIC)})
GROUPS = {"mix": [r.name for r in MIX]}
VENDORED = {CONV: REPO / "tests" / "cases" / "mooncake" / "conversation_trace-head2000.jsonl.gz",
            SYNTH: REPO / "tests" / "cases" / "mooncake" / "synthetic_trace-head1000.jsonl.gz"}




class BenchSchedule:
    """The `scaled` regime's policy (the reference's protocol): a tick every 5 s, the target a
    function of the time only, so both engines get the same decisions."""

    def initial_tick_ms(self) -> float:
        return 5000.0

    def on_tick(self, snapshot: dict[str, Any]) -> dict[str, Any]:
        now = float(snapshot["now_ms"])
        target = 2 if now < 300_000 else 8 if now < 2_000_000 else 4
        moved = target != snapshot["non_draining_decode_count"]
        return {"target_prefill": None, "target_decode": target if moved else None,
                "next_tick_ms": now + 5000.0}


# -- children: one replay each, its report's sanity figures as JSON on stdout -------------------

def sanity(summary: dict[str, Any]) -> dict[str, Any]:
    """The report figures both engines print side by side."""
    return {"requests": summary["num_requests"], "completed": summary["completed_requests"],
            "reuse": summary["prefix_cache_reused_ratio"], "ttft": summary["mean_ttft_ms"],
            "duration_ms": summary["duration_ms"]}


def native_document(regime: Regime, trace: Path) -> dict[str, Any]:
    """kvreplay's native document of a regime (the shapes of tests/differential/harness.py)."""
    def role(worker_type: str) -> dict[str, Any]:
        return {"dp_size": regime.dp, "tensor_parallel_size": 1, "speculation": None,
                "rank": regime.rank(worker_type)}

    topology: dict[str, Any]
    engine: dict[str, Any]
    if regime.disaggregated:
        half = {"initial_workers": regime.workers // 2}
        topology = {"kind": "disaggregated", "prefill": half, "decode": dict(half),
                    "handoff_latency_ms": 0.0}
        engine = {"prefill": role("prefill"), "decode": role("decode")}
    else:
        topology = {"kind": "aggregated", "workers": {"initial_workers": regime.workers}}
        engine = role("aggregated")
        if regime.startup_s is not None:
            engine["startup_seconds"] = regime.startup_s
    config = None if regime.lag_ms is None else {"kv_event_lag_ms": regime.lag_ms}
    model = AGENTIC_MODEL if regime.source == "agentic" else "bench"
    spec: dict[str, Any] = {
        "version": 1, "model": model, "topology": topology, "engine": engine,
        "adapters": {"placement": {"provider": regime.router, "config": config},
                     "scaling": {"provider": "none", "config": None}},
        "max_sim_time_ms": None, "record_per_request": True, "sla": None}
    if regime.telemetry_ms is not None:
        spec["telemetry"] = {"sample_interval_ms": regime.telemetry_ms}
    return {"spec": spec, "traffic": native_traffic(regime, trace)}


def native_traffic(regime: Regime, trace: Path) -> dict[str, Any]:
    """The document's traffic section: synthetic, agentic (Weka plays) or a Mooncake trace."""
    if regime.source == "synthetic":
        return {"source_type": "synthetic", "input_tokens": SYNTHETIC["input_tokens"],
                "output_tokens": SYNTHETIC["output_tokens"], "cached_prefix_tokens": 0,
                "shared_prefix_ratio": 0.0, "num_prefix_groups": 0,
                "stop_requests": SYNTHETIC["requests"], "load_type": "constant_rate",
                "request_rate": SYNTHETIC["rate"]}
    if regime.source == "agentic":
        return {"source_type": "trace", "trace_format": "weka", "trace_paths": [str(trace)],
                "load_type": "trace_timestamps", "agentic_lanes": regime.lanes,
                "weka_nested_timestamp_basis": "absolute"}
    traffic: dict[str, Any] = {"source_type": "trace", "trace_format": "mooncake",
                               "trace_paths": [str(trace)], "load_type": "trace_timestamps",
                               "trace_block_size": regime.block}
    if regime.speedup != 1.0:
        traffic["speedup"] = regime.speedup
    return traffic


def report_sha256(report: dict[str, Any]) -> str:
    """The sha256 of a report's canonical text, `meta` left out (see --sha256)."""
    from kvreplay.engine.report import dumps_report

    body = {key: value for key, value in report.items() if key != "meta"}
    return hashlib.sha256(dumps_report(body).encode()).hexdigest()


def child_kvreplay(regime: Regime, trace: Path, digest: bool = False) -> dict[str, Any]:
    from kvreplay.engine import run_native
    from kvreplay.engine.report import report_from_run
    from kvreplay.engine.traces import workload_from_traffic

    document = native_document(regime, trace)
    extra = {"model": AGENTIC_MODEL} if regime.source == "agentic" else {}
    workload = workload_from_traffic(document["traffic"], base_dir=str(trace.parent),
                                     block_size=regime.block, **extra)
    policy = BenchSchedule() if regime.startup_s is not None else None
    result = run_native(document, workload=workload, scaling_policy=policy)
    from kvreplay.engine import compiled

    report = report_from_run(result)
    out = {**sanity(report["summary"]), "passes": result.facts.passes,
           "fast_forwarded_passes": result.facts.fast_forwarded_passes,
           "core": "compiled" if compiled.active() else "pure"}
    if digest:
        start = time.process_time()
        out["sha256"] = report_sha256(report)
        out["digest_cpu_s"] = time.process_time() - start  # taken off the timed figure
    return out


def child_reference(regime: Regime, trace: Path) -> dict[str, Any]:
    os.environ["DYN_LOG"] = "error"
    from dynamo.replay import run_synthetic_trace_replay, run_trace_replay

    kwargs: dict[str, Any] = {"router_mode": regime.router, "capture_per_request": True,
                              "kv_event_lag_ms": regime.lag_ms}
    if regime.disaggregated:
        kwargs.update(
            prefill_engine_args={"engine": regime.rank("prefill"), "dp_size": regime.dp},
            decode_engine_args={"engine": regime.rank("decode"), "dp_size": regime.dp},
            num_prefill_workers=regime.workers // 2, num_decode_workers=regime.workers // 2)
    else:
        kwargs.update(extra_engine_args={"engine": regime.rank(None), "dp_size": regime.dp},
                      num_workers=regime.workers)
    if regime.startup_s is not None:  # the hook is a keyword of the core's replay only
        from dynamo._core import run_mocker_trace_replay

        kwargs["extra_engine_args"]["startup_time"] = regime.startup_s
        report = run_mocker_trace_replay(
            [str(trace)], trace_format="mooncake", trace_block_size=regime.block,
            scaling_policy=BenchSchedule(), **kwargs)
        return sanity(dict(report.summary))
    if regime.telemetry_ms is not None:
        from dynamo.replay import TelemetryOptions

        kwargs["telemetry_options"] = TelemetryOptions(sample_interval_ms=regime.telemetry_ms)
    if regime.source == "synthetic":
        report = run_synthetic_trace_replay(
            SYNTHETIC["input_tokens"], SYNTHETIC["output_tokens"], SYNTHETIC["requests"],
            arrival_interval_ms=1000.0 / SYNTHETIC["rate"], **kwargs)
    elif regime.source == "agentic":
        report = run_trace_replay([str(trace)], trace_format="weka", trace_block_size=regime.block,
                                  execution_model=AGENTIC_MODEL, agentic_lanes=regime.lanes,
                                  weka_nested_timestamp_basis="absolute", **kwargs)
    else:
        report = run_trace_replay([str(trace)], trace_format="mooncake",
                                  trace_block_size=regime.block,
                                  arrival_speedup_ratio=regime.speedup, **kwargs)
    return sanity(dict(report.summary))


# -- parent: spawn, measure, tabulate --------------------------------------------------------------

@dataclass
class Run:
    """One child: the wait4 figures, and its JSON result (or the reason it failed)."""

    cpu_s: float
    wall_s: float
    rss_mb: float
    result: dict[str, Any]
    error: str | None = None


def cli_command(python: str, regime: Regime, trace: Path) -> list[str]:
    """`kvreplay run` of the regime's native spec (written beside the trace) over `trace`."""
    spec = trace.parent / f"{regime.name}.spec.json"
    spec.write_text(json.dumps(native_document(regime, trace)), encoding="utf-8")
    return [python, "-m", "kvreplay", "run", str(spec), "--trace", str(trace), "--format",
            "json", "--no-progress"]


def spawn(python: str, engine: str, regime: str, trace: Path, digest: bool = False,
          pure: bool = False) -> Run:
    """Run one child to completion; CPU and peak RSS are the child's own, read by wait4
    (less the CPU a kvreplay child says it spent hashing its report). `pure`: kvreplay with
    KVREPLAY_PURE_PYTHON=1."""
    cmd = [python, __file__, "--child", engine, "--regimes", regime, "--trace", str(trace)]
    cmd += ["--sha256"] if digest else []
    cli = engine == "kvreplay" and REGIMES[regime].cli
    if cli:
        cmd = cli_command(python, REGIMES[regime], trace)
    env = dict(os.environ, DYN_LOG="error")
    # Both engines' children may cache their bytecode, as an installed package has it: with
    # PYTHONDONTWRITEBYTECODE (set on some machines) every child would compile kvreplay's
    # sources again, about 0.08 s of the floor regime's CPU.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if pure:
        env["KVREPLAY_PURE_PYTHON"] = "1"
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        actions = [(os.POSIX_SPAWN_DUP2, out.fileno(), 1), (os.POSIX_SPAWN_DUP2, err.fileno(), 2)]
        start = time.perf_counter()
        pid = os.posix_spawnp(python, cmd, env, file_actions=actions)
        _, status, usage = os.wait4(pid, 0)
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    run = Run(usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024.0, {})
    lines, code = stdout.strip().splitlines(), os.waitstatus_to_exitcode(status)
    if code != 0 or not lines:
        tail = stderr.strip().splitlines()
        run.error = f"exit status {code}" + (f": {tail[-1][:160]}" if tail else "")
    else:
        run.result = json.loads(lines[-1]) if not cli else \
            {**sanity(json.loads(stdout)), "sha256": report_sha256(json.loads(stdout))}
        run.cpu_s -= float(run.result.get("digest_cpu_s", 0.0))
    return run


@dataclass
class Cell:
    """All runs of one engine in one regime."""

    runs: list[Run]

    @property
    def good(self) -> list[Run]:
        return [r for r in self.runs if r.error is None]

    @property
    def error(self) -> str | None:
        return None if self.good else self.runs[0].error

    def cpu(self) -> tuple[float, float]:
        return min(r.cpu_s for r in self.good), statistics.median(r.cpu_s for r in self.good)

    def wall(self) -> tuple[float, float]:
        return min(r.wall_s for r in self.good), statistics.median(r.wall_s for r in self.good)

    def rss(self) -> float:
        return max(r.rss_mb for r in self.good)

    def figures(self) -> dict[str, Any]:
        return self.good[0].result

    def cores(self) -> str:
        """The cores the kvreplay children ran ('' for the reference or the CLI child)."""
        return "/".join(sorted({str(r.result["core"]) for r in self.good if "core" in r.result}))

    def digests(self) -> set[str]:
        return {str(r.result["sha256"]) for r in self.good if "sha256" in r.result}


COLUMNS = (f"{'':<10} {'CPU s min':>9} {'med':>7} {'wall s min':>10} {'med':>7} {'RSS MB':>7} "
           f"{'completed':>10} {'reuse':>7} {'TTFT ms':>9} {'sim s':>8}")


def ratio_line(name: str, mine: Cell, ref: Cell, legend: str) -> dict[str, float]:
    """Print and return the CPU, wall and RSS ratios of two cells."""
    ratios = {"cpu_min": mine.cpu()[0] / ref.cpu()[0], "cpu_med": mine.cpu()[1] / ref.cpu()[1],
              "wall_min": mine.wall()[0] / ref.wall()[0],
              "wall_med": mine.wall()[1] / ref.wall()[1], "rss": mine.rss() / ref.rss()}
    print(f"{name:<10} {ratios['cpu_min']:>9.2f} {ratios['cpu_med']:>7.2f} "
          f"{ratios['wall_min']:>10.2f} {ratios['wall_med']:>7.2f} {ratios['rss']:>7.2f}   "
          f"{legend}")
    return ratios


def print_regime(regime: Regime, cells: dict[str, Cell]) -> dict[str, float] | None:
    """The regime's table; returns its kvreplay/reference ratios (None if a side failed)."""
    print(f"\n== {regime.name}: {regime.label}")
    print(COLUMNS)
    for engine, cell in cells.items():
        if cell.error is not None:
            print(f"{engine:<10} failed: {cell.error}")
            continue
        (cpu_min, cpu_med), (wall_min, wall_med) = cell.cpu(), cell.wall()
        f = cell.figures()
        failed = [r.error for r in cell.runs if r.error is not None]
        note = f"  ({len(failed)} of {len(cell.runs)} runs failed: {failed[0]})" if failed else ""
        core = f"  core {cell.cores()}" if cell.cores() else ""
        print(f"{engine:<10} {cpu_min:>9.2f} {cpu_med:>7.2f} {wall_min:>10.2f} {wall_med:>7.2f} "
              f"{cell.rss():>7.0f} {f['completed']:>10} {f['reuse']:>7.4f} {f['ttft']:>9.2f} "
              f"{f['duration_ms'] / 1000:>8.1f}{core}{note}")
    mine, ref = cells["kvreplay"], cells["reference"]
    if mine.error is not None or ref.error is not None:
        return None
    ratios = ratio_line("ratio", mine, ref, "(kvreplay / reference)")
    pure = cells.get("kv-pure")
    if pure is not None and pure.error is None:
        pure_ratios = ratio_line("pure ratio", pure, ref, "(kv-pure / reference)")
        ratios.update({f"pure_{key}": value for key, value in pure_ratios.items()})
        ratio_line("comp/pure", mine, pure, "(kvreplay compiled / pure)")
        both = mine.digests() | pure.digests()
        same = len(both) == 1 and mine.digests() and pure.digests()
        print(f"sha256: {'compiled = pure' if same else 'DIFFER'}: {', '.join(sorted(both))}")
    agree = f"the engines agree (within {TOLERANCE:.0%}, counts exactly)"
    for line in sanity_lines(regime, mine, ref) or [agree]:
        print(f"sanity: {line}")
    return ratios


FIGURES = {"requests": "requests", "completed": "completed requests", "reuse": "reuse ratio",
           "ttft": "mean TTFT", "duration_ms": "simulated duration"}
EXACT = ("requests", "completed")


def spread(cell: Cell, key: str) -> tuple[float, float]:
    """The lowest and highest value of a sanity figure over the cell's runs."""
    values = [float(r.result[key]) for r in cell.good]
    return min(values), max(values)


def shown(low: float, high: float) -> str:
    return f"{low:.4g}" if low == high else f"{low:.4g}..{high:.4g}"


def sanity_lines(regime: Regime, mine: Cell, ref: Cell) -> list[str]:
    """What is odd about the sanity figures: an engine varying run to run, or kvreplay outside
    the reference's range by more than the tolerance (nothing when all agree)."""
    lines = []
    for engine, cell in (("kvreplay", mine), ("reference", ref)):
        varying = [f"{name} {shown(*spread(cell, key))}" for key, name in FIGURES.items()
                   if spread(cell, key)[0] != spread(cell, key)[1]]
        if varying:
            lines.append(f"{engine} varies run to run: {', '.join(varying)}")
    found = []
    for key, name in FIGURES.items():
        (low, high), (ref_low, ref_high) = spread(mine, key), spread(ref, key)
        slack = 0.0 if key in EXACT else TOLERANCE * max(abs(ref_low), abs(ref_high))
        if low < ref_low - slack or high > ref_high + slack:
            middle, ref_middle = (low + high) / 2, (ref_low + ref_high) / 2
            change = f" ({(middle - ref_middle) / ref_middle:+.1%})" if ref_middle else ""
            found.append(f"{name} {shown(low, high)} vs {shown(ref_low, ref_high)}{change}")
    if found:
        hint = ("; the reference's kv_router breaks placement ties at random, --repeat > 1 "
                "shows its spread" if regime.router == "kv_router" else "")
        lines.append(f"DISAGREE (kvreplay vs reference): {'; '.join(found)}{hint}")
    return lines


def trace_for(regime: Regime, conversation: Path, folder: str) -> Path:
    """The trace file a regime replays, written into `folder` the first time it is asked for
    (synthetic traffic has none: a path in the folder, never read)."""
    if regime.source == "conversation" and not regime.rows:
        return conversation
    plays = "" if regime.plays == AGENTIC_PLAYS else f"-{regime.plays}-plays"  # the name seeds ids
    path = Path(folder) / f"{regime.source}-{regime.rows}{plays}.jsonl"
    if path.exists() or regime.source == "synthetic":
        return path
    if regime.source == "agentic":
        from bench_agentic import corpus

        path.write_text("".join(json.dumps(p, separators=(",", ":")) + "\n"
                                for p in corpus(regime.plays)))
        return path
    source = VENDORED.get(regime.source)
    with (gzip.open(source, "rt") if source else conversation.open()) as f, \
            path.open("w") as out:
        for _, line in zip(range(regime.rows or sys.maxsize), f, strict=False):
            out.write(line)
    return path


def run_regimes(names: list[str], conversation: Path, repeat: int, ref_python: str,
                folder: str, pure: bool = False) -> None:
    summary: dict[str, dict[str, float] | None] = {}
    cpu: dict[str, dict[str, tuple[float, float]]] = {}
    for name in names:
        trace = trace_for(REGIMES[name], conversation, folder)
        runs: dict[str, list[Run]] = {"kvreplay": [], "kv-pure": [], "reference": []}
        if not pure:
            del runs["kv-pure"]
        for _ in range(repeat):  # alternate the engines, so load drift hits both alike
            runs["kvreplay"].append(spawn(sys.executable, "kvreplay", name, trace, digest=pure))
            if pure:
                runs["kv-pure"].append(spawn(sys.executable, "kvreplay", name, trace,
                                             digest=True, pure=True))
            runs["reference"].append(spawn(ref_python, "reference", name, trace))
        cells = {e: Cell(r) for e, r in runs.items()}
        summary[name] = print_regime(REGIMES[name], cells)
        if summary[name] is not None:
            cpu[name] = {e: c.cpu() for e, c in cells.items()}
    print("\nkvreplay / reference, all regimes")
    extra = f" {'pure min':>9} {'pure med':>9}" if pure else ""
    print(f"{'regime':<14} {'CPU min':>8} {'CPU med':>8} {'wall min':>9} {'wall med':>9} "
          f"{'RSS':>6}{extra}")
    for name, ratios in summary.items():
        if ratios is None:
            print(f"{name:<14} (a side failed, see above)")
            continue
        extra = (f" {ratios['pure_cpu_min']:>9.2f} {ratios['pure_cpu_med']:>9.2f}"
                 if "pure_cpu_min" in ratios else "")
        print(f"{name:<14} {ratios['cpu_min']:>8.2f} {ratios['cpu_med']:>8.2f} "
              f"{ratios['wall_min']:>9.2f} {ratios['wall_med']:>9.2f} {ratios['rss']:>6.2f}"
              f"{extra}")
    mix = [n for n in GROUPS["mix"] if n in cpu]
    if len(mix) > 1:
        print(f"\nrealistic mix, {len(mix)} scenarios, CPU seconds summed (min / median)")
        engines = [e for e in ("kvreplay", "kv-pure", "reference") if all(e in cpu[n]
                                                                         for n in mix)]
        for engine in engines:
            low, mid = (sum(cpu[n][engine][i] for n in mix) for i in (0, 1))
            print(f"{engine:<14} {low:>8.2f} {mid:>8.2f}")
        for engine in engines[:-1]:
            ratio = [sum(cpu[n][engine][i] for n in mix) / sum(cpu[n]["reference"][i]
                                                               for n in mix) for i in (0, 1)]
            print(f"{'ratio':<14} {ratio[0]:>8.2f} {ratio[1]:>8.2f}   ({engine} / reference)")


def run_digests(names: list[str], conversation: Path, folder: str, pure: bool = False) -> None:
    """kvreplay alone, once per regime: the sha256 of each report (meta left out); `pure`:
    also with KVREPLAY_PURE_PYTHON=1, and whether the two hashes are equal."""
    print(f"\n{'regime':<14} {'core':<8} {'CPU s':>7} {'passes':>8} {'fast-fwd':>8}  "
          "sha256 (report without meta)")
    for name in names:
        trace = trace_for(REGIMES[name], conversation, folder)
        digests = []
        for as_pure in (False, True) if pure else (False,):
            run = spawn(sys.executable, "kvreplay", name, trace, digest=True, pure=as_pure)
            if run.error is not None:
                print(f"{name:<14} failed: {run.error}")
                continue
            r = run.result
            core = r.get("core", "pure" if as_pure else "")
            digests.append(r["sha256"])
            print(f"{name:<14} {core:<8} {run.cpu_s:>7.2f} {r.get('passes', ''):>8} "
                  f"{r.get('fast_forwarded_passes', ''):>8}  {r['sha256']}")
        if pure and len(digests) == 2:
            print(f"{'':<14} {'same' if digests[0] == digests[1] else 'DIFFER: compiled vs pure'}")


def run_scaling(trace: Path, rows: int, repeat: int, folder: str) -> None:
    """kvreplay alone on fixed-rr: CPU cost per request as the trace grows."""
    sizes = [s for s in SCALING_SIZES if s < rows] + [rows]
    print(f"\nkvreplay cost per request, fixed-rr ({REGIMES['fixed-rr'].label}), min of {repeat}")
    print(f"{'requests':>9} {'CPU s':>7} {'wall s':>7} {'CPU us/request':>15} {'RSS MB':>7} "
          f"{'passes':>8} {'fast-forwarded':>15}")
    for size in sizes:
        sub = Path(folder) / f"scaling-{size}"
        sub.mkdir()
        path = first_rows(trace, size, str(sub))
        cell = Cell([spawn(sys.executable, "kvreplay", "fixed-rr", path) for _ in range(repeat)])
        if cell.error is not None:
            print(f"{size:>9} failed: {cell.error}")
            continue
        f = cell.figures()
        cpu = cell.cpu()[0]
        print(f"{f['requests']:>9} {cpu:>7.2f} {cell.wall()[0]:>7.2f} "
              f"{cpu / f['requests'] * 1e6:>15.0f} {cell.rss():>7.0f} {f['passes']:>8} "
              f"{f['fast_forwarded_passes']:>15}")


def reference_version(python: str) -> str:
    code = "import importlib.metadata as m; print(m.version('ai-dynamo'))"
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
    return done.stdout.strip() or "version unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace", type=Path, default=SHARED_TRACE)
    parser.add_argument("--ref-python", default=os.environ.get("KVREPLAY_REF_PYTHON",
                                                               sys.executable),
                        help="python with ai-dynamo installed (default: this one)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per engine and regime")
    parser.add_argument("--rows", type=int, default=0, help="first N trace rows (0 = all)")
    parser.add_argument("--regimes", default=",".join(REGIMES),
                        help=f"comma-separated, of {', '.join([*REGIMES, *GROUPS])} ('' for none)")
    parser.add_argument("--scaling", action="store_true",
                        help="add kvreplay's cost per request at 2k/4k/8k/all rows")
    parser.add_argument("--sha256", action="store_true",
                        help="kvreplay alone, once per regime: print each report's sha256")
    parser.add_argument("--pure", action="store_true",
                        help="also kvreplay with KVREPLAY_PURE_PYTHON=1 (no compiled core): "
                             "both ratios, and whether the report hashes are equal")
    parser.add_argument("--child", choices=("kvreplay", "reference"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    names = [m for n in args.regimes.split(",") if n for m in GROUPS.get(n, [n])]
    unknown = [n for n in names if n not in REGIMES]
    if unknown:
        parser.error(f"unknown regime(s) {', '.join(unknown)}; known: "
                     f"{', '.join([*REGIMES, *GROUPS])}")
    if args.child:
        if args.child == "kvreplay":
            print(json.dumps(child_kvreplay(REGIMES[names[0]], args.trace, args.sha256)))
            gc.freeze()  # the process ends as `kvreplay` does (kvreplay/cli/main.py, entry)
        else:
            print(json.dumps(child_reference(REGIMES[names[0]], args.trace)))
        return

    conversation = args.scaling or any(REGIMES[n].source == "conversation" for n in names)
    if conversation:
        require_trace(args.trace, "bench_engine")
        with args.trace.open() as f:
            total = sum(1 for _ in f)
        rows = min(args.rows, total) if args.rows > 0 else total
        trace_line = (f"{args.trace.name}, first {rows:,} of {total:,} rows, {BLOCK}-token hash "
                      "blocks (the 12k regimes); ")
    else:
        trace_line = ""
    print(f"kvreplay vs reference (ai-dynamo {reference_version(args.ref_python)}): "
          f"{trace_line}{args.repeat} run(s) per engine and regime, each a fresh child process")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"The machine is shared ({os.cpu_count()} CPUs, load average {load}): CPU time (user "
          "+ system of the child, from wait4) is the fair comparison; wall time runs from launch "
          "to exit. Ratios are kvreplay / reference (below 1: kvreplay cheaper).")
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        print("PYTHONDONTWRITEBYTECODE is set here; the children run without it (bytecode "
              "cached as an installed package has it)")
    from kvreplay.engine.compiled import built

    print("kvreplay's compiled core: " + ("built and current" if built() else
          "not built or not current (its children run the Python sources; pip install -e .)"))
    with tempfile.TemporaryDirectory() as folder:
        trace = first_rows(args.trace, rows if rows < total else 0, folder) if conversation \
            else args.trace
        if names and args.sha256:
            run_digests(names, trace, folder, args.pure)
        elif names:
            run_regimes(names, trace, args.repeat, args.ref_python, folder, args.pure)
        if args.scaling:
            run_scaling(args.trace, rows, args.repeat, folder)


if __name__ == "__main__":
    main()
