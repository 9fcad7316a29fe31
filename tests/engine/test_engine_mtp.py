"""MTP speculative decoding in the bundled engine: the native engine's limits, determinism, the
per-request draft counts, and the reference's token times on small hand-made cases."""

from __future__ import annotations

from typing import Any

import pytest
from engine_support import ListWorkload, native, native_pd, rank, record_dict, request

from kvreplay.engine import EngineConfigError, refusals, run_native
from kvreplay.engine.records import RequestRecord
from kvreplay.engine.report import report_from_run

G2 = {"num_host_blocks": 8, "d2h_bandwidth_gbps": 1.0, "h2d_bandwidth_gbps": 1.0}


def workload() -> ListWorkload:
    return ListWorkload([request(i, 3.0 * i, 8, 12 + i, [1, i + 2]) for i in range(6)])


def records(doc: dict[str, Any]) -> list[RequestRecord]:
    return sorted(run_native(doc, workload=workload()).records, key=lambda r: r.ordinal)


def mtp(**overrides: Any) -> dict[str, Any]:
    return rank(**{"aic_nextn": 2, "aic_nextn_accept_rates": "0.7,0.4", **overrides})


@pytest.mark.parametrize(("rank_args", "message"), [
    (mtp(aic_nextn_accept_rates="0.5,1.5"), r"aic_nextn_accept_rates\[1\] must be finite and in "
                                            r"\[0, 1\], got 1.5"),
    (mtp(aic_nextn_accept_rates="-0.1"), r"aic_nextn_accept_rates\[0\] .* got -0.1"),
    (mtp(aic_nextn_accept_rates="1e400"), r"aic_nextn_accept_rates\[0\] .* got inf"),
    (rank(aic_nextn_accept_rates="0.5"), "aic_nextn_accept_rates requires aic_nextn"),
    (mtp(native_host_offload=G2), "native_host_offload does not support speculation"),
])
def test_the_native_engines_mtp_limits_are_refused(rank_args: dict[str, Any],
                                                   message: str) -> None:
    """What the reference refuses at launch (a rate outside [0, 1], rates without nextn, G2 with
    MTP on one role) is an EngineConfigError naming the rank's key, never a crash."""
    with pytest.raises(EngineConfigError, match=message):
        run_native(native(rank_args), workload=workload())


def test_g2_and_mtp_on_different_roles_run() -> None:
    """G2 on the prefill role and MTP on the decode role is a combination the reference runs."""
    doc = native_pd(rank(native_host_offload=G2), mtp())
    assert refusals(doc) == []
    recs = records(doc)
    assert all(r.terminal_status == "completed" for r in recs)
    assert all(r.speculative_steps for r in recs)


def test_same_seed_same_records_and_the_seed_matters() -> None:
    """Two runs with one seed give identical records; another seed other token times."""
    first = [record_dict(r) for r in records(native(mtp(aic_mtp_seed=5)))]
    assert first == [record_dict(r) for r in records(native(mtp(aic_mtp_seed=5)))]
    other = [record_dict(r) for r in records(native(mtp(aic_mtp_seed=6)))]
    assert [r["itl_gaps"] for r in other] != [r["itl_gaps"] for r in first]


def test_draft_counts_add_up_to_the_output() -> None:
    """Aggregated, every token (the first included) comes from a speculative step: output =
    steps + accepted drafts, drafts = nextn x steps; requests of plain ranks count none."""
    recs = records(native(mtp()))
    for r in recs:
        assert r.speculative_steps is not None and r.speculative_steps > 0
        assert r.output_length == r.speculative_steps + r.accepted_draft_tokens
        assert r.draft_tokens == 2 * r.speculative_steps
    assert sum(r.accepted_draft_tokens for r in recs) > 0
    assert all(r.speculative_steps is None for r in records(native(rank())))


def test_rates_of_one_emit_full_bursts_at_one_decode_cost() -> None:
    """With rates 1, 1 one request alone emits 3 tokens per step: a 7-token output is 3 steps
    (3 + 3 + 1, the last capped), each a decode duration after the prefill; the tokens of a
    burst share its time (gaps of 0)."""
    doc = native(mtp(aic_nextn_accept_rates="1,1"))
    rec = run_native(doc, workload=ListWorkload([request(0, 0.0, 8, 7, [1, 2])])).records[0]
    assert (rec.first_token_ms, rec.last_token_ms) == (12.0, 16.0)
    assert rec.itl_runs() == [(0.0, 2), (2.0, 1), (0.0, 2), (2.0, 1)]
    assert (rec.speculative_steps, rec.accepted_draft_tokens) == (3, 4)


def _report(doc: dict[str, Any]) -> dict[str, Any]:
    return report_from_run(run_native(doc, workload=workload()))


def test_the_report_carries_the_speculation_figures() -> None:
    """Rows carry each request's steps, drafts and accepted drafts; the summary's speculation
    block sums them, derives the rates, counts the draws per position (reached = accepted at
    the position before) and splits the token gaps into bursts (0 ms) and steps."""
    report = _report(native(mtp()))
    rows, block = report["per_request"], report["summary"]["speculation"]
    assert all(row["draft_tokens"] == 2 * row["speculative_steps"] for row in rows)
    steps = sum(row["speculative_steps"] for row in rows)
    accepted = sum(row["accepted_draft_tokens"] for row in rows)
    assert (block["requests"], block["speculative_steps"], block["accepted_draft_tokens"]) == (
        len(rows), steps, accepted)
    assert block["tokens_per_step"] == (steps + accepted) / steps
    assert block["mean_accepted_length"] == accepted / steps
    first, second = block["acceptance_by_position"]
    assert first["verified_steps"] == block["verifications"] >= steps
    assert second["verified_steps"] == first["accepted_steps"] > second["accepted_steps"] > 0
    assert second["acceptance_rate"] == second["accepted_steps"] / second["verified_steps"]
    gaps = sum(row["output_length"] - 1 for row in rows)
    assert block["burst_itl_share"] == (accepted / gaps)  # aggregated: every token is a step's
    assert block["min_step_itl_ms"] > 0.0


def test_rates_of_one_accept_every_position() -> None:
    """Rates 1, 1: every drawn verification accepts both positions (rates 1 and 1 observed)."""
    block = _report(native(mtp(aic_nextn_accept_rates="1,1")))["summary"]["speculation"]
    assert [p["acceptance_rate"] for p in block["acceptance_by_position"]] == [1.0, 1.0]


def test_plain_reports_have_no_speculation_figures() -> None:
    """Without MTP neither the summary nor a row has a speculation figure (reports of plain
    runs unchanged); with MTP on the prefill role only, the decode steps do not speculate."""
    plain = _report(native(rank()))
    assert "speculation" not in plain["summary"]
    assert not {"speculative_steps", "draft_tokens"} & set(plain["per_request"][0])
    prefill_only = _report(native_pd(mtp(), rank()))
    assert "speculation" not in prefill_only["summary"]


def test_sglang_ranks_speculate_after_the_prefill_token() -> None:
    """An SGLang rank with rates 1, 1: the first token comes from the prefill forward (no
    burst, no decode charge), then each decode step emits a full burst of 3 at one decode
    duration: a 7-token output is 1 + 3 + 3, two speculative steps (the reference's SGLang
    decode; difftest kind mtp checks it per request)."""
    doc = native(mtp(aic_nextn_accept_rates="1,1", backend="sglang", enable_chunked_prefill=True))
    rec = run_native(doc, workload=ListWorkload([request(0, 0.0, 8, 7, [1, 2])])).records[0]
    assert (rec.first_token_ms, rec.last_token_ms) == (10.0, 14.0)
    assert rec.itl_runs() == [(2.0, 1), (0.0, 2), (2.0, 1), (0.0, 2)]
    assert (rec.speculative_steps, rec.draft_tokens, rec.accepted_draft_tokens) == (2, 4, 4)
