"""The HTML report's data section: pinned for the examples, derived as documented, bounded in
size, deterministic, and refused with a path for reports of the wrong shape."""

from __future__ import annotations

import json
import random
import re
from typing import Any

import pytest
from html_support import NO_G2, embedded_data, example_report, row

from kvreplay.html import ReportShapeError, data_json, page_data, render_html
from kvreplay.html.data import overlap_bins
from kvreplay.html.series import (
    CDF_POINTS,
    TIMELINE_POINTS,
    cdf,
    cumulative,
    make_grid,
    nice_width,
    occupancy,
    rounded,
    summary_cdf,
)


def pretty(data: Any) -> str:
    return json.dumps(data, sort_keys=True, indent=1) + "\n"


def test_data_section_of_an_example_is_pinned(json_snapshot) -> None:  # type: ignore[no-untyped-def]
    """g2-restore-mooncake's data section (meta aside: it holds wall-clock figures)."""
    report = example_report("g2-restore-mooncake")
    report["meta"] = {"kvreplay_version": "pinned"}
    assert pretty(page_data([("g2-restore", report)])) == json_snapshot


def test_data_section_of_two_overlaid_runs_is_pinned(json_snapshot) -> None:  # type: ignore[no-untyped-def]
    """Shared G2 against the same deployment without G2: one grid, two runs."""
    runs = [(label, example_report("shared-g2-aggregated", *extra))
            for label, extra in (("shared G2", ()), ("no G2", (NO_G2,)))]
    for _, report in runs:
        report["meta"] = {"kvreplay_version": "pinned"}
    data = page_data(runs)
    assert [r["label"] for r in data["runs"]] == ["shared G2", "no G2"]
    assert data["runs"][0]["g2"] is not None and data["runs"][1]["g2"] is None
    assert pretty(data) == json_snapshot


def test_the_page_embeds_exactly_the_data_section() -> None:
    """What the page draws from is page_data, byte for byte after parsing."""
    report = example_report("kv-router-mooncake")
    html = render_html([("kv", report)])
    assert embedded_data(html) == json.loads(data_json(page_data([("kv", report)])))


def test_same_report_same_bytes() -> None:
    """Rendering is deterministic, and does not change the report it reads."""
    report = example_report("disaggregated-hbm")
    before = json.dumps(report, sort_keys=True)
    assert render_html([("a", report)]) == render_html([("a", report)])
    assert json.dumps(report, sort_keys=True) == before


def test_row_order_does_not_matter() -> None:
    """Series are sorted from the rows, not read in file order."""
    report = example_report("kv-router-mooncake")
    shuffled = dict(report, per_request=list(reversed(report["per_request"])))
    assert page_data([("x", report)]) == page_data([("x", shuffled)])


def test_latency_cdfs_follow_the_completed_rows() -> None:
    """The TTFT CDF ends at the summary's max TTFT with probability 1, and ITL comes from the
    summary percentiles (rows hold no token gaps)."""
    report = example_report("kv-router-mooncake")
    (run,) = page_data([("kv", report)])["runs"]
    ttft = run["cdf"]["ttft_ms"]
    assert ttft["source"] == "requests"
    assert ttft["x"][-1] == report["summary"]["max_ttft_ms"] and ttft["p"][-1] == 1.0
    assert ttft["x"][0] == report["summary"]["min_ttft_ms"]
    assert run["cdf"]["itl_ms"]["source"] == "summary"
    assert run["cdf"]["itl_ms"]["p"] == [0.0, 0.5, 0.75, 0.9, 0.95, 0.99, 1.0]


def test_timeline_counts_every_request() -> None:
    """The cumulative arrivals and completions end at the row counts."""
    report = example_report("kv-router-mooncake")
    (run,) = page_data([("kv", report)])["runs"]
    assert run["timeline"]["arrived"][-1] == len(report["per_request"])
    completed = sum(r["terminal_status"] == "completed" for r in report["per_request"])
    assert run["timeline"]["completed"][-1] == completed


def test_workers_sum_to_the_routing_decisions() -> None:
    """Per-worker requests add up to the routing entries of every row."""
    report = example_report("disaggregated-hbm")
    (run,) = page_data([("pd", report)])["runs"]
    routed = sum(len(r["routing_history"]) for r in report["per_request"])
    assert sum(w["requests"] for w in run["workers"]) == routed == run["routing"]["decisions"]
    assert {w["name"].split()[0] for w in run["workers"]} == {"prefill", "decode"}


def test_reuse_and_host_series_from_hand_made_rows() -> None:
    """First-admission reuse per bin and per worker, split G1/host, from rows built here."""
    rows = [row(1, 0.0, 10.0, reused=50, host=20, worker=0),
            row(2, 0.0, 10.0, reused=0, host=0, worker=1),
            row(3, 50.0, 60.0, reused=100, host=0, worker=1)]
    report = {"summary": {"num_requests": 3, "g2_transfers": {"d2h_blocks": 4, "scopes": ["x"]}},
              "per_request": rows, "meta": {}}
    (run,) = page_data([("hand", report)])["runs"]
    workers = {w["name"]: w for w in run["workers"]}
    assert workers["agg 0"]["reuse_ratio"] == 0.5 and workers["agg 0"]["host_ratio"] == 0.2
    assert workers["agg 1"]["reuse_ratio"] == 0.5 and workers["agg 1"]["host_ratio"] == 0.0
    g1 = [v for v in run["reuse"]["g1"] if v is not None]
    host = [v for v in run["reuse"]["host"] if v is not None]
    assert g1 == [0.15, 1.0] and host == [0.1, 0.0]
    assert sum(run["reuse"]["admissions"]) == 3
    assert run["g2"]["totals"] == {"d2h_blocks": 4}
    assert sum(run["g2"]["restored_tokens_per_s"]) > 0


def timeline(bins: int, width: float = 500.0, **overrides: Any) -> dict[str, Any]:
    """A g2_timeline of `bins` bins: 2 blocks of 1 MB stored and 1 restored per bin, two pools
    (capacity 10 and 30) filling one block per bin each."""
    out: dict[str, Any] = {
        "bin_ms": width, "d2h_blocks": [2] * bins, "d2h_bytes": [2_000_000] * bins,
        "h2d_blocks": [1] * bins, "h2d_bytes": [1_000_000] * bins,
        "pools": [{"name": name, "scope": "dp_rank_local", "capacity_blocks": capacity,
                   "used_blocks": [min(k + 1, capacity) for k in range(bins)],
                   "evicted_blocks": [1] * bins}
                  for name, capacity in (("agg 0", 10), ("agg 1", 30))]}
    out.update(overrides)
    return out


def g2_report(value: Any) -> dict[str, Any]:
    return {"summary": {"g2_transfers": {"d2h_blocks": 1}, "g2_timeline": value},
            "per_request": [], "meta": {}}


def test_host_traffic_from_a_hand_made_timeline() -> None:
    """Per-bin counts become per-second rates at bin ends; occupancy is the share of all
    pools' capacity, with the fullest and emptiest pool beside it."""
    (run,) = page_data([("hand", g2_report(timeline(4)))])["runs"]
    traffic = run["g2"]["timeline"]
    assert traffic["t_s"] == [0.5, 1.0, 1.5, 2.0]
    assert traffic["stored_blocks_per_s"] == [4.0] * 4
    assert traffic["restored_blocks_per_s"] == [2.0] * 4
    assert traffic["evicted_blocks_per_s"] == [4.0] * 4
    assert traffic["stored_gb_per_s"] == [0.004] * 4 and traffic["restored_gb_per_s"] == [0.002] * 4
    assert traffic["occupancy"] == [0.05, 0.1, 0.15, 0.2]
    assert traffic["occupancy_max"] == [0.1, 0.2, 0.3, 0.4]
    assert traffic["occupancy_min"] == pytest.approx([k / 30 for k in (1, 2, 3, 4)], rel=1e-5)
    assert traffic["pools"] == 2
    assert not any("g2_timeline" in note for note in run["notes"])


def test_host_traffic_of_a_long_timeline_is_downsampled_exactly() -> None:
    """More bins than the page keeps: neighbours merge, rates stay rates (the totals are
    kept) and occupancy is read at the end of each merged span."""
    (run,) = page_data([("long", g2_report(timeline(1000, 1.0)))])["runs"]
    traffic = run["g2"]["timeline"]
    assert len(traffic["t_s"]) == 250 and traffic["t_s"][-1] == 1.0
    assert traffic["stored_blocks_per_s"] == [2000.0] * 250
    assert traffic["occupancy_max"][:3] == [0.4, 0.8, 1.0]


def test_example_host_traffic_adds_up_to_the_totals() -> None:
    """g2-restore-mooncake: the stored and restored rates times each bin's span give back
    the report's block totals."""
    report = example_report("g2-restore-mooncake")
    (run,) = page_data([("g2", report)])["runs"]
    traffic = run["g2"]["timeline"]
    spans = [b - a for a, b in zip([0.0, *traffic["t_s"]], traffic["t_s"], strict=False)]
    totals = report["summary"]["g2_transfers"]
    for rate, key in (("stored_blocks_per_s", "d2h_blocks"), ("restored_blocks_per_s",
                                                             "h2d_blocks")):
        assert sum(r * s for r, s in zip(traffic[rate], spans, strict=True)) == pytest.approx(
            totals[key])


def test_g3_reuse_split_and_tier_figures() -> None:
    """g3-restore-mooncake: the host share of reuse splits into G2 and G3 (the 8 tokens of
    the last request came up from G3), the restores from G3 per second add back to them, the
    g3_offload block is flattened as the tables read it, and the G3 timeline's write and read
    rates add back to the block's bytes; a run without G3 has no `g3` and no split."""
    report = example_report("g3-restore-mooncake")
    (run,) = page_data([("g3", report)])["runs"]
    reuse, g3 = run["reuse"], run["g3"]
    for g1, host, g2_only, from_g3 in zip(reuse["g1"], reuse["host"], reuse["g2"], reuse["g3"],
                                          strict=True):
        if host is not None:
            assert g2_only + from_g3 == pytest.approx(host) and g1 is not None
    assert max(v for v in reuse["g3"] if v is not None) > 0 and not any(reuse["g2"])
    width_s = page_data([("g3", report)])["ratio_grid"]["bin_s"]
    assert sum(g3["restored_tokens_per_s"]) * width_s == pytest.approx(8)
    block = report["summary"]["g3_offload"]
    assert report["summary"]["first_admission_g3_reused_ratio"] == 8 / 36
    assert g3["totals"]["read.completed_jobs"] == block["read"]["completed_jobs"] == 1
    assert g3["totals"]["lookup_probes"] == block["lookup_probes"]
    traffic = g3["timeline"]
    spans = [b - a for a, b in zip([0.0, *traffic["t_s"]], traffic["t_s"], strict=False)]
    for rate, key in (("stored_gb_per_s", "write"), ("restored_gb_per_s", "read")):
        moved = sum(r * s for r, s in zip(traffic[rate], spans, strict=True)) * 1e9
        assert moved == pytest.approx(block[key]["completed_bytes"])
    html = render_html([("g3", report)])
    assert html.count('data-chart="g3-') == 4 and "brought up from G3" in html
    (plain,) = page_data([("g2", example_report("g2-restore-mooncake"))])["runs"]
    assert "g3" not in plain and "g3" not in plain["reuse"] and "G3 tier" not in render_html(
        [("g2", example_report("g2-restore-mooncake"))])


def test_a_report_without_the_timeline_says_so() -> None:
    """A G2 report written before g2_timeline: the totals and restores still show, the
    traffic and occupancy charts say what is missing."""
    report = example_report("g2-restore-mooncake")
    del report["summary"]["g2_timeline"]
    (run,) = page_data([("old", report)])["runs"]
    assert run["g2"]["timeline"] is None
    assert any("no summary.g2_timeline" in note for note in run["notes"])
    html = render_html([("old", report)])
    assert html.count("Not in this report: summary.g2_timeline") == 3
    assert 'data-chart="g2-restores"' in html


def test_summary_only_report_renders_what_exists() -> None:
    """No rows: CDFs through the summary percentiles, no timeline, and the page says so."""
    report = example_report("kv-router-mooncake")
    report["per_request"] = []
    (run,) = page_data([("summary only", report)])["runs"]
    assert run["cdf"]["ttft_ms"]["source"] == "summary"
    assert run["timeline"] is None and run["workers"] is None
    assert any("per-request rows: absent" in note for note in run["notes"])
    html = render_html([("summary only", report)])
    assert "Not in this report: needs per-request rows" in html
    assert 'data-chart="cdf-ttft"' in html and 'data-chart="timeline-load"' not in html


def test_a_run_without_rows_overlays_one_with_rows() -> None:
    """Two runs, one summary-only: the timeline grid comes from the run that has rows."""
    full = example_report("kv-router-mooncake")
    bare = dict(example_report("kv-router-mooncake"), per_request=[])
    data = page_data([("full", full), ("bare", bare)])
    assert data["timeline"] is not None
    assert data["runs"][0]["timeline"] is not None and data["runs"][1]["timeline"] is None


def test_unlisted_requests_are_mentioned() -> None:
    """Requests counted in the summary but never listed (never ended) get a note."""
    report = {"summary": {"num_requests": 5}, "per_request": [row(1, 0.0, 4.0)], "meta": {}}
    (run,) = page_data([("x", report)])["runs"]
    assert any(note.startswith("4 request(s) never ended") for note in run["notes"])


def test_large_runs_are_downsampled() -> None:
    """5,000 rows: CDFs hold CDF_POINTS points (min and max kept), timelines at most
    TIMELINE_POINTS bins."""
    rng = random.Random(7)
    rows = []
    for i in range(5000):
        arrival = rng.uniform(0.0, 60_000.0)
        rows.append(row(i + 1, arrival, arrival + rng.expovariate(1 / 800.0), worker=i % 8))
    report = {"summary": {"num_requests": 5000}, "per_request": rows, "meta": {}}
    data = page_data([("big", report)])
    (run,) = data["runs"]
    e2e = run["cdf"]["e2e_latency_ms"]
    assert len(e2e["x"]) == CDF_POINTS + 1  # and the start at probability 0
    values = sorted(r["e2e_latency_ms"] for r in rows)
    assert e2e["x"][0] == pytest.approx(values[0], rel=1e-5)
    assert e2e["x"][-1] == pytest.approx(values[-1], rel=1e-5)
    assert len(data["timeline"]["t_s"]) <= TIMELINE_POINTS
    assert len(run["timeline"]["in_flight"]) == len(data["timeline"]["t_s"])


def test_cdf_ranks_and_probabilities() -> None:
    """Small samples are kept whole; the curve starts at probability 0 at the min (it rises
    from the axis, however few the samples) and reaches 1 at the max."""
    assert cdf([3.0, 1.0, 2.0]) == {"x": [1.0, 1.0, 2.0, 3.0], "p": [0.0, 0.333333, 0.666667, 1.0]}
    assert cdf([]) is None
    big = cdf([float(i) for i in range(10_000)])
    assert big is not None and big["x"][0] == 0.0 and big["x"][-1] == 9999.0
    assert big["p"][0] == 0.0 and big["p"] == sorted(big["p"])


def test_overlap_given_up_in_doubling_bins() -> None:
    """Gaps 0..79 (a 12k-row KV-router run's spread): 8 bins, 0, 1, 2-3 ... 64-127, their counts
    summing to the decisions; without routing credits, no bins."""
    shortfall = [(gap, 1000 if gap == 0 else 3) for gap in range(80)]
    bins = overlap_bins(shortfall)
    assert [label for label, _ in bins] == ["0", "1", "2\u20133", "4\u20137", "8\u201315",
                                            "16\u201331", "32\u201363", "64\u2013127"]
    assert [count for _, count in bins] == [1000, 3, 6, 12, 24, 48, 96, 48]
    assert overlap_bins([(5, 2)]) == [["0", 0], ["1", 0], ["2\u20133", 0], ["4\u20137", 2]]
    assert overlap_bins([]) == []


def test_summary_cdf_keeps_x_sorted() -> None:
    """A sketch median a hair below the exact min does not fold the line back."""
    summary = {"min_itl_ms": 5.0, "median_itl_ms": 4.997, "p75_itl_ms": 6.0, "max_itl_ms": 9.0}
    assert summary_cdf(summary, "itl") == {"x": [5.0, 5.0, 6.0, 9.0], "p": [0.0, 0.5, 0.75, 1.0]}
    assert summary_cdf({}, "itl") is None


def test_occupancy_is_the_time_weighted_mean() -> None:
    """[0, 10) and [5, 15) on 5 ms bins: 1, 2, 1 requests on average."""
    grid = make_grid(0.0, 14.0, 3)
    assert (grid.start, grid.width, grid.bins) == (0.0, 5.0, 3)
    assert occupancy([0.0, 5.0], [10.0, 15.0], grid) == [1.0, 2.0, 1.0]
    assert occupancy([1.0], [3.5], grid) == [0.5, 0.0, 0.0]
    assert cumulative([0.0, 5.0, 14.0], grid) == [2, 2, 3]


def test_grid_covers_the_last_instant() -> None:
    """A request ending exactly on a bin edge still falls inside the grid."""
    grid = make_grid(0.0, 10.0, 2)
    assert grid.start + grid.bins * grid.width > 10.0
    assert nice_width(7.0, 1) == 10.0 and nice_width(2.1, 1) == 2.5 and nice_width(0.0, 5) == 0.001


@pytest.mark.parametrize(("report", "message"), [
    ({"summary": []}, "summary: expected an object, found an array"),
    ({"summary": {}, "meta": 3}, "meta: expected an object, found a number"),
    ({"summary": {}, "per_request": {"a": 1}}, "per_request: expected an array"),
    ({"summary": {}, "per_request": [1]}, "per_request[0]: expected an object"),
    ({"summary": {}, "per_request": [row(1, 0.0, 1.0, arrival_time_ms="0")]},
     "per_request[0].arrival_time_ms: expected a number, found a string"),
    ({"summary": {}, "per_request": [row(1, 0.0, 1.0, input_length=True)]},
     "per_request[0].input_length: expected an integer, found a boolean"),
    ({"summary": {}, "per_request": [row(1, 0.0, 1.0, routing_history=[{"pool": 1}])]},
     "per_request[0].routing_history[0].pool: expected a string, found a number"),
    ({"summary": {"g2_transfers": [1]}}, "summary.g2_transfers: expected an object"),
    (g2_report(3), "summary.g2_timeline: expected an object, found a number"),
    (g2_report(timeline(2, 0.0)), "summary.g2_timeline.bin_ms: expected a positive number"),
    (g2_report(timeline(2, 5e-324)),
     "summary.g2_timeline.bin_ms: 4.94066e-324 ms is not a bin width a replay writes"),
    (g2_report(timeline(2, 1e300)),
     "summary.g2_timeline.bin_ms: 1e+300 ms is not a bin width a replay writes"),
    (g2_report(timeline(2, 1e-6, d2h_blocks=[1.7e308, 1.7e308])),
     "summary.g2_timeline.d2h_blocks: counts too large for a rate"),
    (g2_report(timeline(2, pools=[{"capacity_blocks": 5e-324, "used_blocks": [1, 2],
                                   "evicted_blocks": [0, 0]}])),
     "summary.g2_timeline.pools[].used_blocks / capacity_blocks: counts too large"),
    ({"summary": {}, "per_request": [row(1, 0.0, 1.0), row(2, 0.0, 1e308)]},
     "per_request[1].terminal_time_ms: 1e+308 ms is past the engine's horizon of 2**62 ns"),
    ({"summary": {}, "per_request": [row(1, -1e308, 1.0)]},
     "per_request[0].arrival_time_ms: -1e+308 ms is past the engine's horizon"),
    ({"summary": {}, "per_request": [row(1, 0.0, 1.0, routing_history=[
        {"pool": "agg", "queue_entered_at_ms": 0.0, "queue_wait_ms": 1e308}])]},
     "per_request[0].routing_history[0].queue_wait_ms: 1e+308 ms is past the engine's"),
    ({"summary": {"g3_offload": {"read": {}}, "g3_timeline": timeline(2)}},
     "summary.g3_timeline.write_blocks: expected an array, found null"),
    ({"summary": {"g3_offload": 1}}, "summary.g3_offload: expected an object"),
    (g2_report(timeline(2, d2h_bytes=[1])),
     "summary.g2_timeline.d2h_bytes: 1 bins where d2h_blocks has 2"),
    (g2_report(timeline(2, h2d_blocks=None)),
     "summary.g2_timeline.h2d_blocks: expected an array, found null"),
    (g2_report(timeline(2, pools=[{"capacity_blocks": 1, "used_blocks": ["1", 2],
                                   "evicted_blocks": [0, 0]}])),
     "summary.g2_timeline.pools[0].used_blocks[0]: expected a number, found a string"),
])
def test_bad_shapes_name_their_path(report: dict[str, Any], message: str) -> None:
    """A report not shaped as kvreplay writes it is refused with the JSON path, and the run."""
    good = {"summary": {}, "per_request": [], "meta": {}}
    with pytest.raises(ReportShapeError, match=re.escape(message)) as caught:
        render_html([("good", good), ("bad", report)])
    assert caught.value.run == 1


def test_labels_and_strings_are_escaped() -> None:
    """A label or meta value cannot close the page's script or inject markup."""
    report = {"summary": {"kv_eviction_policy": "</script><b>x"}, "per_request": [],
              "meta": {"config": "<img src=x>"}}
    html = render_html([("<script>alert(1)</script>", report)])
    assert "<script>alert(1)" not in html and "<img src=x>" not in html
    assert html.count("</script>") == 3  # the data, uPlot and the report script
    assert embedded_data(html)["runs"][0]["summary"]["kv_eviction_policy"] == "</script><b>x"


def test_no_run_is_an_error() -> None:
    """render_html needs at least one run."""
    with pytest.raises(ValueError, match="at least one run"):
        render_html([])


def _telemetry(ranks: int, samples: int) -> dict[str, Any]:
    rows = [{"worker_id": w, "dp_rank": 0, "active_blocks": w, "inactive_blocks": 1,
             "total_blocks": 10, "active_cache_usage": w / 10, "physical_cache_usage": (w + 1) / 10,
             "running_requests": w, "waiting_requests": 2 * w} for w in range(ranks)]
    return {"sample_interval_ms": 100.0, "samples": [
        {"sample_ordinal": k, "kind": "periodic", "interval_start_ms": 100.0 * (k - 1),
         "sampled_at_ms": 100.0 * k, "prefill_scheduler_metrics": [],
         "decode_scheduler_metrics": rows, "router_pending_prefill_requests": 0,
         "router_pending_decode_requests": k % 2} for k in range(samples)]}


def test_telemetry_charts_follow_the_samples() -> None:
    """The telemetry section draws each rank's usage, queue and batch at the sample times;
    beyond 8 ranks as mean, largest and smallest; at most 512 points (every k-th sample, the
    last kept); a run without samples has no telemetry key and no section."""
    report = example_report("kv-router-mooncake")
    assert "telemetry" not in page_data([("a", report)])["runs"][0]
    assert "Engine telemetry" not in render_html([("a", report)])
    report["telemetry"] = _telemetry(3, 4)
    run = page_data([("a", report)])["runs"][0]["telemetry"]
    assert run["t_s"] == [0.0, 0.1, 0.2, 0.3] and run["names"] == ["agg 0", "agg 1", "agg 2"]
    assert run["usage"] == [[0.0] * 4, [0.1] * 4, [0.2] * 4]
    assert run["waiting"][2] == [4.0] * 4 and run["router_queue"] == [0.0, 1.0, 0.0, 1.0]
    assert 'data-chart="telemetry-usage"' in render_html([("a", report)])
    report["telemetry"] = _telemetry(12, 2000)
    run = page_data([("a", report)])["runs"][0]["telemetry"]
    assert run["summarized"] and run["names"] == ["mean", "largest", "smallest"]
    assert run["running"][1][0] == 11.0 and run["running"][2][0] == 0.0
    assert len(run["t_s"]) <= 513 and run["t_s"][-1] == 199.9 and run["samples"] == 2000


def test_a_scaled_run_carries_its_replicas_and_lifecycle() -> None:
    """scaling-schedule (1 -> 4 -> 2 workers): replicas per pool as steps to the end of the run
    (one point per instant: the last count there), every lifecycle operation as a row, a
    replicas card under the load chart and a folded lifecycle table; a static run's data has
    no `scaling` key and its page no replicas card."""
    scaled = example_report("scaling-schedule")
    static = example_report("scaling-schedule", "scaling=null")
    data = page_data([("scaled", scaled), ("static", static)])
    mine, theirs = data["runs"]
    assert "scaling" not in theirs
    agg = mine["scaling"]["pools"]["agg"]
    end = scaled["summary"]["duration_ms"] / 1000.0
    assert agg["t_s"][0] == 0.0 and agg["t_s"][-1] == end
    assert list(zip(agg["t_s"], agg["provisioned"], agg["active"], agg["draining"],
                    strict=True))[:4] == [(0.0, 1, 1, 0), (5.0, 4, 1, 0), (7.0, 4, 4, 0),
                                          (30.0, 2, 2, 2)]
    assert agg["draining"][-1] == 0 and agg["active"][-1] == 2
    operations = mine["scaling"]["operations"]
    assert len(operations) == len(scaled["summary"]["scaling"]["lifecycle_operations"]) == 7
    assert operations[0] == [5000.0, "agg", "planner_scale",
                             "worker 1: new \u2192 starting; worker 2: new \u2192 starting; "
                             "worker 3: new \u2192 starting"]
    html = render_html([("scaled", scaled), ("static", static)])
    assert html.count('data-chart="timeline-replicas"') == 1
    assert "lifecycle operations (7; policy schedule, 2 tick(s))" in html
    assert 'data-chart="timeline-replicas"' not in render_html([("static", static)])


def test_a_misshapen_scaling_block_is_refused_with_its_path() -> None:
    report = example_report("scaling-schedule")
    report["summary"]["scaling"]["replicas"]["agg"][1] = [5000.0, 1]
    with pytest.raises(ReportShapeError, match=r"summary.scaling.replicas.agg\[1\]"):
        page_data([("bad", report)])


def test_speculation_data_only_for_a_speculative_run() -> None:
    """An MTP run's data: acceptance per position as the summary has it, and the token-gap
    CDF jumping at 0 ms by the share of gaps inside a burst, then rising through the step
    gaps' percentiles to 1; a plain run's data has no speculation key."""
    report = example_report("mtp-mooncake")
    block = report["summary"]["speculation"]
    spec = page_data([("mtp", report)])["runs"][0]["speculation"]
    assert spec["positions"] == ["1", "2"]
    assert spec["acceptance_rate"] == [p["acceptance_rate"]
                                       for p in block["acceptance_by_position"]]
    assert spec["itl"]["x"][:2] == [0.0, 0.0]
    assert spec["itl"]["p"][1] == spec["burst_share"] > 0.5 and spec["itl"]["p"][-1] == 1.0
    assert spec["step_itl"]["x"][0] == rounded(block["min_step_itl_ms"])
    plain = example_report("mtp-mooncake", "engine.workers.aggregated.speculation=null")
    assert "speculation" not in page_data([("plain", plain)])["runs"][0]
