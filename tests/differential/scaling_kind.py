"""The `scaling` difftest kind: random target schedules through the scaling hook.

A scenario is an aggregated (1-2 workers, DP 1-2) or P/D (1-2 + 1-2 workers, DP 1-2) round-robin
deployment with the harness's session rows, plus `scaling`: each role's start-up delay (none, or
1-10 ms), the first tick and 1-6 ticks after it, each setting random targets (None or 1-4
replicas per role) and the next tick; `combine` adds features that run under the policy (G2,
private or cluster-shared, and G3 below it; telemetry samples; aggregated SGLang ranks), drawn
from a stream of their own. The same `Recorder` object (a fresh one per engine) drives both
engines; besides the harness's per-request comparison (placements included, telemetry samples
when drawn), it compares every snapshot the policy saw (counts and ids exactly, forward-pass
metrics and the traffic window to 1e-9), the lifecycle operations (the released request lists
by length: the reference names requests by random uuids) and the provisioned worker seconds
and GPU hours (to 100 ns of worker time: BILLING_TOLERANCE_S; the times snapshots and
operations carry to 10 ns, TIME_TOLERANCE, as the harness's per-request times).
"""

from __future__ import annotations

import math
import random
from typing import Any

SNAPSHOT_TOLERANCE = 1e-9
# Deliberate: kvreplay's clock counts whole nanoseconds, the reference sums float milliseconds
# of polynomial pass times, so each worker's start and stop sit within 10 ns of the
# reference's (as per-request times, harness.TOLERANCE_MS): the billed worker seconds within
# 100 ns (ten workers' ends), GPU hours so at up to 4 GPUs a worker (DP 2 x TP 2).
BILLING_TOLERANCE_S = 1e-7
# Likewise the times a snapshot or a lifecycle operation carries: a pass's duration (s) and an
# operation's instant (ms) to 10 ns, the window's mean TTFT to 10 ns and mean ITL (gaps between
# two such times) to 20 ns.
TIME_TOLERANCE = {"wall_time": 1e-8, "at_ms": 1e-5, "avg_ttft_ms": 1e-5, "avg_itl_ms": 2e-5}
BILLING_TOLERANCE = {"prefill_worker_seconds": BILLING_TOLERANCE_S,
                     "decode_worker_seconds": BILLING_TOLERANCE_S,
                     "gpu_hours": BILLING_TOLERANCE_S * 4 / 3600}


class Recorder:
    """A scaling policy that plays a fixed plan and keeps every snapshot it is shown."""

    def __init__(self, plan: dict[str, Any]) -> None:
        self.first = plan["first_ms"]
        self.ticks = list(plan["ticks"])
        self.snapshots: list[dict[str, Any]] = []

    def initial_tick_ms(self) -> float:
        return self.first

    def on_tick(self, snapshot: dict[str, Any]) -> dict[str, Any]:
        self.snapshots.append(snapshot)
        step = self.ticks[len(self.snapshots) - 1] if len(self.snapshots) <= len(self.ticks) \
            else {"prefill": None, "decode": None, "next_ms": None}
        return {"target_prefill": step["prefill"], "target_decode": step["decode"],
                "next_tick_ms": step["next_ms"]}


def plan(rng: random.Random, disaggregated: bool) -> dict[str, Any]:
    """Start-up delays and a random schedule of targets."""
    def target() -> int | None:
        return rng.choice([None, 1, 1, 2, 2, 3, 4])

    startup = {role: rng.choice([None, None, 0.001, 0.002, 0.005, 0.01])
               for role in (("prefill", "decode") if disaggregated else ("aggregated",))}
    t = float(rng.choice([0, 0.5, 1, 2, 3, 5, 10]))
    first = t
    ticks = []
    for i in range(rng.randint(1, 6)):
        t += float(rng.choice([0.5, 1, 2, 3, 5, 8, 15]))
        last = i == 0 and rng.random() < 0.1
        ticks.append({"prefill": target() if disaggregated else None, "decode": target(),
                      "next_ms": None if last else t})
        if last:
            break
    return {"startup": startup, "first_ms": first, "ticks": ticks}


def combine(rng: random.Random, scn: dict[str, Any]) -> None:
    """Features run under the policy besides the base deployment: G2 on every rank (a private
    pool per rank, or one cluster-shared pool; 0.3 of the seeds), with G3 below it on half of
    those that are aggregated with attention DP 1; telemetry samples (0.25 of the seeds, every
    0.5-5 ms, compared sample by sample); SGLang ranks on 0.3 of the aggregated seeds with
    neither (the reference refuses G2 on SGLang; kvreplay telemetry with it)."""
    if rng.random() < 0.3:
        scope = rng.choice(["dp_rank_local", "dp_rank_local", "cluster_shared"])
        g2: dict[str, Any] = {"scope": scope, "num_host_blocks": rng.choice([2, 4, 8, 12]),
                              "d2h_bandwidth_gbps": rng.choice([0.25, 1.0, 4.0]),
                              "h2d_bandwidth_gbps": rng.choice([0.25, 1.0, 4.0])}
        if scope == "cluster_shared":
            g2["kv_layout_id"] = "diff"
        for role in ("rank", "prefill", "decode"):
            if role in scn:
                scn[role]["native_host_offload"] = dict(g2)
        if "rank" in scn and scn["dp"] == 1 and rng.random() < 0.5:
            scn["rank"]["g3_offload"] = g3_pool(rng)
    if rng.random() < 0.25:
        scn["telemetry_ms"] = rng.choice([0.5, 1.0, 2.0, 2.5, 5.0])
    plain = "rank" in scn and "telemetry_ms" not in scn \
        and "native_host_offload" not in scn["rank"]
    if plain and rng.random() < 0.3:
        scn["rank"].update(backend="sglang", enable_chunked_prefill=True, sglang={
            "schedule_policy": rng.choice(["fifo", "lpm"]),
            "chunked_prefill_size": rng.choice([4, 8, 16, 64]),
            "clip_max_new_tokens": rng.choice([1, 4, 4096])})


def g3_pool(rng: random.Random) -> dict[str, Any]:
    """G3 below the G2 pools (aggregated, attention DP 1, as the reference requires): worker-
    local or cluster-shared, tiny, bandwidths with 0 (unlimited) among them."""
    bw = [0.0, 0.25, 1.0, 4.0]
    g3: dict[str, Any] = {"scope": rng.choice(["worker_local", "cluster_shared"]),
                          "num_g3_blocks": rng.choice([1, 2, 4, 8, 64]),
                          "latency_to_first_byte_ms": rng.choice([0.0, 0.1, 0.25]),
                          "read_bandwidth_gbps": rng.choice(bw),
                          "write_bandwidth_gbps": rng.choice(bw)}
    if g3["scope"] == "cluster_shared":
        g3["shared_read_bandwidth_gbps"] = rng.choice([0.0, 0.5, 2.0])
        g3["shared_write_bandwidth_gbps"] = rng.choice([0.0, 0.5, 2.0])
    return g3


def startup_args(scn: dict[str, Any], role: str) -> dict[str, Any]:
    seconds = scn["scaling"]["startup"].get(role)
    return {} if seconds is None else {"startup_time": seconds}


def startup_seconds(scn: dict[str, Any], role: str) -> float:
    seconds = scn["scaling"]["startup"].get(role)
    return 0.0 if seconds is None else float(seconds)


def _same(a: Any, b: Any, key: str | None = None) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k], k) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y, key) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return math.isclose(a, b, rel_tol=SNAPSHOT_TOLERANCE,
                            abs_tol=TIME_TOLERANCE.get(key or "", SNAPSHOT_TOLERANCE))
    return bool(a == b)


def compare(ref: dict[str, Any], mine: dict[str, Any]) -> list[str]:
    """Differences in what the policy saw, the lifecycle operations and the billing."""
    out = []
    theirs, ours = ref["snapshots"], mine["snapshots"]
    if len(theirs) != len(ours):
        out.append(f"scaling ticks: reference {len(theirs)}, kvreplay {len(ours)}")
    for i, (a, b) in enumerate(zip(theirs, ours, strict=False)):
        for key in sorted(set(a) | set(b)):
            if not _same(a.get(key), b.get(key)):
                out.append(f"tick {i} {key}: reference {a.get(key)!r}, kvreplay {b.get(key)!r}")
    ops_a, ops_b = ref["lifecycle_operations"], mine["lifecycle_operations"]
    if len(ops_a) != len(ops_b):
        out.append(f"lifecycle operations: reference {len(ops_a)}, kvreplay {len(ops_b)}")
    for a, b in zip(ops_a, ops_b, strict=False):
        a = {**a, "topology_released_request_uuids": len(a["topology_released_request_uuids"])}
        b = {**b, "topology_released_request_uuids": len(b["topology_released_request_uuids"])}
        if not _same(a, b):
            out.append(f"lifecycle operation {a['operation_ordinal']}: reference {a!r}, "
                       f"kvreplay {b!r}")
    for key, tolerance in BILLING_TOLERANCE.items():
        x, y = ref["summary"].get(key), mine["summary"].get(key)
        if not (_same(x, y) or (isinstance(x, float) and isinstance(y, float)
                                and abs(x - y) <= tolerance)):
            out.append(f"summary {key}: reference {x!r}, kvreplay {y!r}")
    return out
