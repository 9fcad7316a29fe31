"""Differential testing of the bundled engine against the reference engine (ai-dynamo 1.6.1).

A *scenario* is plain JSON: a deployment (aggregated or P/D, workers, DP, one vLLM rank per
role, optional G2, optional time cap, optional KV router knobs) and a Mooncake trace (rows with
sessions, mooncake or mooncake-delta), an Agentic Mooncake v2 graph (`header` and request rows
with dependencies, optional `agentic_lanes`) or synthetic sessions of 1-4 turns. KV-router
kinds use one scheduler: the reference breaks placement ties at random, so only a lone scheduler
compares exactly (the cost terms are checked on hand-made flips, test_router_knobs.py).
`generate(kind, seed)` draws one at random from a seeded generator; `run_reference` and
`run_kvreplay` replay it on both engines from the same trace file and return comparable results;
`compare` lists every difference (per request, matched by session and turn, agentic requests by
play and request id, and in the summary, agentic keys included); `shrink` reduces a
mismatching scenario to a minimal one.

Deliberate differences (docs/engine.md) are handled here by name, nowhere else:
- `reused_input_tokens` and `decode_reused_input_tokens` are capped at the input length (the
  reference may count a readmitted request's own output blocks).
- single-turn synthetic requests carry no session (the Dynamo API calls each one a session).
- an ITL percentile may sit one sketch bin away when a token gap lies on a bin boundary
  (kvreplay's gaps are whole nanoseconds, the reference's float sums land a hair above).
- under a scaling plan, billed worker seconds and GPU hours are compared to 100 ns of worker
  time (scaling_kind.BILLING_TOLERANCE_S: each worker's start and stop to 10 ns, as times).
"""

from __future__ import annotations

import copy
import json
import os
import pickle
import random
import select
import signal
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import kv_groups_kind
import scaling_kind

# SGLang and TensorRT-LLM ranks under their own schedulers (engine.md sections "SGLang" and
# "TensorRT-LLM"): policies, budgets, intervals, tiny pools so that eviction and retraction
# happen, sessions, mooncake-delta, DP; sglang-pd disaggregated; trtllm also P/D at times.
BACKEND_KINDS = ("sglang", "sglang-pd", "trtllm")
KINDS = ("agg", "agg-delta", "agg-dp", "pd", "pd-dp", "g2", "g2-pd", "synth", "kv-queue",
         "agentic", *BACKEND_KINDS, "mtp", "mtp-pd", "mtp-agentic", "scaling", "g3", "g3-kv",
         "g3-agentic", "agentic-g2-shared")
# Telemetry samples (the samples compared too) over scenarios of these kinds.
TELEMETRY_BASES = ("agg", "agg-dp", "g2", "kv-queue", "pd", "pd-dp", "g2-pd")
KINDS = KINDS + ("telemetry", "sglang-telemetry", "dynamo", "applied-compute", "hybrid",
                 "hybrid-mtp", "match-unit", "kv-groups", "sglang-pd-telemetry",
                 "trtllm-pd-telemetry", "sglang-pd-scaling")
# Kinds tools/difftest.py draws on request (--kinds) but the suite does not replay (mtp-pd
# joined the suite once its generator avoided the scenarios that livelock both engines).
# (sglang-pd-telemetry, the sglang-pd kind's scenarios sampled, was one until SGLang P/D
# telemetry matched the reference; engine.md, "Telemetry".)
# trtllm-pd-telemetry: the trtllm kind's scenarios, P/D on every seed, sampled.
# sglang-pd-scaling: the sglang-pd kind's scenarios (its seeds) under a P/D plan of the scaling
# kind (scaling_kind.py), drawn from a stream of its own.
DRAFT_KINDS: tuple[str, ...] = ()
# Backends the MTP kinds draw (one per scenario): vLLM, SGLang under its own scheduler (its
# decode step's bursts), TensorRT-LLM through the vLLM-shaped core.
MTP_BACKENDS = ("vllm", "vllm", "sglang", "trtllm")
# P/D: MTP on SGLang P/D is not drawn (its checks were made before SGLang's destination-first
# handoff landed).
MTP_PD_BACKENDS = ("vllm", "vllm", "trtllm")
# Kinds compared against the reference's spread: several workers behind its KV router, whose
# ties it breaks at random. kvreplay's run matches when it equals, in every figure, one of up
# to SPREAD_RUNS reference runs that placed every request where kvreplay did ("differ" when
# such runs exist and none is equal, "unplaced" when none placed them so: kvreplay's
# placements are a sample the reference did not draw). The suite replays
# a few seeds (several reference runs each); tools/difftest.py runs any number.
SPREAD_KINDS = ("g3-kv-workers",)
SPREAD_RUNS = 12
TIME_KEYS = ("arrival_time_ms", "dispatched_at_ms", "first_admit_ms", "first_token_ms",
             "last_token_ms", "terminal_time_ms", "prefill_admit_ms", "source_held_ms",
             "destination_reserved_ms", "destination_activated_ms", "decode_admit_ms",
             "source_released_ms")
COUNT_KEYS = ("input_length", "output_length", "requested_output_length",
              "reused_input_tokens", "decode_reused_input_tokens",
              "first_admission_g1_reused_input_tokens",
              "first_admission_host_reused_input_tokens", "terminal_status", "admission_count",
              "readmission_count")
# Summary keys compared by name: kvreplay's own G2 figures (g2_transfers, g2_timeline,
# first_admission_host_reused_ratio) have no reference counterpart and are left out.
SUMMARY_KEYS = ("num_requests", "completed_requests", "committed_prefill_tokens", "duration_ms",
                "total_input_tokens", "total_output_tokens", "g2_domains")
# Agentic rows: the request's identity (matched by play and request id) ...
AGENTIC_ROW_KEYS = ("uuid", "session_id", "agentic")
# ... and the agentic summary (graph, play outcomes, lifecycle transcript, trajectories).
AGENTIC_SUMMARY_KEYS = (
    "agentic_graph", "agentic_play_outcomes", "agentic_lifecycle_event_count",
    "agentic_lifecycle_digest", "agentic_model_projection", "total_trajectories",
    "completed_trajectories", "incomplete_trajectories") + tuple(
    f"{stat}_trajectory_e2e_latency_ms"
    for stat in ("mean", "min", "max", "median", "p50", "p75", "p90", "p95", "p99", "std"))
TOLERANCE_MS = 1e-5  # 10 ns: the reference sums float milliseconds
# Latency statistics of the summary: per-request samples (exact ranks) and the token-level ITL
# sketch. Times are compared like per-request times (10 ns: kvreplay's clock counts whole
# nanoseconds, the reference keeps float milliseconds of Poisson arrivals), and to a relative
# 1e-9 beyond that (means and deviations: exact sums here, running float sums there).
STAT_KEYS = tuple(f"{stat}_{name}_ms" for name in ("ttft", "ttst", "tpot", "itl", "e2e_latency")
                  for stat in ("mean", "min", "max", "median", "p75", "p90", "p95", "p99", "std"))
STAT_TOLERANCE = 1e-9
SKETCHED = ("median", "p75", "p90", "p95", "p99")  # ITL ranks read from the DDSketch
SKETCH_GAMMA = 1.0 + 2 * 0.001 / (1 - 0.001)  # its bin ratio (relative accuracy 0.001)


# -- scenarios ------------------------------------------------------------------------------------

def generate(kind: str, seed: int) -> dict[str, Any]:
    """A random small scenario of one kind (deterministic in the seed)."""
    known = KINDS + DRAFT_KINDS + SPREAD_KINDS
    if kind not in known:
        raise ValueError(f"unknown kind {kind!r} (one of {', '.join(known)})")
    rng = random.Random(f"{kind}:{seed}")
    if kind == "telemetry":
        return _telemetry_scenario(rng, seed)
    if kind == "mtp-agentic":
        return _mtp_agentic_scenario(rng, seed)
    if kind == "hybrid-mtp":
        return _hybrid_mtp_scenario(rng, seed)
    if kind == "match-unit":
        return _match_unit_scenario(rng, seed)
    if kind == "sglang-pd-scaling":
        # The sglang-pd kind's scenarios (its seeds) under a random P/D target schedule, with
        # each role's start-up delay (no G2: the reference refuses it on SGLang).
        scn = generate("sglang-pd", seed)
        scn.update(kind=kind, scaling=scaling_kind.plan(rng, True))
        return scn
    if kind in ("sglang-telemetry", "sglang-pd-telemetry"):
        # The sglang (sglang-pd) kind's scenarios (its seeds), sampled.
        scn = generate(kind.removesuffix("-telemetry"), seed)
        scn.update(kind=kind, telemetry_ms=rng.choice([0.5, 1.0, 2.0, 2.5, 3.0, 5.0, 10.0]))
        return scn
    bs = 4
    blocks = rng.choice([5, 6, 8, 10, 12, 16])
    if kind in ("dynamo", "applied-compute"):
        from harness_traces import applied_compute_scenario, dynamo_scenario

        make = dynamo_scenario if kind == "dynamo" else applied_compute_scenario
        return make(rng, {"kind": kind, "seed": seed, "block_size": bs}, blocks)

    def rank() -> dict[str, Any]:
        out: dict[str, Any] = {
            "backend": "vllm", "block_size": bs, "num_gpu_blocks": blocks,
            "kv_cache_bytes_per_token": 250000,
            "max_num_seqs": rng.choice([1, 2, 2, 3, 4]),
            "max_num_batched_tokens": rng.choice([8, 12, 16, 16, 32]),
            "enable_chunked_prefill": rng.random() < 0.8,
            "preemption_mode": rng.choice(["lifo", "lifo", "fifo"]),
            "timing_model": {"type": "fixed", "prefill_ms": rng.choice([1.0, 2.0, 3.0]),
                             "decode_ms": rng.choice([0.5, 1.0, 1.0, 2.0])}}
        if not out["enable_chunked_prefill"]:
            out["max_num_batched_tokens"] = 32  # every prompt fits one pass
        return out

    mtp = kind.startswith("mtp")
    delta = kind == "agg-delta" or (mtp and rng.random() < 0.2)
    scn: dict[str, Any] = {"kind": kind, "seed": seed, "block_size": bs,
                           "trace_format": "mooncake-delta" if delta else "mooncake"}
    if kind == "agentic":
        return _agentic_scenario(rng, scn, rank(), blocks)
    if kind == "g3-agentic":
        return _g3_agentic_scenario(rng, scn, rank(), blocks)
    if kind == "agentic-g2-shared":
        return _agentic_shared_g2_scenario(rng, scn, rank(), blocks)
    if kind in BACKEND_KINDS:
        return _backend_scenario(rng, scn, kind, rank, blocks)
    if kind == "trtllm-pd-telemetry":
        # The trtllm kind's scenarios, P/D on every seed, sampled.
        scn = _backend_scenario(rng, scn, kind, rank, blocks)
        scn["telemetry_ms"] = rng.choice([0.5, 1.0, 2.0, 2.5, 3.0, 5.0, 10.0])
        return scn
    if kind == "scaling":
        return _scaling_scenario(rng, scn, rank, blocks)
    if kind == "hybrid":
        return _hybrid_scenario(rng, scn, rank(), blocks)
    if kind == "kv-groups":  # kv_groups_kind.py
        rank_ = rank()
        rows = _rows(rng, bs, blocks, delta=False, outputs=[1, 1, 2, 3, 4, 6, 8, 12, 20])
        return kv_groups_kind.scenario(rng, scn, rank_, rows)
    if kind.endswith("pd") or kind == "pd-dp":
        scn["prefill"] = rank()
        scn["decode"] = rank()
        scn["prefill_workers"] = rng.choice([1, 1, 2])
        scn["decode_workers"] = rng.choice([1, 1, 2])
        scn["dp"] = rng.choice([2, 3]) if kind == "pd-dp" else (
            rng.choice([1, 1, 2]) if kind == "mtp-pd" else 1)
        for role in ("prefill", "decode"):
            scn[role].update({"kv_transfer_bytes_per_token": 250000,
                              "kv_transfer_bandwidth": rng.choice([0.5, 1.0, 4.0])})
        if kind == "pd-dp":
            # Each role's attention DP (1 on one side at most), its transfer timing mode and
            # bandwidth (none: no delay), drawn on their own.
            scn["prefill_dp"], scn["decode_dp"] = rng.choice(
                [(scn["dp"], scn["dp"]), (scn["dp"], 1), (1, scn["dp"]), (2, 3), (3, 2)])
            for role in ("prefill", "decode"):
                scn[role]["kv_transfer_timing_mode"] = rng.choice(["full_prompt",
                                                                   "destination_missing"])
                scn[role]["kv_transfer_bandwidth"] = rng.choice([None, 0.25, 0.5, 1.0, 4.0])
    else:
        scn["rank"] = rank()
        scn["workers"] = 1 if kind == "kv-queue" else rng.choice([1, 1, 2, 3])
        scn["dp"] = rng.choice([2, 3]) if kind == "agg-dp" else (
            rng.choice([1, 1, 1, 2]) if kind == "mtp" else 1)
        if kind == "agg-dp" or (kind == "mtp" and scn["dp"] > 1):
            scn["rank"]["prefill_schedule_interval"] = rng.choice([1, 2, 3])
    if kind.startswith("g2"):
        scope = rng.choice(["dp_rank_local", "dp_rank_local", "cluster_shared"])
        g2: dict[str, Any] = {"scope": scope, "num_host_blocks": rng.choice([2, 4, 8, 12]),
                              "d2h_bandwidth_gbps": rng.choice([0.1, 0.5, 1.0, 4.0]),
                              "h2d_bandwidth_gbps": rng.choice([0.1, 0.5, 1.0, 4.0])}
        if scope == "cluster_shared":
            g2["kv_layout_id"] = "diff"
        for role in ("rank", "prefill", "decode"):
            if role in scn:
                scn[role]["native_host_offload"] = dict(g2)
    if kind.startswith("g3"):
        _g3_deployment(rng, scn)
    if kind == "kv-queue":
        # One scheduler (no placement ties, which the reference breaks at random): the KV
        # router's queue, its order and its busy test are what differ between scenarios.
        scn["router"] = {"queue_threshold": rng.choice([None, 0.0, 0.25, 0.5, 1.0, 2.0]),
                         "queue_policy": rng.choice(["fcfs", "lcfs", "wspt"])}
    if kind == "synth":
        scn["synthetic"] = _synthetic(rng, bs, blocks)
        scn["rows"] = []
        return scn
    if mtp:
        _speculate(rng, scn)
    if rng.random() < 0.15:
        scn["max_sim_time_ms"] = float(rng.choice([20, 50, 120]))
    elif mtp:
        # Tiny pools can make two requests preempt each other forever (MTP reserves a whole
        # burst's blocks), in both engines alike: a cap far past the scenario's end stops them.
        scn["max_sim_time_ms"] = 2000.0
    outputs = [1, 2, 3, 5, 8, 12, 20] if mtp else [1, 1, 2, 3, 4]  # MTP: several bursts
    delta = scn["trace_format"] == "mooncake-delta"  # g3 kinds may draw a delta trace
    scn["rows"] = _rows(rng, bs, blocks, delta=delta, outputs=outputs)
    if mtp:
        _fit_outputs(scn["rows"], (blocks - 1) * bs, delta)
    if kind == "mtp-pd":
        _pd_bounds(scn, blocks)
    if mtp:
        _mtp_telemetry(scn)
    return scn


def _mtp_telemetry(scn: dict[str, Any]) -> None:
    """Telemetry samples on 3 MTP scenarios in 10 (cadences 0.5-10 ms), from a stream of their
    own (the other draws unchanged); not on TensorRT-LLM P/D, left out while its decode gauges
    differed and kept out so that the kind's seeds stay as they were (trtllm-pd-telemetry
    samples it; docs/engine.md, "Telemetry")."""
    sampled = random.Random(f"mtp-telemetry:{scn['kind']}:{scn['seed']}")
    if sampled.random() < 0.3 and not ("decode" in scn and "trtllm" in (
            scn["prefill"]["backend"], scn["decode"]["backend"])):
        scn["telemetry_ms"] = sampled.choice([0.5, 1.0, 2.0, 2.5, 3.0, 5.0, 10.0])


def _pd_bounds(scn: dict[str, Any], blocks: int) -> None:
    """mtp-pd avoids what neither engine finishes or what differs outside MTP: a decode pool
    holds every request whole (each fits `blocks - 1` blocks), running or reserved as a
    destination: a smaller one can preempt and recompute its running requests (a lone one
    itself, while destinations hold the rest of the pool) at one instant forever in both
    engines (a decode recompute takes no time, so no cap ends it); a max_model_len on the
    decode role applies on the prefill role too (drawn so before kvreplay failed the handoff of
    a prompt reaching the decode side's limit, as the reference: kept so that the kind's seeds
    stay as they were)."""
    decode = scn["decode"]
    decode["num_gpu_blocks"] = max(decode["num_gpu_blocks"],
                                   len(scn["rows"]) * (blocks - 1) + 1)
    if "max_model_len" in decode:
        scn["prefill"]["max_model_len"] = decode["max_model_len"]


def _telemetry_scenario(rng: random.Random, seed: int) -> dict[str, Any]:
    """A scenario of another kind, sampled on a cadence of 0.5-25 ms (a few to a few dozen
    samples over its run)."""
    scn = generate(rng.choice(TELEMETRY_BASES), 1_000_000 + seed)
    scn.update(kind="telemetry", base=scn["kind"],
               telemetry_ms=rng.choice([0.5, 1.0, 2.0, 2.5, 3.0, 5.0, 10.0, 25.0]))
    return scn


def _mtp_agentic_scenario(rng: random.Random, seed: int) -> dict[str, Any]:
    """An agentic scenario (kind agentic's generator) whose rank decodes with MTP: the
    reference runs agentic replay with MTP (the support matrix's AGX-SPECULATION stays the
    seeds' rule for configs); without G2 on the rank (G2 and MTP on one role: both engines
    refuse it)."""
    scn = generate("agentic", 2_000_000 + seed)
    scn.update(kind="mtp-agentic", seed=seed)
    scn["rank"].pop("native_host_offload", None)
    _draft(rng, scn["rank"])
    _mtp_telemetry(scn)
    return scn


def _hybrid_mtp_scenario(rng: random.Random, seed: int) -> dict[str, Any]:
    """A hybrid scenario (kind hybrid's generator) whose rank decodes with MTP: the reference
    runs a state cache with MTP (a prefix match unit with MTP it refuses: HYBRID-MATCH-UNIT),
    with longer outputs (several bursts) cut to fit the pool beside a state, and a time cap far
    past the scenario's end (tiny pools can make two requests preempt each other forever)."""
    scn = generate("hybrid", 3_000_000 + seed)
    scn.update(kind="hybrid-mtp", seed=seed)
    rank = scn["rank"]
    rank.pop("prefix_match_unit", None)
    _draft(rng, rank)
    for row in scn["rows"]:
        row["output_length"] = rng.choice([1, 2, 3, 5, 8, 12])
    state = -(-rank["state_cache"]["bytes_per_request"] // (
        scn["block_size"] * rank["kv_cache_bytes_per_token"]))
    _fit_outputs(scn["rows"], (rank["num_gpu_blocks"] - state - 1) * scn["block_size"], False)
    if scn.get("max_sim_time_ms") is None:
        scn["max_sim_time_ms"] = 2000.0
    return scn


def _match_unit_scenario(rng: random.Random, seed: int) -> dict[str, Any]:
    """A hybrid scenario (kind hybrid's generator) with prefix caching and a match unit below
    the block (hits ending inside a block, engine/unit_pages.py): 4-token blocks and a unit of
    1 or 2, or, on 1 seed in 3, 8-token blocks over the trace's 4-token hash blocks (prompts
    sharing half a block) and a unit of 1, 2 or 4, the pool and the state resized to the same
    tokens. No KV router (the reference refuses a unit with KV events: HYBRID-MATCH-UNIT)."""
    scn = generate("hybrid", 4_000_000 + seed)
    scn.update(kind="match-unit", seed=seed)
    rank = scn["rank"]
    rank["enable_prefix_caching"] = True
    if "router" in scn:
        del scn["router"]
    bs = scn["block_size"]
    state = -(-rank["state_cache"]["bytes_per_request"] // (bs * rank["kv_cache_bytes_per_token"]))
    if rng.random() < 1 / 3:
        bs *= 2
        rank["block_size"] = bs
        rank["num_gpu_blocks"] = max(state + 2, -(-rank["num_gpu_blocks"] // 2))
        state = -(-state // 2)
        rank["state_cache"] = {"bytes_per_request": state * bs * rank["kv_cache_bytes_per_token"]
                               - rng.choice([0, 1])}
    rank["prefix_match_unit"] = rng.choice([u for u in (1, 2, 4) if u < bs])
    _fit_outputs(scn["rows"], (rank["num_gpu_blocks"] - state - 1) * bs, False)
    return scn


def _backend_scenario(rng: random.Random, scn: dict[str, Any], kind: str,
                      vllm_rank: Callable[[], dict[str, Any]], blocks: int) -> dict[str, Any]:
    """An SGLang or TensorRT-LLM deployment (aggregated or P/D, 1-2 workers, DP 1-2) on a
    Mooncake trace (sessions, sometimes mooncake-delta); one worker of an aggregated SGLang
    deployment is now and then placed by the KV router with its queue (its events feed the
    queue's cached-prefix order)."""
    backend = "trtllm" if kind.startswith("trtllm") else "sglang"
    bs = scn["block_size"]
    pages: list[int] = []  # one page size: P/D needs the same on both sides

    def rank() -> dict[str, Any]:
        out = vllm_rank()
        out["backend"] = backend
        out["enable_prefix_caching"] = rng.random() < 0.9
        if backend == "sglang":
            if not pages:
                pages.append(rng.choice([1, 2, 4, 4, 4]))
            page = pages[0]
            out.update(block_size=page, num_gpu_blocks=blocks * bs // page,
                       enable_chunked_prefill=True,
                       prefill_decode_interval=rng.choice([0, 0, 0, 1, 2, 3]))
            out["sglang"] = {
                "schedule_policy": rng.choice(["fifo", "lpm"]),
                "chunked_prefill_size": page * rng.choice([1, 2, 3, 4, 8, 16]),
                "max_prefill_tokens": rng.choice([8, 16, 32, 16384, 16384]),
                "clip_max_new_tokens": rng.choice([1, 2, 4, 4096]),
                "schedule_conservativeness": rng.choice([0.05, 0.3, 1.0, 1.0, 1.5])}
        elif rng.random() < 0.5:
            out["trtllm"] = {"capacity_scheduler_policy": "guaranteed_no_evict"}
        if rng.random() < 0.15:
            out["max_model_len"] = rng.choice([8, 12, 16, 20])
        if rng.random() < 0.15:
            out["timing_model"] = {"type": "polynomial"}
        return out

    delta = rng.random() < 0.3
    scn["trace_format"] = "mooncake-delta" if delta else "mooncake"
    if kind in ("sglang-pd", "trtllm-pd-telemetry") or (kind == "trtllm" and rng.random() < 0.3):
        scn["prefill"] = rank()
        scn["decode"] = rank()
        scn["prefill_workers"] = rng.choice([1, 1, 2])
        scn["decode_workers"] = rng.choice([1, 1, 2])
        scn["dp"] = rng.choice([1, 1, 2])
        for role in ("prefill", "decode"):
            scn[role].update({"kv_transfer_bytes_per_token": 250000,
                              "kv_transfer_bandwidth": rng.choice([0.5, 1.0, 4.0])})
    else:
        scn["rank"] = rank()
        scn["workers"] = rng.choice([1, 1, 2, 3])
        scn["dp"] = rng.choice([1, 1, 1, 2])
        if backend == "sglang" and rng.random() < 0.2:
            scn["workers"] = scn["dp"] = 1
            scn["router"] = {"queue_threshold": rng.choice([None, 0.0, 0.5, 1.0]),
                             "queue_policy": rng.choice(["fcfs", "lcfs", "wspt"])}
    if rng.random() < 0.1:
        scn["max_sim_time_ms"] = float(rng.choice([20, 50, 120]))
    scn["rows"] = _rows(rng, bs, blocks, delta=delta)
    return scn


def _hybrid_scenario(rng: random.Random, scn: dict[str, Any], rank: dict[str, Any],
                     blocks: int) -> dict[str, Any]:
    """A hybrid model's aggregated vLLM workers (1-2, DP 1-2): a per-request state of 1-3
    blocks' bytes (rounded up by the engine, so sometimes a byte past a block), sometimes a
    prefix-match unit dividing the block size, fixed or polynomial timing, tiny pools (a state
    takes a good part of them, so requests wait, are preempted and outgrow the pool), sessions,
    outputs of 1-6 tokens (up to 40 under fixed timing).
    Prefix caching is on in 7 scenarios of 10 (state checkpoints); with it only a match unit of
    the block size is drawn (aligned states; kind match-unit draws smaller ones, so this kind's
    draws stay as they were).
    Sometimes the KV router places the requests; 3 scenarios in 10 are sampled (telemetry)."""
    bs = scn["block_size"]
    block_bytes = bs * rank["kv_cache_bytes_per_token"]
    state_blocks = rng.choice([1, 1, 1, 2, 2, 3])
    if state_blocks + 1 > blocks:
        state_blocks = 1
    rank["state_cache"] = {"bytes_per_request": state_blocks * block_bytes - rng.choice(
        [0, 0, 1, block_bytes // 2, block_bytes - 1])}
    rank["enable_prefix_caching"] = rng.random() < 0.7
    unit = rng.choice([None, None, 1, 2, bs])
    if unit is not None and (not rank["enable_prefix_caching"] or unit == bs):
        rank["prefix_match_unit"] = unit
    kv_groups_kind.deployment(rng, scn, rank)
    # Long outputs under fixed timing only: polynomial passes of a long run sum to a float
    # clock that drifts past 10 ns from kvreplay's whole nanoseconds (docs/engine.md).
    polynomial = rank.get("timing_model", {}).get("type") == "polynomial"
    scn["rows"] = _rows(rng, bs, blocks, delta=False, outputs=[1, 1, 2, 3, 4, 6] if polynomial
                        else [1, 1, 2, 3, 4, 6, 8, 12, 20, 32, 40])
    # Now and then the KV router with its queue over one scheduler (the reference breaks
    # placement ties at random; its events carry token blocks only). It drops an aligned
    # state's match unit (the reference refuses a unit with KV events: HYBRID-MATCH-UNIT), so
    # the draws stay those of the kind before aligned states (kind hybrid-mtp's included).
    if ("prefix_match_unit" not in rank or rank["enable_prefix_caching"]) and rng.random() < 0.2:
        rank.pop("prefix_match_unit", None)
        scn["workers"] = scn["dp"] = 1
        scn["router"] = {"queue_threshold": rng.choice([None, 0.0, 0.5, 1.0]),
                         "queue_policy": rng.choice(["fcfs", "lcfs", "wspt"])}
    # Telemetry samples on 3 scenarios in 10, from a stream of its own (the other draws
    # unchanged).
    sampled = random.Random(f"hybrid-telemetry:{scn['seed']}")
    if sampled.random() < 0.3:
        scn["telemetry_ms"] = sampled.choice([0.5, 1.0, 2.0, 2.5, 3.0, 5.0, 10.0])
    return scn


def _fit_outputs(rows: list[dict[str, Any]], budget: int, delta: bool) -> None:
    """Cut outputs so that every request's whole sequence fits in `budget` tokens (a delta
    turn's prompt holds its session's earlier turns): one that outgrows the pool alone preempts
    itself forever, in both engines alike and without time passing, so no cap ends it (a burst
    reserves at most the blocks of the tokens left, so MTP needs nothing more)."""
    before: dict[str, int] = {}
    for row in rows:
        total = (before.get(row["session_id"], 0) if delta else 0) + row["input_length"]
        row["output_length"] = max(1, min(row["output_length"], budget - total))
        before[row["session_id"]] = total + row["output_length"]


def _speculate(rng: random.Random, scn: dict[str, Any]) -> None:
    """MTP on the aggregated rank, or on the decode rank, the prefill rank or both (P/D): nextn
    1-3, random conditional rates (0 and 1 now and then, sometimes fewer than nextn or none),
    a random seed, a backend, fixed or polynomial timing, sometimes max_model_len."""
    roles = ["rank"] if "rank" in scn else rng.choice(
        [["decode"], ["decode"], ["prefill", "decode"], ["prefill"]])
    backend = rng.choice(MTP_BACKENDS if "rank" in scn else MTP_PD_BACKENDS)
    for role in ("rank", "prefill", "decode"):
        if role not in scn:
            continue
        rank = scn[role]
        _mtp_backend(rng, rank, backend)
        if rng.random() < 0.3:
            rank["timing_model"] = {"type": "polynomial"}
        if rng.random() < 0.15:
            rank["max_model_len"] = rng.choice([12, 16, 20, 24])
        if role in roles:
            _draft(rng, rank)


def _draft(rng: random.Random, rank: dict[str, Any]) -> None:
    """MTP on the rank: nextn 1-3, a random seed, random conditional rates (0 and 1 now and
    then, sometimes fewer than nextn or none)."""
    nextn = rng.choice([1, 2, 2, 3])
    rank["aic_nextn"] = nextn
    rank["aic_mtp_seed"] = rng.randrange(2**64) if rng.random() < 0.2 else rng.randrange(100)
    if rng.random() < 0.9:
        rates = [rng.choice([0.0, 1.0, round(rng.random(), 3)]) if rng.random() < 0.2
                 else round(rng.random(), 3) for _ in range(rng.randint(1, nextn + 1))]
        rank["aic_nextn_accept_rates"] = ",".join(str(r) for r in rates)


def _mtp_backend(rng: random.Random, rank: dict[str, Any], backend: str) -> None:
    """The rank on `backend`: SGLang with chunked prefill (the reference requires it) and now
    and then its policy and budgets; TensorRT-LLM now and then guaranteed_no_evict."""
    rank["backend"] = backend
    if backend != "vllm":  # the reference refuses it off vLLM (SGLang has its own interval)
        rank.pop("prefill_schedule_interval", None)
    if backend == "sglang":
        rank["enable_chunked_prefill"] = True
        if rng.random() < 0.5:
            rank["sglang"] = {
                "schedule_policy": rng.choice(["fifo", "lpm"]),
                "chunked_prefill_size": rank["block_size"] * rng.choice([2, 4, 8, 16]),
                "clip_max_new_tokens": rng.choice([1, 2, 4, 4096]),
                "schedule_conservativeness": rng.choice([0.3, 1.0, 1.5])}
    elif backend == "trtllm" and rng.random() < 0.5:
        rank["trtllm"] = {"capacity_scheduler_policy": "guaranteed_no_evict"}


def _scaling_scenario(rng: random.Random, scn: dict[str, Any], rank: Callable[[], dict[str, Any]],
                      blocks: int) -> dict[str, Any]:
    """Round robin, aggregated or P/D, DP 1-2, under a random schedule of targets
    (scaling_kind.py); from streams of their own, G2/G3, an agentic corpus, or a hybrid
    model's state cache on 1 aggregated vLLM G1 seed in 5."""
    disaggregated = rng.random() < 0.5
    scn["dp"] = rng.choice([1, 1, 2])
    if disaggregated:
        scn["prefill"], scn["decode"] = rank(), rank()
        scn["prefill_workers"] = rng.choice([1, 1, 2])
        scn["decode_workers"] = rng.choice([1, 1, 2])
        for role in ("prefill", "decode"):
            scn[role].update({"kv_transfer_bytes_per_token": 250000,
                              "kv_transfer_bandwidth": rng.choice([0.5, 1.0, 4.0])})
    else:
        scn["rank"] = rank()
        scn["workers"] = rng.choice([1, 1, 2])
    scn["scaling"] = scaling_kind.plan(rng, disaggregated)
    scn["rows"] = _rows(rng, scn["block_size"], blocks, delta=False)
    # Drawn from their own stream, so a seed without them is the scenario it was before.
    scaling_kind.combine(random.Random(f"scaling-combine:{scn['seed']}"), scn)
    agentic = random.Random(f"scaling-agentic:{scn['seed']}")
    if "rank" in scn and scn["dp"] == 1 and scn["rank"]["backend"] == "vllm" \
            and agentic.random() < 0.15:
        # An Agentic Mooncake v2 corpus instead of the session rows (lanes sometimes).
        scn.update(trace_format="agentic_mooncake",
                   agentic_lanes=agentic.choice([None, 1, 2]), header=_agentic_header(scn),
                   rows=_agentic_rows(agentic, scn["block_size"], blocks))
    hybrid = random.Random(f"scaling-hybrid:{scn['seed']}")
    rank_ = scn.get("rank")
    if rank_ is not None and "header" not in scn and rank_["backend"] == "vllm" \
            and "native_host_offload" not in rank_ and hybrid.random() < 0.2:
        # A hybrid model's state cache (aggregated, G1 only: the HYBRID-* rules), requests it
        # rejects included, and now and then max_model_len rejections.
        block_bytes = scn["block_size"] * rank_["kv_cache_bytes_per_token"]
        state = 1 if rank_["num_gpu_blocks"] < 4 else hybrid.choice([1, 1, 2])
        rank_["state_cache"] = {"bytes_per_request": state * block_bytes - hybrid.choice([0, 1])}
        rank_["enable_prefix_caching"] = hybrid.random() < 0.7
        if hybrid.random() < 0.2:
            rank_["max_model_len"] = hybrid.choice([8, 12, 16])
    return scn


def _g3_deployment(rng: random.Random, scn: dict[str, Any]) -> None:
    """G3 under G2 on an aggregated deployment (attention DP 1, as the reference requires):
    a worker-local or shared G3 pool and a private or shared G2 pool, tiny capacities at every
    tier, bandwidths with 0 (unlimited) among them, first-byte latencies; `g3-kv` behind the KV
    router (one worker) with its host and disk weights."""
    kv = scn["kind"] in ("g3-kv", "g3-kv-workers")
    # g3-kv: one scheduler, as kv-queue (the reference breaks placement ties at random);
    # g3-kv-workers: 2-3, compared against the reference's spread (SPREAD_KINDS).
    if scn["kind"] == "g3-kv-workers":
        scn["workers"] = rng.choice([2, 3])
    else:
        scn["workers"] = 1 if kv else rng.choice([1, 1, 2, 3])
    if rng.random() < 0.2:
        scn["trace_format"] = "mooncake-delta"
    g2, g3 = _g3_tiers(rng)
    scn["rank"]["native_host_offload"] = g2
    scn["rank"]["g3_offload"] = g3
    if rng.random() < 0.2:
        scn["rank"]["timing_model"] = {"type": "polynomial"}
    if kv:
        scn["router"] = {"host_cache_hit_weight": rng.choice([0.0, 0.5, 1.0]),
                         "disk_cache_hit_weight": rng.choice([0.0, 0.5, 1.0])}


def _g3_tiers(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    """A private or shared G2 pool and a worker-local or shared G3 pool below it: tiny
    capacities, bandwidths with 0 (unlimited) among them, first-byte latencies."""
    bw = [0.0, 0.25, 0.5, 1.0, 1.0, 4.0]
    g2: dict[str, Any] = {"scope": rng.choice(["dp_rank_local", "dp_rank_local",
                                               "cluster_shared"]),
                          "num_host_blocks": rng.choice([1, 2, 2, 3, 4, 6, 8]),
                          "d2h_bandwidth_gbps": rng.choice(bw),
                          "h2d_bandwidth_gbps": rng.choice(bw),
                          "latency_to_first_byte_ms": rng.choice([0.0, 0.0, 0.5])}
    if g2["scope"] == "cluster_shared":
        g2["kv_layout_id"] = "diff"
    g3: dict[str, Any] = {"scope": rng.choice(["worker_local", "cluster_shared"]),
                          "num_g3_blocks": rng.choice([1, 2, 3, 4, 6, 8, 16, 64]),
                          "latency_to_first_byte_ms": rng.choice([0.0, 0.1, 0.25, 1.0]),
                          "read_bandwidth_gbps": rng.choice(bw),
                          "write_bandwidth_gbps": rng.choice(bw)}
    if g3["scope"] == "cluster_shared":
        g3["shared_read_bandwidth_gbps"] = rng.choice([0.0, 0.5, 1.0, 2.0, 80.0])
        g3["shared_write_bandwidth_gbps"] = rng.choice([0.0, 0.5, 1.0, 2.0, 80.0])
    return g2, g3


def _g3_agentic_scenario(rng: random.Random, scn: dict[str, Any], rank: dict[str, Any],
                         blocks: int) -> dict[str, Any]:
    """An agentic corpus (as the `agentic` kind draws it) on G2 with G3 below (as `g3`
    draws them), round robin over 1-2 workers."""
    _agentic_scenario(rng, scn, rank, blocks)
    rank["native_host_offload"], rank["g3_offload"] = _g3_tiers(rng)
    return scn


def _agentic_shared_g2_scenario(rng: random.Random, scn: dict[str, Any],
                                rank: dict[str, Any], blocks: int) -> dict[str, Any]:
    """An agentic corpus (as the `agentic` kind draws it) on a cluster-shared G2 pool, no
    G3: 1-3 workers round robin, tiny pools, bandwidths with 0 (unlimited) among them, first
    bytes, sometimes whole-pool caps (the `agentic` kind draws private G2 only)."""
    _agentic_scenario(rng, scn, rank, blocks)
    scn["workers"] = rng.choice([1, 2, 2, 3])
    bw = [0.0, 0.25, 0.5, 1.0, 1.0, 4.0]
    g2: dict[str, Any] = {"scope": "cluster_shared", "kv_layout_id": "diff",
                          "num_host_blocks": rng.choice([1, 2, 3, 4, 6, 8, 12]),
                          "d2h_bandwidth_gbps": rng.choice(bw),
                          "h2d_bandwidth_gbps": rng.choice(bw),
                          "latency_to_first_byte_ms": rng.choice([0.0, 0.0, 0.5])}
    if rng.random() < 0.3:
        g2["shared_d2h_bandwidth_gbps"] = rng.choice([0.5, 1.0, 2.0])
        g2["shared_h2d_bandwidth_gbps"] = rng.choice([0.5, 1.0, 2.0])
    rank["native_host_offload"] = g2
    return scn


def _synthetic(rng: random.Random, bs: int, blocks: int) -> dict[str, Any]:
    """Synthetic sessions of 1-4 turns (the Dynamo API's `run_synthetic_trace_replay`): a closed
    loop or open-loop session starts, optional prefix families, optional inter-turn delays."""
    ratio = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0])
    load = rng.choice([{"replay_concurrency": rng.choice([1, 2, 3])},
                       {"request_rate": rng.choice([100.0, 300.0, 1000.0]),
                        "arrival_seed": rng.randrange(100)},
                       {"arrival_interval_ms": rng.choice([0.5, 2.0, 5.0])}])
    syn = {"input_tokens": rng.randint(1, max(1, blocks - 2) * bs),
           "output_tokens": rng.choice([1, 2, 3, 5]),
           "request_count": rng.choice([2, 4, 6, 8]),
           "shared_prefix_ratio": ratio,
           "num_prefix_groups": rng.choice([1, 2, 3]) if ratio else 0,
           "load": load}
    # Drawn last, so the single-turn fields of a seed are those drawn before sessions existed.
    turns = rng.choice([1, 1, 2, 3, 4])
    if turns > 1:
        syn["turns"] = turns
        syn["inter_turn_delay_ms"] = rng.choice([0.0, 0.0, 0.5, 2.0, 10.0])
    return syn


def synthetic_traffic(syn: dict[str, Any]) -> dict[str, Any]:
    """kvreplay's native traffic section for a `synth` scenario (`synthetic-session` when a
    session has several turns; the reference's request_count counts sessions)."""
    load = syn["load"]
    section: dict[str, Any] = {
        "source_type": "synthetic", "input_tokens": syn["input_tokens"],
        "output_tokens": syn["output_tokens"], "cached_prefix_tokens": 0,
        "shared_prefix_ratio": syn["shared_prefix_ratio"],
        "num_prefix_groups": syn["num_prefix_groups"], "stop_requests": syn["request_count"]}
    if syn.get("turns", 1) > 1:
        del section["cached_prefix_tokens"], section["stop_requests"]
        section.update(source_type="synthetic-session", turns_per_session=syn["turns"],
                       inter_turn_delay_ms=syn["inter_turn_delay_ms"],
                       stop_sessions=syn["request_count"])
    if "replay_concurrency" in load:
        section.update(load_type="concurrency", concurrency=load["replay_concurrency"])
    elif "request_rate" in load:
        section.update(load_type="poisson", request_rate=load["request_rate"],
                       arrival_seed=load["arrival_seed"])
    else:
        section.update(load_type="constant_rate",
                       request_rate=1000.0 / load["arrival_interval_ms"])
    return section


def _rows(rng: random.Random, bs: int, blocks: int, delta: bool,
          outputs: Sequence[int] = (1, 1, 2, 3, 4)) -> list[dict[str, Any]]:
    """Sessions of 1-3 turns whose prompts share and extend prefixes."""
    prefixes = [[rng.randrange(1, 500) for _ in range(8)] for _ in range(rng.choice([1, 2, 3]))]
    rows: list[dict[str, Any]] = []
    t = 0
    max_blocks = max(1, min(5, blocks - 2))
    for s in range(rng.choice([2, 3, 4, 6])):
        t += rng.choice([0, 0, 1, 2, 5, 10, 30])
        prefix = rng.choice(prefixes)
        turns = rng.choice([1, 1, 2, 3])
        used = 0
        for k in range(turns):
            n = rng.randint(1, max_blocks)
            if delta:
                hashes = [rng.randrange(1000, 5000) for _ in range(max(1, n // 2))]
            else:
                used = min(max_blocks, max(used, n))
                hashes = prefix[:used]
            length = len(hashes) * bs - rng.randrange(bs)
            out = rng.choice(outputs)
            row: dict[str, Any] = {"session_id": f"s{s}", "hash_ids": hashes,
                                   "input_length": length, "output_length": out}
            if k == 0:
                row["timestamp"] = t
            else:
                row["delay"] = rng.choice([0, 1, 3, 10])
            rows.append(row)
    if delta:
        # a delta prompt grows by every earlier turn of its session: keep it in the pool
        budget = (blocks - 1) * bs
        for s in {r["session_id"] for r in rows}:
            total = 0
            for row in [r for r in rows if r["session_id"] == s]:
                total += row["input_length"] + row["output_length"]
                while total > budget and row["input_length"] > 1:
                    row["input_length"] -= 1
                    total -= 1
                    row["hash_ids"] = row["hash_ids"][:-(-row["input_length"] // bs)]
    return rows


AGENTIC_MODEL = "diff"  # the deployment's model; trace rows name another (projected onto it)


def _agentic_scenario(rng: random.Random, scn: dict[str, Any], rank: dict[str, Any],
                      blocks: int) -> dict[str, Any]:
    """An Agentic Mooncake v2 corpus on a small aggregated round-robin deployment: 1-2
    workers, optional lanes, optional private G2, sometimes a time cap."""
    scn.update(trace_format="agentic_mooncake", rank=rank, workers=rng.choice([1, 1, 2]), dp=1,
               agentic_lanes=rng.choice([None, 1, 1, 2]))
    if rng.random() < 0.3:
        rank["native_host_offload"] = {
            "scope": "dp_rank_local", "num_host_blocks": rng.choice([2, 4, 8, 12]),
            "d2h_bandwidth_gbps": rng.choice([0.1, 0.5, 1.0, 4.0]),
            "h2d_bandwidth_gbps": rng.choice([0.1, 0.5, 1.0, 4.0])}
    scn["header"] = _agentic_header(scn)
    scn["rows"] = _agentic_rows(rng, scn["block_size"], blocks)
    if rng.random() < 0.1:
        scn["max_sim_time_ms"] = float(rng.choice([10, 20, 50]))
    return scn


def _agentic_header(scn: dict[str, Any]) -> dict[str, Any]:
    return {"schema": "dynamo.agentic_mooncake", "version": 2, "block_size": scn["block_size"],
            "hash_id_scope": "local",
            "source": {"format": "difftest", "digest": f"agentic-{scn['seed']}"}}


def _agentic_rows(rng: random.Random, bs: int, blocks: int) -> list[dict[str, Any]]:
    """Plays of a root session (1-4 requests in sequence) whose requests spawn child sessions
    (on dispatch or completion) that a later request of the spawning session joins, or that run
    in the background; children may spawn grandchildren the same way, and a play may have a
    second, parallel root session. Request ids are drawn at random (node order, hence uuid and
    same-instant dispatch order, is request-id order); hash ids are play-local and shared along
    the play (the same numbers in another play are other blocks)."""
    max_blocks = max(1, min(5, blocks - 2))
    taken: set[int] = set()

    def new_id() -> str:
        while True:
            n = rng.randrange(100, 1000)
            if n not in taken:
                taken.add(n)
                return f"r{n}"

    def delay() -> float:
        return float(rng.choice([0, 0, 0.5, 1, 2, 3, 5, 10]))

    def floor() -> float:
        return float(rng.choice([0, 0, 0, 0, 2, 5, 10, 20]))

    def edge(pred: str, trigger: str, relation: str) -> dict[str, Any]:
        return {"request_id": pred, "trigger": trigger, "delay_ms": delay(),
                "relation": relation}

    def session(play: str, name: str, turns: int, prefix: list[int],
                first_deps: list[dict[str, Any]], first_floor: float,
                depth: int) -> list[dict[str, Any]]:
        """One conversation of `turns` requests in sequence, each prompt extending the shared
        prefix; turns may spawn child sessions (depth < 2) that a later turn joins."""
        out: list[dict[str, Any]] = []
        joins: list[list[str]] = [[] for _ in range(turns)]
        used = 0
        last = ""
        for i in range(turns):
            used = min(len(prefix), max(used, rng.randint(1, len(prefix))))
            deps = first_deps if i == 0 else (
                [edge(last, "completion", "sequence")]
                + [edge(c, "completion", "join") for c in joins[i]])
            hashes = prefix[:used]
            if rng.random() < 0.02:  # more blocks than the pool holds: rejected, play fails
                hashes = hashes + [rng.randrange(900, 999)
                                   for _ in range(blocks + 1 - len(hashes))]
            row = {"request_id": new_id(), "play_id": play, "session_id": name,
                   "model": "agent-model", "input_length": len(hashes) * bs - rng.randrange(bs),
                   "output_length": rng.choice([1, 1, 2, 3, 4] if rng.random() < 0.97 else [0]),
                   "hash_ids": hashes, "not_before_ms": first_floor if i == 0 else floor(),
                   "dependencies": deps}
            out.append(row)
            last = row["request_id"]
            if depth < 2 and rng.random() < (0.45 if depth == 0 else 0.2):
                for j in range(rng.choice([1, 1, 2])):
                    own = prefix[:rng.randint(0, used)] + [rng.randrange(60, 120)
                                                           for _ in range(2)]
                    spawn = edge(last, rng.choice(["dispatch", "completion"]), "spawn")
                    child = session(play, f"{name}.{i}{j}", rng.choice([1, 1, 2]),
                                    own[:max_blocks + 1], [spawn], floor(), depth + 1)
                    out += child
                    if i + 1 < turns and rng.random() < 0.6:
                        joins[rng.randrange(i + 1, turns)].append(child[-1]["request_id"])
        return out

    rows: list[dict[str, Any]] = []
    for p in range(rng.choice([1, 1, 2, 3])):
        play = f"p{p}"
        prefix = [rng.randrange(1, 60) for _ in range(max_blocks)]
        rows += session(play, "root", rng.choice([1, 2, 2, 3, 4]), prefix, [],
                        float(rng.choice([0, 0, 1, 3, 5, 10])), 0)
        if rng.random() < 0.15:  # a parallel root session
            rows += session(play, "side", rng.choice([1, 2]), prefix, [],
                            float(rng.choice([0, 2, 5])), 1)
    return rows


def role_dp(scn: dict[str, Any], worker_type: str) -> int:
    """A role's attention DP: its own (`prefill_dp`, `decode_dp`) or the scenario's."""
    return int(scn.get(f"{worker_type}_dp", scn["dp"]))


def trace_files(scn: dict[str, Any], folder: Path) -> list[str]:
    """The scenario's trace written to `folder`: one file, or a Dynamo trace's several."""
    if "files" not in scn:
        write_trace(scn, folder / "trace.jsonl")
        return [str(folder / "trace.jsonl")]
    paths = [folder / f"trace-{k}.jsonl" for k in range(scn["files"])]
    for k, path in enumerate(paths):
        path.write_text("".join(json.dumps(row) + "\n" for row, at in
                                zip(scn["rows"], scn["file_of"], strict=True) if at == k))
    return [str(p) for p in paths]


def write_trace(scn: dict[str, Any], path: Path) -> None:
    with path.open("w") as f:
        if "header" in scn:
            f.write(json.dumps(scn["header"]) + "\n")
        for row in scn["rows"]:
            f.write(json.dumps(row) + "\n")


def native_document(scn: dict[str, Any], trace: str | list[str]) -> dict[str, Any]:
    """The kvreplay native document of a scenario."""
    def role(rank: dict[str, Any], worker_type: str) -> dict[str, Any]:
        out = {"dp_size": role_dp(scn, worker_type), "tensor_parallel_size": scn.get("tp", 1),
               "speculation": None,
               "rank": {**rank, "worker_type": worker_type}}
        if "scaling" in scn:
            out["startup_seconds"] = scaling_kind.startup_seconds(scn, worker_type)
        return out

    traffic: dict[str, Any] = {
        "source_type": "trace", "trace_format": scn["trace_format"],
        "trace_paths": [trace] if isinstance(trace, str) else trace,
        "load_type": "trace_timestamps", "trace_block_size": scn["block_size"]}
    traffic.update(scn.get("traffic", {}))
    if "synthetic" in scn:
        traffic = synthetic_traffic(scn["synthetic"])
    if "header" in scn:
        traffic["agentic_lanes"] = scn.get("agentic_lanes")
    if "speedup" in scn:
        traffic["speedup"] = scn["speedup"]
    placement: dict[str, Any] = {"provider": "round_robin", "config": None}
    if "router" in scn:
        placement = {"provider": scn.get("router_mode", "kv_router"),
                     "config": dict(scn["router"])}
    if "rank" in scn:
        topology: dict[str, Any] = {"kind": "aggregated",
                                    "workers": {"initial_workers": scn["workers"]}}
        engine = role(scn["rank"], "aggregated")
    else:
        topology = {"kind": "disaggregated",
                    "prefill": {"initial_workers": scn["prefill_workers"]},
                    "decode": {"initial_workers": scn["decode_workers"]},
                    "handoff_latency_ms": 0.0}
        engine = {"prefill": role(scn["prefill"], "prefill"),
                  "decode": role(scn["decode"], "decode")}
    return {
        "spec": {"version": 1, "model": AGENTIC_MODEL, "topology": topology, "engine": engine,
                 "adapters": {"placement": placement,
                              "scaling": {"provider": "none", "config": None}},
                 "max_sim_time_ms": scn.get("max_sim_time_ms"), "record_per_request": True,
                 "sla": None,
                 **({"telemetry": {"sample_interval_ms": scn["telemetry_ms"]}}
                    if "telemetry_ms" in scn else {})},
        "traffic": traffic}


# -- running --------------------------------------------------------------------------------------

def run_reference(scn: dict[str, Any]) -> dict[str, Any]:
    """The reference's {"summary", "per_request"} (raises what the reference raises)."""
    os.environ.setdefault("DYN_LOG", "error")
    from dynamo.replay import run_synthetic_trace_replay, run_trace_replay

    if "scaling" in scn:
        return _run_reference_scaling(scn)

    if "synthetic" in scn:
        syn = scn["synthetic"]
        report = run_synthetic_trace_replay(
            syn["input_tokens"], syn["output_tokens"], syn["request_count"],
            extra_engine_args={"engine": scn["rank"], "dp_size": scn["dp"]},
            num_workers=scn["workers"], router_mode="round_robin", capture_per_request=True,
            turns_per_session=syn.get("turns", 1),
            inter_turn_delay_ms=syn.get("inter_turn_delay_ms", 0.0),
            shared_prefix_ratio=syn["shared_prefix_ratio"],
            num_prefix_groups=syn["num_prefix_groups"], **syn["load"])
        rows = list(report.per_request)
        if syn.get("turns", 1) == 1:
            # Deliberate: the Dynamo API names each single-turn synthetic request a session
            # ("session_N", turn 0); kvreplay reports no session for `synthetic` traffic.
            rows = [{**r, "session_id": None, "turn_index": None} for r in rows]
        return {"summary": dict(report.summary), "per_request": rows}
    with tempfile.TemporaryDirectory() as tmp:
        paths = trace_files(scn, Path(tmp))
        kwargs: dict[str, Any] = {"trace_format": scn["trace_format"],
                                  "trace_block_size": scn["block_size"],
                                  "router_mode": "round_robin", "capture_per_request": True}
        kwargs.update(scn.get("replay", {}))
        if "router" in scn:
            from dynamo._core import KvRouterConfig

            knobs = scn["router"]
            kwargs["router_mode"] = scn.get("router_mode", "kv_router")
            weights = {k: knobs[k] for k in ("overlap_score_credit", "prefill_load_scale",
                                             "host_cache_hit_weight", "disk_cache_hit_weight")
                       if k in knobs}
            kwargs["router_config"] = KvRouterConfig(
                router_queue_threshold=knobs.get("queue_threshold"),
                router_queue_policy=knobs.get("queue_policy", "fcfs"),
                overlap_score_credit_decay=knobs.get("overlap_score_credit_decay", 0.0),
                decode_active_request_weight=knobs.get("decode_active_request_weight", 0.0),
                **weights)
            if "kv_event_lag_ms" in knobs:
                kwargs["kv_event_lag_ms"] = knobs["kv_event_lag_ms"]
        if "speedup" in scn:
            kwargs["arrival_speedup_ratio"] = scn["speedup"]
        if scn.get("max_sim_time_ms") is not None:
            kwargs["max_sim_time_ms"] = scn["max_sim_time_ms"]
        if "header" in scn:
            kwargs.update(agentic_lanes=scn.get("agentic_lanes"), execution_model=AGENTIC_MODEL)
        if "telemetry_ms" in scn:
            from dynamo.replay import TelemetryOptions

            kwargs["telemetry_options"] = TelemetryOptions(sample_interval_ms=scn["telemetry_ms"])
        dp = scn["dp"]
        if "rank" in scn:
            report = run_trace_replay(paths,
                                      extra_engine_args={"engine": scn["rank"], "dp_size": dp,
                                                         "tensor_parallel_size": scn.get("tp", 1)},
                                      num_workers=scn["workers"], **kwargs)
        else:
            prefill = {"engine": {**scn["prefill"], "worker_type": "prefill"},
                       "dp_size": role_dp(scn, "prefill")}
            decode = {"engine": {**scn["decode"], "worker_type": "decode"},
                      "dp_size": role_dp(scn, "decode")}
            report = run_trace_replay(paths, prefill_engine_args=prefill,
                                      decode_engine_args=decode,
                                      num_prefill_workers=scn["prefill_workers"],
                                      num_decode_workers=scn["decode_workers"], **kwargs)
    out = {"summary": dict(report.summary), "per_request": list(report.per_request)}
    if report.telemetry is not None:
        out["telemetry"] = {"sample_interval_ms": report.telemetry.sample_interval_ms,
                            "samples": list(report.telemetry.samples)}
    return out


def _run_reference_scaling(scn: dict[str, Any]) -> dict[str, Any]:
    """The reference under the scenario's Recorder (its lower-level entry point: the public
    wrapper takes no policy object)."""
    from dynamo._core import run_mocker_trace_replay

    policy = scaling_kind.Recorder(scn["scaling"])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.jsonl"
        write_trace(scn, path)
        kwargs: dict[str, Any] = {"trace_format": scn["trace_format"],
                                  "trace_block_size": scn["block_size"],
                                  "router_mode": "round_robin", "capture_per_request": True,
                                  "scaling_policy": policy}
        if "telemetry_ms" in scn:
            kwargs.update(capture_telemetry=True, telemetry_sample_interval_ms=scn["telemetry_ms"])
        if "router" in scn:  # the KV router with its default settings
            kwargs["router_mode"] = "kv_router"
        if "header" in scn:  # an agentic corpus
            kwargs.update(agentic_lanes=scn.get("agentic_lanes"), execution_model=AGENTIC_MODEL)
        if scn.get("max_sim_time_ms") is not None:
            kwargs["max_sim_time_ms"] = scn["max_sim_time_ms"]
        dp = scn["dp"]
        if "rank" in scn:
            args = {"engine": scn["rank"], "dp_size": dp,
                    **scaling_kind.startup_args(scn, "aggregated")}
            result = run_mocker_trace_replay([str(path)], extra_engine_args=args,
                                             num_workers=scn["workers"], **kwargs)
        else:
            roles = {role: {"engine": {**scn[role], "worker_type": role}, "dp_size": dp,
                            **scaling_kind.startup_args(scn, role)}
                     for role in ("prefill", "decode")}
            result = run_mocker_trace_replay(
                [str(path)], prefill_engine_args=roles["prefill"],
                decode_engine_args=roles["decode"], num_prefill_workers=scn["prefill_workers"],
                num_decode_workers=scn["decode_workers"], **kwargs)
    summary = dict(result.summary)
    if "header" in scn:  # what the reference's Python wrapper adds to the core's summary
        from dynamo.replay.api import _add_agentic_model_projection

        _add_agentic_model_projection(summary, AGENTIC_MODEL)
    out = {"summary": summary, "per_request": list(result.per_request),
           "snapshots": policy.snapshots,
           "lifecycle_operations": list(result.lifecycle_operations)}
    if result.telemetry is not None:
        out["telemetry"] = {"sample_interval_ms": result.telemetry["sample_interval_ms"],
                            "samples": list(result.telemetry["samples"])}
    return out


def run_kvreplay(scn: dict[str, Any]) -> dict[str, Any]:
    """kvreplay's report of the scenario, through the same reader path as `kvreplay run`."""
    from kvreplay.engine import run_native
    from kvreplay.engine.report import report_from_run
    from kvreplay.engine.traces import workload_from_traffic

    with tempfile.TemporaryDirectory() as tmp:
        paths = trace_files(scn, Path(tmp))
        doc = native_document(scn, paths)
        workload = workload_from_traffic(doc["traffic"], base_dir=tmp,
                                         block_size=scn["block_size"], model=AGENTIC_MODEL)
        if "scaling" not in scn:
            return report_from_run(run_native(doc, workload=workload))
        policy = scaling_kind.Recorder(scn["scaling"])
        report = report_from_run(run_native(doc, workload=workload, scaling_policy=policy))
        report["snapshots"] = policy.snapshots
        report["lifecycle_operations"] = report["summary"]["scaling"]["lifecycle_operations"]
        return report


# -- comparing ------------------------------------------------------------------------------------

def _keyed(rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Rows by (session, turn); rows without a session (every session single-turn) by
    (arrival, lengths, occurrence)."""
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    seen: dict[tuple[Any, ...], int] = {}
    # Rows alike in arrival and lengths are interchangeable: pair them in the order of their
    # outcome (the reference lists rows in random-uuid order).
    inf = float("inf")
    ordered = sorted(rows, key=lambda r: (r["arrival_time_ms"], r["input_length"],
                                          r["requested_output_length"],
                                          r.get("first_admit_ms") or inf,
                                          r.get("terminal_time_ms") or inf,
                                          str(_placements(r)),
                                          r.get("reused_input_tokens") or 0))
    for row in ordered:
        if row.get("play_id") is not None:  # agentic: request ids are unique in the corpus
            out[("agentic", str(row["play_id"]), str(row["request_id"]))] = row
            continue
        if row.get("session_id") is not None:
            out[(str(row["session_id"]), int(row.get("turn_index") or 0))] = row
            continue
        base = ("@", round(row["arrival_time_ms"], 6), row["input_length"],
                row["requested_output_length"])
        seen[base] = seen.get(base, 0) + 1
        out[(*base, seen[base])] = row
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):  # agentic summaries: nested figures
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= TOLERANCE_MS
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        return abs(a - b) <= TOLERANCE_MS
    return bool(a == b)


def compare(ref: dict[str, Any], mine: dict[str, Any]) -> list[str]:
    """Every difference, one line each (empty: the engines agree)."""
    out = []
    theirs = _keyed(ref["per_request"])
    ours = _keyed(mine["per_request"])
    for key in sorted(set(theirs) ^ set(ours)):
        where = "reference" if key in theirs else "kvreplay"
        out.append(f"{key}: only in the {where}")
    for key in sorted(set(theirs) & set(ours)):
        a, b = theirs[key], ours[key]
        agentic = AGENTIC_ROW_KEYS if key[0] == "agentic" else ()
        for name in TIME_KEYS + COUNT_KEYS + agentic:
            x, y = a.get(name), b.get(name)
            if name in ("reused_input_tokens", "decode_reused_input_tokens") \
                    and isinstance(x, int):
                x = min(x, a["input_length"])  # deliberate: capped at the input
            if not _same(x, y):
                out.append(f"{key} {name}: reference {x!r}, kvreplay {y!r}")
        x, y = _placements(a), _placements(b)
        if x != y:
            out.append(f"{key} placement: reference {x!r}, kvreplay {y!r}")
        x, y = _admissions(a), _admissions(b)
        if len(x) != len(y) or not all(_same(u, v) for p, q in zip(x, y, strict=True)
                                       for u, v in zip(p, q, strict=True)):
            out.append(f"{key} admissions: reference {x!r}, kvreplay {y!r}")
        x, y = _queueing(a), _queueing(b)
        if len(x) != len(y) or not all(_same(u, v) for p, q in zip(x, y, strict=True)
                                       for u, v in zip(p, q, strict=True)):
            out.append(f"{key} router queue: reference {x!r}, kvreplay {y!r}")
    agentic_summary = AGENTIC_SUMMARY_KEYS if "agentic_graph" in ref["summary"] else ()
    for name in SUMMARY_KEYS + agentic_summary:
        x, y = ref["summary"].get(name), mine["summary"].get(name)
        if not _same(x, y):
            out.append(f"summary {name}: reference {x!r}, kvreplay {y!r}")
    for name in STAT_KEYS:
        if name not in ref["summary"]:
            continue  # a regression case recorded without the statistics
        x, y = ref["summary"][name], mine["summary"].get(name)
        # Deliberate: a gap on a sketch bin boundary (exactly 1.0 ms here, 1.0000000000000002
        # in the reference's float sums) lands one bin (a factor GAMMA) away.
        if (name.endswith("_itl_ms") and x and y and name[:name.index("_")] in SKETCHED
                and max(x, y) / min(x, y) <= SKETCH_GAMMA * (1 + 1e-12)):
            continue
        if y is None or abs(x - y) > max(TOLERANCE_MS, STAT_TOLERANCE * max(abs(x), abs(y))):
            out.append(f"summary {name}: reference {x!r}, kvreplay {y!r}")
    x, y = _reuse_ratio(ref["per_request"]), mine["summary"].get("prefix_cache_reused_ratio")
    if not _same(x, y):
        out.append(f"summary prefix_cache_reused_ratio: reference (capped) {x!r}, kvreplay {y!r}")
    if "telemetry" in ref:
        out += compare_telemetry({**ref["telemetry"], "g2_domains": ref["summary"].get(
            "g2_domains")}, mine.get("telemetry"))
    if "snapshots" in ref and "snapshots" in mine:
        out.extend(scaling_kind.compare(ref, mine))
    out.extend(_g3_differences(ref["summary"].get("g3_offload"),
                               mine["summary"].get("g3_offload"), unsettled=_unsettled(ref)))
    if out and _unsettled(ref):  # deliberate (see _g3_differences): the end-of-run pools
        out = [line for line in out if not line.startswith("summary g2_domains:")]
    return out


def _unsettled(ref: dict[str, Any]) -> bool:
    """A G3 run that ended (at its time cap) with requests unfinished."""
    summary = ref["summary"]
    return summary.get("g3_offload") is not None and \
        summary.get("completed_requests") != summary.get("num_requests")


# The end-of-run figures of a G3 run that ends with requests unfinished (docs/engine.md, "G3"):
# the reference leaves the copies finishing after its workers' last action pending.
G3_END_KEYS = ("resident_blocks", "pending_blocks", "read", "write")


def _g3_differences(ref: dict[str, Any] | None, mine: dict[str, Any] | None,
                    unsettled: bool = False) -> list[str]:
    """The `g3_offload` blocks, key by key. Deliberate: `transfer_ms` sums one duration per
    copy, each rounded to the nanosecond here (float milliseconds there), so it may differ by
    up to a nanosecond per completed copy; with requests unfinished at the end (`unsettled`),
    the end-of-run figures (G3_END_KEYS) are not compared."""
    if ref is None and mine is None:
        return []
    if ref is None or mine is None:
        return [f"summary g3_offload: reference {ref!r}, kvreplay {mine!r}"]
    out = []
    for name in sorted(set(ref) | set(mine)):
        if unsettled and name in G3_END_KEYS:
            continue
        x, y = ref.get(name), mine.get(name)
        if isinstance(x, dict) and isinstance(y, dict):
            slack = TOLERANCE_MS + 1e-6 * x.get("completed_jobs", 0)
            same = x.keys() == y.keys() and all(
                abs(x[k] - y[k]) <= slack if k == "transfer_ms" else x[k] == y[k] for k in x)
        else:
            same = x == y
        if not same:
            out.append(f"summary g3_offload.{name}: reference {x!r}, kvreplay {y!r}")
    return out


def compare_telemetry(ref: dict[str, Any], mine: dict[str, Any] | None) -> list[str]:
    """Every difference between two runs' telemetry samples (means to a relative 1e-9: the
    reference sums floats in its completion order)."""
    if mine is None:
        return ["telemetry: only in the reference"]
    out = []
    if ref["sample_interval_ms"] != mine["sample_interval_ms"]:
        out.append(f"telemetry interval: reference {ref['sample_interval_ms']!r}, "
                   f"kvreplay {mine['sample_interval_ms']!r}")
    theirs, ours = ref["samples"], mine["samples"]
    # Deliberate (docs/engine.md, "Telemetry"): with a cluster-shared G2 pool the reference
    # applies a copy's completion at a participant's next tick, kvreplay at its instant, so
    # the G1 blocks a shared copy holds can be counted in use in one and released in the other.
    shared = bool(ref.get("g2_domains"))
    for i in range(max(len(theirs), len(ours))):
        if i >= len(theirs) or i >= len(ours):
            which = "kvreplay" if i >= len(theirs) else "reference"
            sample = (ours if i >= len(theirs) else theirs)[i]
            out.append(f"telemetry sample {i} ({sample['kind']} at {sample['sampled_at_ms']}): "
                       f"only in the {which}")
            continue
        for path, x, y in _leaves(theirs[i], ours[i], f"telemetry sample {i}"):
            if shared and path.rsplit(".", 1)[-1] in SHARED_GAUGES:
                continue
            if not _close(x, y):
                out.append(f"{path}: reference {x!r}, kvreplay {y!r}")
    return out


SHARED_GAUGES = ("active_blocks", "inactive_blocks", "active_cache_usage",
                 "physical_cache_usage")


def _leaves(a: Any, b: Any, path: str) -> Iterator[tuple[str, Any, Any]]:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            yield from _leaves(a.get(key), b.get(key), f"{path}.{key}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from _leaves(x, y, f"{path}[{k}]")
    else:
        yield path, a, b


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, int | float) and not isinstance(b, bool):
        return abs(a - b) <= max(TOLERANCE_MS, STAT_TOLERANCE * max(abs(a), abs(b)))
    return _same(a, b)


def _placements(row: dict[str, Any]) -> list[tuple[Any, ...]]:
    """(pool, worker, DP rank) of each routing decision."""
    return [(h.get("pool"), h.get("logical_worker_id"), h.get("dp_rank"))
            for h in row.get("routing_history") or []]


def _admissions(row: dict[str, Any]) -> list[tuple[Any, ...]]:
    """(pool, time, reused tokens capped at the prompt, readmission?) of each admission."""
    cap = row["input_length"]
    return [(h.get("pool"), h.get("at_ms"), min(h.get("reused_input_tokens") or 0, cap),
             h.get("is_readmission")) for h in row.get("admission_history") or []]


def _queueing(row: dict[str, Any]) -> list[tuple[Any, ...]]:
    """(outcome, queue entry, wait) of each routing decision (the KV router's queue)."""
    return [(h.get("outcome"), h.get("queue_entered_at_ms"), h.get("queue_wait_ms"))
            for h in row.get("routing_history") or []]


def _reuse_ratio(rows: list[dict[str, Any]]) -> float:
    """The reference's prefix_cache_reused_ratio from its rows, reuse capped at the input."""
    done = [r for r in rows if r["terminal_status"] == "completed"
            and r.get("first_admit_ms") is not None]
    total = sum(r["input_length"] for r in done)
    reused = sum(max(min(r["reused_input_tokens"], r["input_length"]),
                     min(r.get("decode_reused_input_tokens") or 0, r["input_length"]))
                 for r in done)
    return reused / total if total else 0.0


def reduced(report: dict[str, Any]) -> dict[str, Any]:
    """Only what `compare` reads (to store a reference result beside a regression case)."""
    keys = ("session_id", "turn_index", "routing_history", "admission_history", "request_id",
            "play_id", "uuid", "agentic") + TIME_KEYS + COUNT_KEYS
    summary_keys = SUMMARY_KEYS + (AGENTIC_SUMMARY_KEYS if "agentic_graph" in report["summary"]
                                   else ()) + (("g3_offload",) if "g3_offload" in report["summary"]
                                               else ())
    out = {"summary": {k: report["summary"].get(k) for k in summary_keys},
           "per_request": [{k: r.get(k) for k in keys} for r in report["per_request"]]}
    if "telemetry" in report:  # the samples are compared too
        out["telemetry"] = report["telemetry"]
    if "snapshots" in report:  # under a scaling plan: what the policy saw, and the billing
        out["snapshots"] = report["snapshots"]
        out["lifecycle_operations"] = report["lifecycle_operations"]
        out["summary"].update({k: report["summary"].get(k) for k in (
            "prefill_worker_seconds", "decode_worker_seconds", "gpu_hours")})
    return out


def save_case(path: Path, name: str, why: str, scn: dict[str, Any]) -> None:
    """A regression case: the scenario and the reference's figures for it."""
    case = {"name": name, "why": why, "scenario": scn, "reference": reduced(run_reference(scn))}
    path.write_text(json.dumps(case, indent=1) + "\n")


REFERENCE_TIMEOUT_S = 60.0


def run_reference_guarded(scn: dict[str, Any],
                          timeout_s: float = REFERENCE_TIMEOUT_S) -> dict[str, Any]:
    """run_reference in a forked child, given up on after `timeout_s` (the reference loops
    forever on some stalled SGLang deployments instead of reporting them: docs/engine.md)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read)
        try:
            answer: tuple[str, Any] = ("ok", run_reference(scn))
        except Exception as exc:
            answer = ("error", f"{type(exc).__name__}: {str(exc)[:800]}")
        with os.fdopen(write, "wb") as out:
            pickle.dump(answer, out)
        os._exit(0)
    os.close(write)
    ready, _, _ = select.select([read], [], [], timeout_s)
    if not ready:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(read)
        raise TimeoutError(f"the reference ran for more than {timeout_s:g} s")
    with os.fdopen(read, "rb") as got:
        data = got.read()
    os.waitpid(pid, 0)
    status, value = pickle.loads(data) if data else ("error", "the reference died")
    if status != "ok":
        raise RuntimeError(value)
    return dict(value)


def check(scn: dict[str, Any]) -> tuple[str, list[str]]:
    """("match" | "differ" | "reference-error" | "kvreplay-error" | "unplaced", details)."""
    if scn.get("kind") in SPREAD_KINDS:
        return _check_spread(scn)
    try:
        ref = run_reference_guarded(scn)
    except Exception as exc:  # the reference refuses, aborts or hangs: nothing to compare
        if kv_groups_kind.POISONED in str(exc):
            return _check_abort(scn, str(exc))
        return "reference-error", [f"{type(exc).__name__}: {str(exc)[:300]}"]
    try:
        mine = run_kvreplay(scn)
    except Exception as exc:
        return "kvreplay-error", [f"{type(exc).__name__}: {str(exc)[:300]}"]
    found = compare(ref, mine)
    if scn.get("kind") in ("g3-agentic", "agentic-g2-shared") and \
            found == [_digest_line(ref, mine)] and \
            ref["summary"].get("agentic_lifecycle_event_count") == \
            mine["summary"].get("agentic_lifecycle_event_count"):
        # Deliberate (docs/engine.md, "G3"): the transcript renders each event's time, which
        # the reference sums in float milliseconds (a G3 read's 0.1 ms first byte: 43.3 there
        # comes out 43.300000000000004; a shared G2 pool's copies alike: 18.549999999999997
        # for 18.55), kvreplay on an integer nanosecond clock; every time is compared above
        # to 10 ns, and the events are as many.
        found = []
    if scn.get("kind") == "agentic-g2-shared" and ref["summary"].get("completed_requests") != \
            ref["summary"].get("num_requests"):
        # Deliberate (docs/engine.md, "G3"): a run stopped at its time cap with requests
        # unfinished; a shared G2 copy finishing while its worker's pass outlives the cap is
        # resident in kvreplay and still pending in the reference (its tier moves only when a
        # worker acts), as G3's end-of-run figures (_unsettled).
        found = [line for line in found if not line.startswith("summary g2_domains:")]
    return ("differ" if found else "match"), found


def _check_abort(scn: dict[str, Any], reference_error: str) -> tuple[str, list[str]]:
    """The reference aborted the replay (KV cache groups: a forward larger than the pool):
    kvreplay must stop at the same forward ("reference-error" then, else "differ")."""
    from kvreplay.engine.kv_groups import GroupedKvOverflow

    try:
        run_kvreplay(scn)
    except GroupedKvOverflow as exc:
        if kv_groups_kind.same_abort(reference_error, str(exc)):
            return "reference-error", [f"both abort: {exc}"]
        return "differ", [f"abort: reference {reference_error[-300:]}", f"kvreplay {exc}"]
    return "differ", [f"the reference aborts, kvreplay does not: {reference_error[-300:]}"]


def _check_spread(scn: dict[str, Any]) -> tuple[str, list[str]]:
    """`check` for a SPREAD_KINDS scenario: kvreplay against the first reference run that
    placed every request where kvreplay did."""
    try:
        mine = run_kvreplay(scn)
    except Exception as exc:
        return "kvreplay-error", [f"{type(exc).__name__}: {str(exc)[:300]}"]
    wanted = {key: _placements(row) for key, row in _keyed(mine["per_request"]).items()}
    first: list[str] | None = None
    for _ in range(SPREAD_RUNS):
        try:
            ref = run_reference_guarded(scn)
        except Exception as exc:
            return "reference-error", [f"{type(exc).__name__}: {str(exc)[:300]}"]
        placed = {key: _placements(row) for key, row in _keyed(ref["per_request"]).items()}
        if placed == wanted:
            # Runs placed alike may still differ (the reference orders other same-instant
            # work at random too): kvreplay matches when it equals one of them.
            found = compare(ref, mine)
            if not found:
                return "match", []
            first = first or found
    if first is not None:
        return "differ", first
    return "unplaced", [f"none of {SPREAD_RUNS} reference runs placed the requests as kvreplay"]


def _digest_line(ref: dict[str, Any], mine: dict[str, Any]) -> str:
    key = "agentic_lifecycle_digest"
    return f"summary {key}: reference {ref['summary'].get(key)!r}, kvreplay " \
        f"{mine['summary'].get(key)!r}"


# -- shrinking ------------------------------------------------------------------------------------

def shrink(scn: dict[str, Any], still_fails: Callable[[dict[str, Any]], bool],
           budget: int = 200) -> dict[str, Any]:
    """A smaller scenario that still fails: drop sessions, then rows (agentic: plays, leaf
    requests, lanes, G2, delays), shorten outputs, drop workers; each step kept only when the
    failure persists."""
    best = copy.deepcopy(scn)
    tries = 0

    def attempt(candidate: dict[str, Any]) -> bool:
        nonlocal best, tries
        tries += 1
        if tries > budget or not _valid(candidate):
            return False
        if still_fails(candidate):
            best = candidate
            return True
        return False

    changed = True
    while changed and tries < budget:
        changed = False
        if "synthetic" in best:
            for key, low in (("request_count", 1), ("turns", 2), ("output_tokens", 1),
                             ("input_tokens", 1)):
                if key not in best["synthetic"]:
                    continue
                if best["synthetic"][key] > low:
                    cand = copy.deepcopy(best)
                    cand["synthetic"][key] = max(low, cand["synthetic"][key] // 2)
                    changed |= attempt(cand)
        # agentic: a smaller graph, then start over from it
        if "header" in best and any(attempt(cand) for cand in _agentic_smaller(best)):
            changed = True
            continue
        rows = [] if "header" in best else best["rows"]
        for s in sorted({r["session_id"] for r in rows}):
            cand = copy.deepcopy(best)
            cand["rows"] = [r for r in cand["rows"] if r["session_id"] != s]
            changed |= attempt(cand)
        for i in range(len(rows) - 1, -1, -1):
            if i >= len(best["rows"]):
                continue
            cand = copy.deepcopy(best)
            row = cand["rows"].pop(i)
            if "timestamp" in row:  # the session's next turn becomes its first
                for nxt in cand["rows"][i:]:
                    if nxt["session_id"] == row["session_id"]:
                        nxt.pop("delay", None)
                        nxt["timestamp"] = row["timestamp"]
                        break
            changed |= attempt(cand)
        for i, row in enumerate(best["rows"]):
            if row["output_length"] > 1:
                cand = copy.deepcopy(best)
                cand["rows"][i]["output_length"] = 1
                changed |= attempt(cand)
        for key in ("workers", "prefill_workers", "decode_workers", "dp", "prefill_dp",
                    "decode_dp"):
            if best.get(key, 1) > 1:
                cand = copy.deepcopy(best)
                cand[key] -= 1
                changed |= attempt(cand)
    return best


def _agentic_smaller(scn: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Smaller agentic corpora, each still a valid graph: without one play, without one leaf
    request (no other request depends on it), without lanes or G2, without one edge delay or
    `not_before_ms` floor."""
    rows = scn["rows"]
    for play in sorted({r["play_id"] for r in rows}):
        cand = copy.deepcopy(scn)
        cand["rows"] = [r for r in rows if r["play_id"] != play]
        yield cand
    needed = {d["request_id"] for r in rows for d in r["dependencies"]}
    for i in range(len(rows) - 1, -1, -1):
        if rows[i]["request_id"] not in needed:
            cand = copy.deepcopy(scn)
            del cand["rows"][i]
            yield cand
    if scn.get("agentic_lanes") is not None:
        yield {**copy.deepcopy(scn), "agentic_lanes": None}
    if "native_host_offload" in scn["rank"]:
        cand = copy.deepcopy(scn)
        del cand["rank"]["native_host_offload"]
        yield cand
    for i, row in enumerate(rows):
        if row["not_before_ms"] and row["dependencies"]:
            cand = copy.deepcopy(scn)
            cand["rows"][i]["not_before_ms"] = 0.0
            yield cand
        for k, dep in enumerate(row["dependencies"]):
            if dep["delay_ms"]:
                cand = copy.deepcopy(scn)
                cand["rows"][i]["dependencies"][k]["delay_ms"] = 0.0
                yield cand


def _valid(scn: dict[str, Any]) -> bool:
    if "header" in scn:  # an agentic graph: every dependency present
        ids = {r["request_id"] for r in scn["rows"]}
        return bool(ids) and all(d["request_id"] in ids
                                 for r in scn["rows"] for d in r["dependencies"])
    return bool(scn["rows"]) or "synthetic" in scn
