"""The pure comparison: figures, the per-request join, and pinned text / JSON output."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from syrupy.assertion import SnapshotAssertion

import kvreplay
from kvreplay.compare import compare_reports, evaluate_gates, parse_gate
from kvreplay.compare.formats import to_github, to_json, to_text
from kvreplay.compare.model import FigureDelta
from kvreplay.html.compare_page import comparison_section

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LABELS = ("base.json", "new.json")
GATES = ["mean_ttft_ms > +5%", "prefix_cache_reused_ratio < -0.01", "p99_e2e_latency_ms >= 900"]


def test_identical_reports_have_no_deltas(base_report: dict[str, Any]) -> None:
    """A report against itself: every figure unchanged, no request slower, gates pass."""
    comparison = compare_reports(base_report, base_report)
    assert comparison.figures and not comparison.changed
    assert all(f.delta in (0, None) for f in comparison.figures)
    stats = comparison.requests.stats["e2e_latency_ms"]
    assert (stats.slower, stats.faster, stats.unchanged) == (0, 0, 200)
    assert comparison.requests.top == ()
    results = evaluate_gates(comparison, [parse_gate(g) for g in GATES])
    assert not any(r.tripped for r in results)


def test_slower_run_moves_latency_and_joins_every_request(
        base_report: dict[str, Any], slower_report: dict[str, Any]) -> None:
    """Slower decode passes: the mean TTFT gate trips, the join ranks the slowest requests."""
    comparison = compare_reports(base_report, slower_report, top=3)
    mean = comparison.figure("mean_e2e_latency_ms")
    assert mean is not None and mean.delta is not None and mean.delta > 0
    assert mean.relative == mean.delta / mean.base  # type: ignore[operator]
    join = comparison.requests
    assert join.skipped is None and join.matched == 200 and len(join.top) == 3
    deltas = [m.delta("e2e_latency_ms") for m in join.top]
    assert deltas == sorted(deltas, reverse=True)  # type: ignore[type-var]
    assert deltas[0] == join.stats["e2e_latency_ms"].max
    results = evaluate_gates(comparison, [parse_gate(GATES[0])])
    assert results[0].tripped and results[0].change > 5.0


def test_figures_only_in_one_report_are_listed(base_report: dict[str, Any]) -> None:
    """A figure one report lacks (an SLA's goodput) is listed with the side it is missing on;
    nested objects are compared by dotted name, lists are not figures."""
    new = copy.deepcopy(base_report)
    new["summary"]["goodput_completed_requests"] = 12
    new["summary"]["g2_transfers"] = {"h2d_blocks": 3, "scopes": ["cluster_shared"]}
    comparison = compare_reports(base_report, new)
    goodput = comparison.figure("goodput_completed_requests")
    assert goodput == FigureDelta("goodput_completed_requests", None, 12, False, True)
    assert goodput.changed and goodput.delta is None
    assert comparison.figure("g2_transfers.h2d_blocks") is not None
    assert comparison.figure("g2_transfers.scopes") is None


def test_host_timeline_is_one_figure_not_thousands() -> None:
    """A G2 report's `g2_timeline` holds up to 1,024 bins per series: only its bin width is
    a figure, its series (lists) are not."""
    report = kvreplay.run_spec(EXAMPLES / "g2-restore-mooncake.yaml").report
    assert report is not None and len(report["summary"]["g2_timeline"]["d2h_blocks"]) > 100
    comparison = compare_reports(report, report)
    names = [f.name for f in comparison.figures if f.name.startswith("g2_timeline")]
    assert names == ["g2_timeline.bin_ms"]


def test_relative_change_from_zero() -> None:
    """From a base of 0 the relative change is undefined (None) unless nothing moved."""
    assert FigureDelta("x", 0, 0).relative == 0.0
    assert FigureDelta("x", 0, 5).relative is None
    assert FigureDelta("x", -4, -2).relative == 0.5


def test_join_is_skipped_for_another_trace(base_report: dict[str, Any]) -> None:
    """Rows whose identity differs (another trace) are never joined; the reason is given."""
    new = copy.deepcopy(base_report)
    new["per_request"][5]["input_length"] += 1
    join = compare_reports(base_report, new).requests
    assert join.skipped is not None and "input_length" in join.skipped
    assert "00000000-0000-0000-0000-000000000006" in join.skipped


def test_join_is_skipped_when_trace_digests_differ(base_report: dict[str, Any]) -> None:
    """Provenance trace digests that differ mean different traces, whatever the rows say."""
    base, new = copy.deepcopy(base_report), copy.deepcopy(base_report)
    base["meta"]["provenance"] = {"traces": [{"path": "t.jsonl", "digest": "sha256:aa"}]}
    new["meta"]["provenance"] = {"traces": [{"path": "t.jsonl", "digest": "sha256:bb"}]}
    assert "different traces" in (compare_reports(base, new).requests.skipped or "")


def test_join_counts_requests_in_one_run_only(base_report: dict[str, Any]) -> None:
    """A run that listed fewer requests: the others are counted, not compared; a request that
    did not complete in one run is matched but left out of the deltas."""
    new = copy.deepcopy(base_report)
    del new["per_request"][:10]
    new["per_request"][0]["terminal_status"] = "rejected"
    join = compare_reports(base_report, new).requests
    assert (join.matched, join.only_base, join.only_new, join.not_completed) == (190, 10, 0, 1)
    assert join.stats["ttft_ms"].count == 189


def test_text_output_is_pinned(base_report: dict[str, Any], slower_report: dict[str, Any],
                               snapshot: SnapshotAssertion) -> None:
    """The text table, join and gate lines of the example against its slower variant."""
    comparison = compare_reports(base_report, slower_report, top=5)
    results = evaluate_gates(comparison, [parse_gate(g) for g in GATES])
    assert to_text(comparison, results, LABELS) == snapshot


def test_json_output_is_pinned(base_report: dict[str, Any], slower_report: dict[str, Any],
                               json_snapshot: SnapshotAssertion) -> None:
    """The JSON document (the contract CI scripts read)."""
    comparison = compare_reports(base_report, slower_report, top=5)
    results = evaluate_gates(comparison, [parse_gate(g) for g in GATES])
    assert to_json(comparison, results, LABELS) == json_snapshot


def test_github_output_annotates_tripped_gates(base_report: dict[str, Any],
                                               slower_report: dict[str, Any]) -> None:
    """One `::error::` per tripped gate, naming figure, base, new and threshold (escaped)."""
    comparison = compare_reports(base_report, slower_report)
    results = evaluate_gates(comparison, [parse_gate(g) for g in GATES])
    errors = [line for line in to_github(comparison, results, LABELS).splitlines()
              if line.startswith("::error")]
    assert len(errors) == sum(r.tripped for r in results) == 2
    assert "mean_ttft_ms base 65.115, new 70.69" in errors[0]
    assert "threshold > +5%25" in errors[0]


def test_a_speculative_run_against_a_plain_one_shows_the_speedup() -> None:
    """compare of a plain run (BASE) and the same with MTP (NEW): which side speculated, its
    tokens per step, and factors above 1 where NEW is faster (latencies base / new, throughput
    new / base), in text and JSON; plain against plain has no speculation section."""
    path = EXAMPLES / "mtp-mooncake.yaml"
    mtp = kvreplay.run_spec(path).report
    plain = kvreplay.run_spec(path, overrides=["engine.workers.aggregated.speculation=null"]).report
    assert mtp is not None and plain is not None
    comparison = compare_reports(plain, mtp)
    speedup = comparison.speedup
    assert speedup is not None and (speedup.base_kind, speedup.new_kind) == (None, "mtp")
    factors = {f.figure: f for f in speedup.factors}
    tpot = factors["mean_tpot_ms"]
    assert tpot.factor == tpot.base / tpot.new > 1  # type: ignore[operator]
    throughput = factors["output_throughput_tok_s"]
    assert throughput.factor == throughput.new / throughput.base > 1  # type: ignore[operator]
    text = to_text(comparison, [], LABELS)
    assert f"speculation: BASE plain; NEW mtp, {speedup.new_tokens_per_step:.3g} tokens per " \
           "step" in text
    assert f"mean_tpot_ms x{tpot.factor:.3g}" in text
    doc = json.loads(to_json(comparison, [], LABELS))
    assert doc["speculation"]["new"]["kind"] == "mtp" and doc["speculation"]["base"]["kind"] is None
    assert "speculation" not in json.loads(to_json(compare_reports(plain, plain), [], LABELS))
    html = comparison_section(comparison, [], LABELS)
    assert "speculation: base.json (BASE): plain decoding; new.json (NEW): mtp, " in html
    assert f"<td>x{tpot.factor:.3g}</td>" in html
    assert "speedup of NEW" not in comparison_section(compare_reports(plain, plain), [], LABELS)


def test_g3_figures_are_compared() -> None:
    """g3-restore-mooncake without and with G3: the g3_offload block (cross-worker reads
    among it) is compared by dotted name, the G3 share of reuse too, and the request that G3
    restored is the one that moved."""
    example = EXAMPLES / "g3-restore-mooncake.yaml"
    off = kvreplay.run_spec(example,
                            overrides=["engine.workers.aggregated.kv_cache.g3_offload=null"])
    on = kvreplay.run_spec(example)
    assert off.report is not None and on.report is not None
    comparison = compare_reports(off.report, on.report)
    for name, value in (("g3_offload.read.completed_bytes", 2_000_000),
                        ("g3_offload.cross_worker_read_blocks", 0),
                        ("g3_offload.lookup_hits", 2),
                        ("first_admission_g3_reused_ratio", 8 / 36)):
        figure = comparison.figure(name)
        assert figure is not None and figure.base is None and figure.new == value, name
    assert "g3_offload.lookup_probes" in to_text(comparison, [], LABELS)
    (moved,) = comparison.requests.top
    assert moved.uuid.endswith("4") and moved.delta("ttft_ms") == 4.5
