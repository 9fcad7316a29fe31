"""The issue's G3 scenario (issue 24): three prompts of 48-token blocks, the third sharing 192
tokens (4 blocks) with the first; 8 G1 blocks, 4 G2 blocks, 64 G3 blocks. The second prompt
(8 blocks, prefilled 2 blocks a pass) pushes the first out of G1 and, 2 blocks at a time, out
of G2: only G3 still holds it. A block is 960 kB (20,000 bytes per token), 1 GB/s each way,
G3's first byte 0.5 ms."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine_support import ListWorkload, native, request

from kvreplay.engine import run_native
from kvreplay.engine.result import RunResult

BLOCK = 48
ROWS = [{"timestamp": 0, "hash_ids": [1, 2, 3, 4], "input_length": 192, "output_length": 1},
        {"timestamp": 100, "hash_ids": list(range(11, 19)), "input_length": 337,
         "output_length": 1},
        {"timestamp": 200, "hash_ids": [1, 2, 3, 4, 31], "input_length": 240,
         "output_length": 1}]
G3 = {"scope": "cluster_shared", "num_g3_blocks": 64, "read_bandwidth_gbps": 1.0,
      "write_bandwidth_gbps": 1.0, "latency_to_first_byte_ms": 0.5}


def scenario_rank(g3: Mapping[str, Any] | None = G3) -> dict[str, Any]:
    rank: dict[str, Any] = {
        "backend": "vllm", "block_size": BLOCK, "kv_cache_bytes_per_token": 20000,
        "num_gpu_blocks": 8, "max_num_seqs": 1, "max_num_batched_tokens": 2 * BLOCK,
        "timing_model": {"type": "fixed", "prefill_ms": 2.0, "decode_ms": 1.0},
        "native_host_offload": {"num_host_blocks": 4, "d2h_bandwidth_gbps": 1.0,
                                "h2d_bandwidth_gbps": 1.0}}
    if g3 is not None:
        rank["g3_offload"] = dict(g3)
    return rank


def run_scenario(workers: int = 1, router: str = "round_robin",
                 g3: Mapping[str, Any] | None = G3) -> RunResult:
    rows = ListWorkload([request(i, float(r["timestamp"]), r["input_length"],
                                 r["output_length"], r["hash_ids"], BLOCK)
                         for i, r in enumerate(ROWS)])
    return run_native(native(scenario_rank(g3), workers=workers, router=router), workload=rows)


def outcome(rows: list[tuple[float, int, int]], g3_offload: Mapping[str, Any] | None,
            ) -> tuple[tuple[tuple[float, int, int], ...], tuple[tuple[str, float], ...]]:
    """(first admission ms rounded to 10 ns, reused tokens, host tokens) per row, and the
    g3_offload block flattened with its times rounded to 10 ns: what the runs are compared
    by (the reference sums float milliseconds)."""
    flat: list[tuple[str, float]] = []
    for key, value in sorted((g3_offload or {}).items()):
        items = sorted(value.items()) if isinstance(value, Mapping) else [("", value)]
        flat.extend((f"{key}.{k}" if k else key, round(v, 5)) for k, v in items)
    return tuple((round(t, 5), reused, host) for t, reused, host in rows), tuple(flat)


def kvreplay_outcome(result: RunResult) -> Any:
    return outcome([(r.first_admit_ms or 0.0, r.reused_input_tokens,
                     r.first_admission_host_reused_input_tokens or 0)
                    for r in sorted(result.records, key=lambda r: r.arrival_time_ms)],
                   result.facts.g3_offload)


def reference_outcome(rank: Mapping[str, Any], path: Any, workers: int = 1,
                      router: str = "round_robin") -> Any:
    """The reference's run of the scenario (ai-dynamo 1.6.1), as `outcome` reads it."""
    import json

    from dynamo.replay import run_trace_replay

    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    report = run_trace_replay([str(path)], extra_engine_args={"engine": dict(rank)},
                              num_workers=workers, router_mode=router, trace_format="mooncake",
                              trace_block_size=BLOCK, capture_per_request=True)
    rows = sorted(report.per_request, key=lambda p: p["arrival_time_ms"])
    return outcome([(p["first_admit_ms"], p["reused_input_tokens"],
                     p["first_admission_host_reused_input_tokens"]) for p in rows],
                   report.summary.get("g3_offload"))
