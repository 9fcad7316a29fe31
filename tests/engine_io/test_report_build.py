"""The canonical report from request records: summary values, per-request rows, canonical text."""

from __future__ import annotations

import json
import random

import pytest
from engine_io_support import record

from kvreplay.engine.records import Admission, RequestRecord, RoutingDecision
from kvreplay.engine.report import (
    ReportError,
    ReportFacts,
    Sla,
    build_report,
    dumps_report,
    facts_from_core,
    report_from_run,
    sla_from_spec,
    uuid_for,
)
from kvreplay.engine.result import PoolFacts, RunFacts, RunResult


def _scenario() -> list[RequestRecord]:
    """One worker, prefill 10 / decode 2 (also run on the reference, test_report_reference):
    A arrives at 0 (5 tokens at 10, 12, 14, 26, 28), B and C at 13 (B: 26, 28, 30; C: 26),
    D at 100 with no output (ends at 110)."""
    return [
        record(0, 0.0, [10.0, 12.0, 14.0, 26.0, 28.0], input_length=8),
        record(1, 13.0, [26.0, 28.0, 30.0], first_admit=14.0, input_length=8),
        record(2, 13.0, [26.0], first_admit=14.0, input_length=4),
        record(3, 100.0, [], terminal=110.0, input_length=4, requested=0),
    ]


def test_summary_of_the_hand_made_scenario() -> None:
    """Counts, throughputs and distributions, each derived by hand from the token times."""
    summary = build_report(_scenario(), ReportFacts(decode_workers=1, decode_gpus_per_worker=1))[
        "summary"]
    assert summary["num_requests"] == 4 and summary["completed_requests"] == 4
    assert (summary["total_input_tokens"], summary["total_output_tokens"]) == (24, 9)
    assert summary["duration_ms"] == 110.0
    assert summary["request_throughput_rps"] == 4 / 0.11
    assert summary["gpu_hours"] == 0.11 / 3600
    assert (summary["mean_ttft_ms"], summary["median_ttft_ms"], summary["max_ttft_ms"]) == (
        12.0, 13.0, 13.0)  # ttfts 10, 13, 13 (D has no token)
    assert (summary["median_e2e_latency_ms"], summary["num_e2e_latency_samples"]) == (17.0, 3)
    assert (summary["num_tpot_samples"], summary["mean_tpot_ms"]) == (2, 3.25)  # 4.5 and 2
    assert (summary["num_ttft_samples"], summary["mean_ttst_ms"]) == (3, 2.0)
    assert (summary["max_itl_ms"], summary["min_itl_ms"]) == (12.0, 2.0)
    assert summary["mean_itl_ms"] == 22 / 6  # gaps 2, 2, 12, 2 and 2, 2
    assert summary["median_itl_ms"] == 1.9997051226201907
    assert summary["min_output_token_throughput_per_user"] == 1000 / 12
    assert "goodput_completed_requests" not in summary
    assert summary["committed_prefill_tokens"] is None


def test_goodput_counts_requests_within_the_sla() -> None:
    """TTFT <= 13 and average ITL <= 3: B (13, 2) and C (13, one token) pass; A's ITL 4.5 fails."""
    sla = Sla(ttft_ms=13.0, itl_ms=3.0)
    summary = build_report(_scenario(), ReportFacts(sla=sla))["summary"]
    assert summary["goodput_completed_requests"] == 2
    assert summary["goodput_output_throughput_tok_s"] == 4 / 0.11
    e2e_only = build_report(_scenario(), ReportFacts(sla=Sla(e2e_ms=20.0)))["summary"]
    assert e2e_only["goodput_completed_requests"] == 3  # B 17, C 13, D (no tokens) 10


def test_only_completed_requests_enter_the_statistics() -> None:
    """Rejected and unfinished requests count in num_requests only; unfinished are not listed."""
    records = _scenario()
    records.append(record(4, 5.0, [], first_admit=None, terminal=5.0, status="rejected"))
    records.append(record(5, 6.0, [20.0], terminal=None, status=None))
    report = build_report(records, ReportFacts())
    assert (report["summary"]["num_requests"], report["summary"]["completed_requests"]) == (6, 4)
    assert [row["uuid"] for row in report["per_request"]] == [uuid_for(i) for i in range(5)]


def test_reuse_ratios_use_first_and_latest_admission() -> None:
    """prefix ratio = reused / input; first-admission ratio = first admission's reuse / input."""
    records = [record(0, 0.0, [1.0], input_length=8, reused=4, first_reused=0),
               record(1, 0.0, [1.0], input_length=8, reused=4)]
    summary = build_report(records, ReportFacts())["summary"]
    assert summary["prefix_cache_reused_ratio"] == 0.5
    assert summary["first_admission_prefix_cache_reused_ratio"] == 0.25


def test_static_pools_bill_workers_for_the_duration() -> None:
    """Static pools bill workers x GPUs x duration; explicit worker-seconds replace that."""
    facts = ReportFacts(prefill_workers=2, decode_workers=3, prefill_gpus_per_worker=4,
                        decode_gpus_per_worker=2)
    summary = build_report(_scenario(), facts)["summary"]
    assert (summary["prefill_worker_seconds"], summary["decode_worker_seconds"]) == (
        2 * 0.11, 3 * 0.11)
    assert summary["gpu_hours"] == (2 * 0.11 * 4 + 3 * 0.11 * 2) / 3600
    scaled = build_report(_scenario(), ReportFacts(decode_worker_seconds=7.0,
                                                   decode_gpus_per_worker=2))["summary"]
    assert scaled["gpu_hours"] == 14.0 / 3600


def test_duration_given_by_the_engine_is_used() -> None:
    """An explicit duration replaces the last completion time in every rate."""
    summary = build_report(_scenario(), ReportFacts(duration_ms=200.0))["summary"]
    assert (summary["duration_ms"], summary["request_throughput_rps"]) == (200.0, 20.0)


def test_per_request_row_fields() -> None:
    """A row carries ids, times, derived latencies, lengths and histories."""
    r = record(6, 13.0, [26.0, 28.0, 30.0], first_admit=14.0, session_id="s", turn_index=1)
    r.request_id = "req-7"
    r.routing_history.append(RoutingDecision("agg", 0, 0, 0))
    (row,) = build_report([r], ReportFacts())["per_request"]
    assert row["uuid"] == "00000000-0000-0000-0000-000000000007"
    assert (row["request_id"], row["session_id"], row["turn_index"]) == ("req-7", "s", 1)
    assert (row["ttft_ms"], row["ttst_ms"], row["e2e_latency_ms"], row["itl_ms"]) == (
        13.0, 2.0, 17.0, 2.0)
    assert row["admission_history"] == [{"admission_ordinal": 0, "at_ms": 14.0,
                                         "is_readmission": False, "pool": "agg",
                                         "pool_admission_ordinal": 0, "reused_input_tokens": 0}]
    assert row["routing_history"][0]["outcome"] == "immediate"
    assert "first_admission_g1_reused_input_tokens" not in row
    assert row["admission_count"] == 1 and row["prefill_admit_ms"] is None


def test_host_tier_rows_carry_the_g1_and_host_split() -> None:
    """With a host tier the first-admission split and per-admission split are listed."""
    r = record(0, 200.0, [204.0], first_admit=202.0, input_length=9, reused=8)
    r.first_admission_g1_reused_input_tokens = 0
    r.first_admission_host_reused_input_tokens = 8
    r.admission_history[0] = Admission(0, "agg", 0, 202.0, 8, 0, 8, False)
    (row,) = build_report([r], ReportFacts())["per_request"]
    assert (row["first_admission_g1_reused_input_tokens"],
            row["first_admission_host_reused_input_tokens"]) == (0, 8)
    assert row["admission_history"][0]["host_reused_input_tokens"] == 8


def test_inconsistent_gaps_are_refused() -> None:
    """itl_gaps must hold output_length - 1 gaps (a core bug otherwise), named by uuid."""
    r = record(2, 0.0, [1.0, 2.0, 3.0])
    r.itl_gaps = [(1.0, 1)]
    with pytest.raises(ReportError, match="00000000-0000-0000-0000-000000000003"):
        build_report([r], ReportFacts())


def test_report_bytes_do_not_depend_on_record_order() -> None:
    """Records in any order give the same canonical text, rows sorted by uuid."""
    records = _scenario()
    text = dumps_report(build_report(records, ReportFacts(), version="x"))
    shuffled = list(records)
    random.Random(3).shuffle(shuffled)
    assert dumps_report(build_report(shuffled, ReportFacts(), version="x")) == text
    assert text.endswith("}\n") and json.loads(text)["per_request"][0]["uuid"] == uuid_for(0)


def test_only_meta_depends_on_wall_time() -> None:
    """Wall time and per-wall-second rates live in meta; summary and rows are unchanged."""
    slow = build_report(_scenario(), ReportFacts(wall_time_ms=500.0, meta={"mode": "exact"}))
    fast = build_report(_scenario(), ReportFacts(wall_time_ms=5.0, meta={"mode": "fast"}))
    assert slow["summary"] == fast["summary"] and slow["per_request"] == fast["per_request"]
    assert slow["meta"]["processed_tokens_per_s"] == 33 / 0.5
    assert "wall_time_ms" not in slow["summary"]


def test_non_finite_numbers_are_refused_with_their_path() -> None:
    """NaN or infinity anywhere makes dumps_report fail, naming the JSON path."""
    report = build_report(_scenario(), ReportFacts(summary_extra={"g2_domains": [
        {"used_blocks": float("nan")}]}))
    with pytest.raises(ReportError, match=r"\$\.summary\.g2_domains\[0\]\.used_blocks"):
        dumps_report(report)


def test_extra_keys_cannot_replace_computed_ones() -> None:
    """summary_extra and meta may only add keys."""
    with pytest.raises(ReportError):
        build_report([], ReportFacts(summary_extra={"duration_ms": 1.0}))
    with pytest.raises(ReportError):
        build_report([], ReportFacts(meta={"wall_time_ms": 1.0}))


def test_uuid_is_ordinal_plus_one() -> None:
    """The uuid spells ordinal + 1 as 32 hex digits in 8-4-4-4-12 groups."""
    assert uuid_for(0) == "00000000-0000-0000-0000-000000000001"
    assert uuid_for(2**64) == "00000000-0000-0001-0000-000000000001"


def _core_facts() -> RunFacts:
    """A disaggregated run's core facts: 2 prefill workers of 4 GPUs, 3 decode of 2 (DP x TP)."""
    core = RunFacts()
    core.pools = [PoolFacts("prefill", 2, 1, 4, 1, "vllm", 16, 100),
                  PoolFacts("decode", 3, 2, 1, 1, "vllm", 16, 100)]
    core.mode, core.router, core.passes, core.fast_forwarded_passes = "disaggregated", "kv", 7, 3
    core.end_ms, core.committed_prefill_tokens, core.requests_released = 120.0, 30, 4
    core.requests_terminal, core.preemptions_total, core.approximations = 4, 1, ["timing"]
    return core


def test_core_facts_map_to_report_facts() -> None:
    """Pools map to prefill/decode roles billed until the clock stopped; every switch and
    counter of the core goes to meta."""
    core = _core_facts()
    facts = facts_from_core(core, sla=Sla(e2e_ms=50.0), wall_time_ms=4.0)
    assert (facts.prefill_workers, facts.decode_workers) == (2, 3)
    assert (facts.prefill_gpus_per_worker, facts.decode_gpus_per_worker) == (4, 2)
    assert (facts.prefill_worker_seconds, facts.decode_worker_seconds) == (2 * 0.12, 3 * 0.12)
    assert (facts.committed_prefill_tokens, facts.duration_ms) == (30, None)
    assert facts.summary_extra == {}
    assert facts.meta == {
        "mode": "disaggregated", "router": "kv", "stepwise": False, "passes": 7,
        "fast_forwarded_passes": 3, "approximations": ["timing"], "preemptions_total": 1,
        "requests_released": 4, "requests_terminal": 4, "max_sim_time_ms": None,
        "stopped_at_time_cap": False, "end_ms": 120.0}
    report = report_from_run(RunResult(_scenario(), core))
    assert report["summary"]["committed_prefill_tokens"] == 30
    assert report["meta"]["passes"] == 7


def test_core_g2_and_workload_facts_join_the_summary() -> None:
    """The core's G2 pool, copy totals and timeline, and its workload's summary keys, are
    summary keys; a duration the core reports replaces the records' one."""
    core = _core_facts()
    core.g2_domains = [{"capacity_blocks": 8}]
    core.host_transfers = {"copies": 2}
    core.g2_timeline = {"bins": []}
    core.workload_summary = {"agentic_plays": 1}
    core.reported_duration_ms = 90.0
    facts = facts_from_core(core)
    assert facts.summary_extra == {"g2_domains": [{"capacity_blocks": 8}],
                                   "g2_transfers": {"copies": 2}, "g2_timeline": {"bins": []},
                                   "agentic_plays": 1}
    assert facts.duration_ms == 90.0


def test_sla_from_spec() -> None:
    """spec.sla null means no SLA; otherwise its three bounds."""
    assert sla_from_spec(None) is None
    assert sla_from_spec({"ttft_ms": 1.0, "itl_ms": None, "e2e_ms": 3.0}) == Sla(1.0, None, 3.0)
