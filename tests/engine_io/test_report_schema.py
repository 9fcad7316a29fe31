"""Reports validate against schema/report.schema.json (Draft 2020-12), which lists every key."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import jsonschema
import pytest
from engine_io_support import record

from kvreplay.engine.records import Admission, RoutingDecision
from kvreplay.engine.report import ReportFacts, Sla, build_report, dumps_report


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    text = resources.files("kvreplay.schema").joinpath("report.schema.json").read_text("utf-8")
    schema = json.loads(text)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


G2_TRANSFERS = {"d2h_transfers": 3, "d2h_blocks": 6, "d2h_bytes": 6_000_000, "h2d_transfers": 1,
                "h2d_blocks": 2, "h2d_bytes": 2_000_000, "store_cohorts_retried": 0,
                "restores_deferred": 0, "host_evicted_blocks": 0, "pools": 1,
                "scopes": ["cluster_shared"]}
G2_TIMELINE = {"bin_ms": 2.0, "d2h_blocks": [4, 2], "d2h_bytes": [4_000_000, 2_000_000],
               "h2d_blocks": [0, 2], "h2d_bytes": [0, 2_000_000],
               "pools": [{"name": "shared", "scope": "cluster_shared", "capacity_blocks": 8,
                          "used_blocks": [4, 6], "evicted_blocks": [0, 0]}]}

IO = {"submitted_jobs": 1, "completed_jobs": 1, "cancelled_jobs": 0,
      "completed_bytes": 2_000_000, "transfer_ms": 2.5}
G3_OFFLOAD = {"lookup_probes": 5, "lookup_hits": 2, "lookup_pending": 0, "read": IO,
              "write": IO, "evictions": 0, "cross_worker_read_blocks": 0,
              "resident_blocks": 6, "pending_blocks": 0}
G3_TIMELINE = {"bin_ms": 2.0, "write_blocks": [2, 0], "write_bytes": [2_000_000, 0],
               "read_blocks": [0, 2], "read_bytes": [0, 2_000_000],
               "pools": [{"name": "agg 0", "scope": "worker_local", "capacity_blocks": 64,
                          "used_blocks": [2, 2], "evicted_blocks": [0, 0]}]}


def _reports() -> dict[str, dict[str, Any]]:
    plain = [record(0, 0.0, [10.0, 12.0, 14.0]), record(1, 5.0, [], terminal=15.0),
             record(2, 6.0, [], first_admit=None, terminal=6.0, status="rejected")]
    host = record(3, 200.0, [204.0], first_admit=202.0, input_length=9, reused=8)
    host.first_admission_g1_reused_input_tokens = 0
    host.first_admission_host_reused_input_tokens = 8
    host.admission_history[0] = Admission(0, "agg", 0, 202.0, 8, 0, 8, False)
    g3 = record(5, 300.0, [306.5], first_admit=304.5, input_length=9, reused=8)
    g3.first_admission_g1_reused_input_tokens = 0
    g3.first_admission_host_reused_input_tokens = g3.first_admission_g3_reused_input_tokens = 8
    g3.admission_history[0] = Admission(0, "agg", 0, 304.5, 8, 0, 8, False)
    mtp = record(6, 0.0, [4.0, 4.0, 4.0, 6.0, 6.0])  # two MTP steps: bursts of 3 and 2
    mtp.speculative_steps, mtp.draft_tokens, mtp.accepted_draft_tokens = 2, 4, 3
    pd = record(4, 0.0, [30.0, 31.0], session_id="s", turn_index=2)
    pd.prefill_admit_ms, pd.source_held_ms, pd.decode_admit_ms = 0.0, 10.0, 25.0
    pd.routing_history += [RoutingDecision("prefill", 0, 0, 0, "queued", 0.0, 3.0, 4, 1, 2),
                           RoutingDecision("decode", 1, 0, 1)]
    return {
        "empty": build_report([], ReportFacts()),
        "plain": build_report(plain, ReportFacts(decode_workers=1, decode_gpus_per_worker=8)),
        "sla": build_report(plain, ReportFacts(sla=Sla(ttft_ms=50.0), wall_time_ms=3.0)),
        "host tier": build_report([host], ReportFacts(summary_extra={"g2_domains": [
            {"capacity_blocks": 8, "resident_blocks": 6, "used_blocks": 6}],
            "g2_transfers": G2_TRANSFERS, "g2_timeline": G2_TIMELINE})),
        "g3 tier": build_report([g3], ReportFacts(summary_extra={
            "g2_transfers": G2_TRANSFERS, "g2_timeline": G2_TIMELINE, "g3_offload": G3_OFFLOAD,
            "g3_timeline": G3_TIMELINE})),
        "mtp": build_report([mtp], ReportFacts(speculation_draws=(1, 0, 1))),
        "disaggregated": build_report([pd], ReportFacts(prefill_workers=1, decode_workers=1,
                                                        meta={"engine_mode": "exact"})),
        "no rows": build_report(plain, ReportFacts(), per_request=False),
    }


@pytest.mark.parametrize("name", list(_reports()))
def test_reports_validate(name: str, validator: jsonschema.Draft202012Validator) -> None:
    """Each report variant, after a canonical round trip, satisfies the schema."""
    report = json.loads(dumps_report(_reports()[name]))
    errors = sorted(str(e.message) for e in validator.iter_errors(report))
    assert errors == []


def test_schema_lists_exactly_the_summary_keys(validator: jsonschema.Draft202012Validator) -> None:
    """Every computed summary key is described, and every required key is computed."""
    summary_schema = validator.schema["properties"]["summary"]
    with_sla = _reports()["sla"]["summary"]
    with_g2 = _reports()["host tier"]["summary"]
    with_g3 = _reports()["g3 tier"]["summary"]
    with_mtp = _reports()["mtp"]["summary"]
    assert set(with_sla) | set(with_g2) | set(with_g3) | set(with_mtp) == set(
        summary_schema["properties"])
    assert set(summary_schema["required"]) == set(_reports()["plain"]["summary"])


def test_schema_rejects_unknown_request_fields(validator: jsonschema.Draft202012Validator) -> None:
    """A per-request row with an undeclared key, or a summary missing a key, is invalid."""
    report = json.loads(dumps_report(_reports()["plain"]))
    report["per_request"][0]["surprise"] = 1
    del report["summary"]["gpu_hours"]
    messages = sorted(e.message for e in validator.iter_errors(report))
    assert any("surprise" in m for m in messages)
    assert any("gpu_hours" in m for m in messages)
