"""G3 under G2 in the engine (docs/engine.md, "G3: the tier below G2"), exact numbers.

Every expected number here was also produced by the reference engine (ai-dynamo 1.6.1) on the
same rows; tests/engine/test_engine_g3_reference.py re-checks them against it when installed.
Common ground: g2_support's engine (block 4, 1 MB blocks, G1 of 3 blocks), a G2 pool of 4 blocks
(two prompts' full blocks), a G3 pool of 64 at 1 GB/s with a 0.5 ms first byte.
"""

from __future__ import annotations

from typing import Any

import pytest
from engine_support import native
from g2_support import g2, rank, run_agg, workload
from g3_scenario import run_scenario

from kvreplay.engine import EngineConfigError, run_native


def row(t: float, hashes: list[int]) -> dict[str, Any]:
    return {"timestamp": t, "hash_ids": hashes, "input_length": 9, "output_length": 1}


# A, B, C push A's two full blocks out of G2 (4 blocks); A again finds them only in G3.
ROWS = [row(0, [1, 2, 3]), row(100, [11, 12, 13]), row(200, [21, 22, 23]), row(300, [1, 2, 3])]
G3 = {"scope": "worker_local", "num_g3_blocks": 64, "read_bandwidth_gbps": 1.0,
      "write_bandwidth_gbps": 1.0, "latency_to_first_byte_ms": 0.5}
SHARED = {**G3, "scope": "cluster_shared", "shared_read_bandwidth_gbps": 0.5,
          "shared_write_bandwidth_gbps": 0.0}


def g3_rank(g3: dict[str, Any] | None = None, **overrides: Any) -> dict[str, Any]:
    return rank(g2(num_host_blocks=4), g3_offload=dict(g3 or G3), **overrides)


def io(jobs: int, nbytes: int, ms: float) -> dict[str, Any]:
    return {"submitted_jobs": jobs, "completed_jobs": jobs, "cancelled_jobs": 0,
            "completed_bytes": nbytes, "transfer_ms": ms}


def test_worker_local_restores_from_g3_through_g2() -> None:
    """A's two blocks come up G3 -> G2 (0.5 + 2 ms) then G2 -> G1 (2 ms): admitted at 304.5,
    8 tokens reused, all of them from G3; the block counts the reference's g3_offload."""
    result = run_agg(ROWS, g3_rank())
    last = result.records[-1]
    assert (last.first_admit_ms, last.first_token_ms) == (304.5, 306.5)
    assert (last.reused_input_tokens, last.first_admission_g1_reused_input_tokens,
            last.first_admission_host_reused_input_tokens,
            last.first_admission_g3_reused_input_tokens) == (8, 0, 8, 8)
    assert all(r.first_admission_g3_reused_input_tokens == 0 for r in result.records[:-1])
    assert result.facts.g3_offload == {
        "lookup_probes": 5, "lookup_hits": 2, "lookup_pending": 0,
        "read": io(1, 2_000_000, 2.5), "write": io(3, 6_000_000, 7.5),
        "evictions": 0, "cross_worker_read_blocks": 0, "resident_blocks": 6,
        "pending_blocks": 0}


def test_without_g3_the_prefix_is_recomputed() -> None:
    """The same rows with G2 alone: A's blocks were evicted from G2, nothing is reused."""
    result = run_agg(ROWS, rank(g2(num_host_blocks=4)))
    last = result.records[-1]
    assert (last.first_admit_ms, last.reused_input_tokens) == (300.0, 0)
    assert last.first_admission_g3_reused_input_tokens is None
    assert result.facts.g3_offload is None


def test_cluster_shared_reads_across_workers() -> None:
    """Two workers, round robin: A's blocks were written by worker 0, read by worker 1 (2
    cross-worker blocks) at the pool's 0.5 GB/s read cap: 0.5 + 4 ms, admitted at 306.5."""
    result = run_agg(ROWS, g3_rank(SHARED), workers=2)
    last = result.records[-1]
    assert (last.first_admit_ms, last.first_admission_g3_reused_input_tokens) == (306.5, 8)
    facts = result.facts.g3_offload
    assert facts is not None
    assert (facts["cross_worker_read_blocks"], facts["read"]) == (2, io(1, 2_000_000, 4.5))


def test_g3_timeline_counts_writes_and_reads() -> None:
    """kvreplay's own G3 traffic over time: 6 blocks written, 2 read, bins bounded."""
    timeline = run_agg(ROWS, g3_rank()).facts.g3_timeline
    assert timeline is not None
    assert (sum(timeline["write_blocks"]), sum(timeline["read_blocks"])) == (6, 2)
    assert len(timeline["write_blocks"]) <= 1024
    assert [p["scope"] for p in timeline["pools"]] == ["worker_local"]


def test_refusals_the_reference_makes() -> None:
    """G3 without G2, or with attention DP > 1: the reference's refusals, before simulating."""
    alone = rank(None, g3_offload=dict(G3))
    with pytest.raises(EngineConfigError, match="requires native_host_offload"):
        run_native(native(alone), workload=workload(ROWS))
    with pytest.raises(EngineConfigError, match="dp_size=1"):
        run_native(native(g3_rank(), dp_size=2), workload=workload(ROWS))


@pytest.mark.parametrize("backend", ["sglang", "trtllm"])
def test_g3_off_vllm_is_refused_before_simulating(backend: str) -> None:
    """G3 sits in the vLLM scheduler's G2 connector: with SGLang (no block pool) or TensorRT-LLM
    ranks G2 is refused by name (G2-BACKEND), so G3 under it never reaches their schedulers."""
    extra = {"enable_chunked_prefill": True} if backend == "sglang" else {}
    with pytest.raises(EngineConfigError, match="supported only for backend=vllm"):
        run_native(native(g3_rank(backend=backend, **extra)), workload=workload(ROWS))


def test_report_rows_carry_the_g3_split_and_validate() -> None:
    """The report: each row's G3 share of first-admission reuse (the fast row printer gives the
    same text as the mapping), the g3_offload block and the G3 timeline, schema-valid."""
    import json
    from importlib import resources

    import jsonschema

    from kvreplay.engine.canonical_json import canonical_json
    from kvreplay.engine.report import per_request_row, report_from_run
    from kvreplay.engine.row_text import ROW_INDENT, row_text

    result = run_agg(ROWS, g3_rank())
    report = report_from_run(result)
    assert [r["first_admission_g3_reused_input_tokens"] for r in report["per_request"]] == [
        0, 0, 0, 8]
    assert report["summary"]["g3_offload"] == result.facts.g3_offload
    assert sum(report["summary"]["g3_timeline"]["read_blocks"]) == 2
    last = result.records[-1]
    assert row_text(last) == ROW_INDENT + canonical_json(per_request_row(last), ROW_INDENT)
    schema = json.loads(resources.files("kvreplay.schema").joinpath(
        "report.schema.json").read_text("utf-8"))
    jsonschema.Draft202012Validator(schema).validate(report)


def test_issue_scenario_restores_192_tokens_from_g3() -> None:
    """The issue's scenario, one worker: G2 alone lost the first prompt (nothing reused); G3
    brings its 4 blocks up G3 -> G2 (0.5 + 3.84 ms) then G2 -> G1: the third prompt is admitted
    at 208.18 ms with 192 tokens, all from G3 (figures equal to the reference's)."""
    assert run_scenario(g3=None).records[2].reused_input_tokens == 0
    result = run_scenario()
    last = result.records[2]
    assert (last.first_admit_ms, last.reused_input_tokens,
            last.first_admission_g3_reused_input_tokens) == (208.18, 192, 192)
    facts = result.facts.g3_offload
    assert facts is not None
    assert (facts["lookup_hits"], facts["read"]["completed_bytes"],
            facts["cross_worker_read_blocks"]) == (4, 4 * 960_000, 0)


def test_issue_scenario_reads_4_blocks_across_workers() -> None:
    """Three workers round robin on the shared pool: the first prompt written by worker 0,
    the third read by worker 2: cross_worker_read_blocks = 4 (the reference's figure when its
    KV router puts the three prompts that way). Two workers behind kvreplay's KV router: the
    tie at the second prompt goes to the other worker, so the third finds all 192 tokens in
    worker 0's G1 and G3 reads nothing (one of the reference's outcomes; its ties are random:
    test_engine_g3_reference.py)."""
    spread = run_scenario(workers=3).facts.g3_offload
    assert spread is not None and spread["cross_worker_read_blocks"] == 4
    routed = run_scenario(workers=2, router="kv_router")
    last = routed.records[2]
    assert (last.first_admit_ms, last.first_admission_g1_reused_input_tokens) == (200.0, 192)
    facts = routed.facts.g3_offload
    assert facts is not None and (facts["lookup_hits"], facts["cross_worker_read_blocks"]) == (0, 0)
