"""Acceptance: the HTML report of example runs opens in a real headless Chromium, every chart
draws (points plotted, its run's colour on the canvas), nothing is logged as an error, nothing
but the file itself is requested, and a screenshot is kept (under pytest's tmp dir, and in
$KVREPLAY_ARTIFACTS when set)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_support import Chromium, chromium_path
from html_support import NO_G2, NO_G3, example_report, row

from kvreplay.html import render_html

# Counts, per chart, the canvas pixels near each run's colour (report.js COLORS[0], [1]).
PROBE = """
(() => {
  const runs = [[31, 111, 180], [209, 73, 91]];
  return Array.from(document.querySelectorAll('.plot[data-chart]')).map((el) => {
    const canvas = el.querySelector('canvas');
    const counts = runs.map(() => 0);
    if (canvas) {
      const d = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
      for (let i = 0; i < d.length; i += 4) {
        runs.forEach((c, r) => {
          if (d[i + 3] > 0 && Math.abs(d[i] - c[0]) < 40 && Math.abs(d[i + 1] - c[1]) < 40
              && Math.abs(d[i + 2] - c[2]) < 40) counts[r]++;
        });
      }
    }
    return {chart: el.dataset.chart, canvas: !!canvas, colour: counts,
            points: window.kvreplayCharts[el.dataset.chart]};
  });
})()
"""


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chromium]:
    executable = chromium_path()
    if executable is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium; .ci/run does)")
    profile = tmp_path_factory.mktemp("chromium-profile")  # a new, empty user data dir
    with Chromium(executable, profile) as chromium:
        chromium.open_page(1400, 900)
        yield chromium


def open_report(browser: Chromium, html: str, folder: Path, name: str,
                width: int = 1400) -> list[dict[str, Any]]:
    """Load the page `width` px wide, wait for its script, probe the charts and keep a
    screenshot."""
    page = folder / f"{name}.html"
    page.write_text(html, encoding="utf-8")
    browser.events.clear()
    browser.resize(width, 900)
    browser.navigate(page.as_uri())
    assert browser.evaluate("document.body.getAttribute('data-rendered')") == "1"
    charts: list[dict[str, Any]] = browser.evaluate(PROBE)
    shot = folder / f"{name}.png"
    browser.screenshot(shot)
    assert shot.stat().st_size > 10_000
    artifacts = os.environ.get("KVREPLAY_ARTIFACTS")
    if artifacts:
        os.makedirs(artifacts, exist_ok=True)
        shutil.copy(shot, artifacts)
        shutil.copy(page, artifacts)
    assert browser.console_errors() == []
    assert browser.requests() == [page.as_uri()]
    return charts


def test_example_report_draws_every_chart(browser: Chromium, tmp_path: Path) -> None:
    """kv-router-mooncake: all ten charts draw, the KV router's overlap chart among them."""
    html = render_html([("kv-router-mooncake", example_report("kv-router-mooncake"))])
    charts = open_report(browser, html, tmp_path, "kv-router-mooncake")
    assert len(charts) == html.count('class="plot"') == 10
    assert "routing-overlap" in {c["chart"] for c in charts}
    for chart in charts:
        assert chart["canvas"] and chart["points"] > 0, chart
        assert chart["colour"][0] > 20, chart


def test_two_runs_overlay_in_every_chart(browser: Chromium, tmp_path: Path) -> None:
    """Shared G2 against no G2: both runs' colours in every chart the second run has data for,
    and the G2 charts (restores, host copies, bandwidth, occupancy, per worker) for the
    first."""
    html = render_html([("shared G2", example_report("shared-g2-aggregated")),
                        ("no G2", example_report("shared-g2-aggregated", NO_G2))])
    charts = open_report(browser, html, tmp_path, "shared-g2-overlay")
    names = {c["chart"] for c in charts}
    assert {"g2-restores", "g2-workers", "g2-traffic-blocks", "g2-traffic-bytes",
            "g2-occupancy", "cdf-ttft", "timeline-load"} <= names
    assert len(charts) == 14  # no KV-router overlap chart: round robin
    for chart in charts:
        assert chart["canvas"] and chart["points"] > 0, chart
        assert chart["colour"][0] > 20, chart
        if not chart["chart"].startswith("g2-"):
            assert chart["colour"][1] > 20, chart


def test_g3_run_draws_its_tier(browser: Chromium, tmp_path: Path) -> None:
    """G3 against no G3 (g3-restore-mooncake): the G3 charts (restores from G3, copies,
    bandwidth, occupancy) draw for the first run, the reuse split has a G3 series, and the
    page holds the g3_offload figures."""
    html = render_html([("G3", example_report("g3-restore-mooncake")),
                        ("no G3", example_report("g3-restore-mooncake", NO_G3))])
    charts = open_report(browser, html, tmp_path, "g3-overlay")
    by_name = {c["chart"]: c for c in charts}
    assert {"g3-restores", "g3-traffic-blocks", "g3-traffic-bytes", "g3-occupancy"} <= set(by_name)
    for chart in charts:  # (no G3's host pool lines lie over G3's: only G3's charts are probed)
        assert chart["canvas"] and chart["points"] > 0, chart
        if chart["chart"].startswith("g3-"):
            assert chart["colour"][0] > 20 and chart["colour"][1] == 0, chart
    legend = [s["label"] for s in browser.evaluate(SWATCHES)["reuse-time"]]
    assert legend == ["G3: G1", "G3: G2 (host)", "G3: G3", "no G3: G1", "no G3: G2 (host)"]
    assert "<h2>G3 tier (below G2)</h2>" in html and "blocks read across workers" in html


def test_summary_only_report_opens_cleanly(browser: Chromium, tmp_path: Path) -> None:
    """No rows: the CDFs still draw (from percentiles) and the page logs no error."""
    report = example_report("disaggregated-hbm")
    report["per_request"] = []
    charts = open_report(browser, render_html([("summary only", report)]), tmp_path, "bare")
    assert {c["chart"] for c in charts} == {"cdf-ttft", "cdf-tpot", "cdf-itl", "cdf-e2e"}
    assert all(c["points"] > 0 and c["colour"][0] > 20 for c in charts), charts


# The results table's point column, top to bottom.
POINTS = ("Array.from(document.querySelectorAll('table.sortable tbody tr'))"
          ".map((tr) => Number(tr.cells[0].textContent))")


def sort_by(browser: Chromium, header: str) -> list[int]:
    """Click the results table's header named `header`; the point column after sorting."""
    clicked = browser.evaluate(
        "(() => { const th = Array.from(document.querySelectorAll('table.sortable th'))"
        f".find((h) => h.textContent === {header!r}); th.click(); "
        "return th.getAttribute('aria-sort'); })()")
    assert clicked in ("ascending", "descending")
    points: list[int] = browser.evaluate(POINTS)
    return points


def test_sweep_page_draws_every_chart(browser: Chromium, small_sweep: tuple[Path, Path],
                                      tmp_path: Path) -> None:
    """sweep.html of a small sweep: the two swept parameters' charts and the Pareto front draw
    in the first colour; the table sorts by a clicked header, both ways, skipped rows last."""
    _, out = small_sweep
    html = (out / "sweep.html").read_text(encoding="utf-8")
    charts = open_report(browser, html, tmp_path, "sweep")
    assert sorted(c["chart"] for c in charts) == ["param-0", "param-1", "pareto"]
    for chart in charts:
        assert chart["canvas"] and chart["points"] > 0, chart
        assert chart["colour"][0] > 20, chart
    assert browser.evaluate(POINTS) == [0, 1, 2, 3, 4]
    assert sort_by(browser, "p90_ttft_ms") == [3, 2, 0, 1, 4]  # 270, 275, 525, 525, none
    assert sort_by(browser, "p90_ttft_ms") == [0, 1, 2, 3, 4]  # descending; ties keep order
    assert sort_by(browser, "policy") == [4, 1, 3, 0, 2]  # "(base)" (the skipped point) first
    assert browser.console_errors() == []


# The legend swatches of every chart: per series, its label, CSS border style and colour and
# its background (a line series shows a short line of its dash; report.css `kv-line`).
SWATCHES = """
(() => Object.fromEntries(Array.from(document.querySelectorAll('.plot[data-chart]')).map((el) =>
  [el.dataset.chart, Array.from(el.querySelectorAll('.u-legend tr.u-series')).slice(1).map((tr) => {
    const m = getComputedStyle(tr.querySelector('.u-marker'));
    return {label: tr.querySelector('.u-label').textContent, line: tr.classList.contains('kv-line'),
            style: m.borderTopStyle, colour: m.borderTopColor, fill: m.backgroundColor,
            width: m.width};
  })])))()
"""


def test_series_of_one_run_are_told_apart(browser: Chromium, tmp_path: Path) -> None:
    """One run: the series of a chart (arrived / completed, in flight / waiting / router queue,
    G1 / G2 reuse) differ in colour and dash, and their legend swatches are short lines of
    that colour and dash. Two runs: a run's series share its colour, and their swatches differ
    in dash."""
    html = render_html([("kv-router-mooncake", example_report("kv-router-mooncake"))])
    open_report(browser, html, tmp_path, "one-run-series")
    swatches = browser.evaluate(SWATCHES)
    for chart in ("timeline-requests", "timeline-load"):
        lines = swatches[chart]
        assert len(lines) >= 2 and all(s["line"] and s["width"] == "26px" for s in lines), lines
        assert len({(s["style"], s["colour"]) for s in lines}) == len(lines), lines
        assert len({s["colour"] for s in lines}) == len(lines), lines
    overlay = render_html([("shared G2", example_report("shared-g2-aggregated")),
                           ("no G2", example_report("shared-g2-aggregated", NO_G2))])
    open_report(browser, overlay, tmp_path, "two-run-series")
    swatches = browser.evaluate(SWATCHES)
    for run in ("shared G2", "no G2"):
        lines = [s for s in swatches["timeline-load"] if s["label"].startswith(run + ":")]
        assert len(lines) >= 2 and len({s["colour"] for s in lines}) == 1, lines
        assert [s["style"] for s in lines][:2] == ["solid", "dashed"], lines


def test_cdfs_start_at_zero(browser: Chromium, tmp_path: Path) -> None:
    """Every latency CDF's x axis starts at 0 ms and its curve at probability 0."""
    html = render_html([("kv-router-mooncake", example_report("kv-router-mooncake"))])
    open_report(browser, html, tmp_path, "cdfs")
    ranges = browser.evaluate("window.kvreplayRanges")
    for chart in ("cdf-ttft", "cdf-tpot", "cdf-itl", "cdf-e2e"):
        assert ranges[chart]["x"][0] == 0, (chart, ranges[chart])
        assert ranges[chart]["y"] == [0, 1.02], (chart, ranges[chart])
    first = browser.evaluate("kvreplayPlots.DATA.runs[0].cdf.ttft_ms.p[0]")
    assert first == 0


def _kv_router_rows(n: int) -> list[dict[str, Any]]:
    """`n` rows whose router gave up 0 blocks on 97 % of its decisions and 1 to 79 on the rest
    (the spread of the 12k-request conversation trace under the KV router)."""
    rows = []
    for i in range(n):
        gap = 0 if i % 33 else 1 + (i // 33) % 79
        rows.append(row(i + 1, i * 10.0, i * 10.0 + 50.0, worker=i % 4, routing_history=[
            {"pool": "agg", "logical_worker_id": i % 4, "dp_rank": 0, "outcome": "immediate",
             "queue_entered_at_ms": None, "queue_wait_ms": 0.0, "reported_overlap_tokens": 0,
             "selected_overlap_blocks": 100 - gap, "best_available_overlap_blocks": 100}]))
    return rows


def test_overlap_given_up_on_12k_rows_is_binned(browser: Chromium, tmp_path: Path) -> None:
    """12,000 routing decisions giving up 0 to 79 blocks: 8 bars (0, 1, 2-3 ... 64-127), not
    80 categories, each with its share written above it, and the x ticks all shown."""
    report = {"summary": {"num_requests": 12_000}, "per_request": _kv_router_rows(12_000),
              "meta": {}}
    html = render_html([("kv router 12k", report)])
    charts = {c["chart"]: c for c in open_report(browser, html, tmp_path, "overlap-12k")}
    assert charts["routing-overlap"]["points"] == 8
    bins = browser.evaluate("kvreplayPlots.DATA.runs[0].routing.overlap_bins")
    assert [b[0] for b in bins][::7] == ["0", "64\u2013127"] and sum(b[1] for b in bins) == 12_000
    assert browser.evaluate("window.kvreplayRanges['routing-overlap'].x") == [-0.5, 7.5]


SCROLL = """
(() => { const box = document.querySelector('.wide'), note = box.nextElementSibling;
  return {page: document.documentElement.scrollWidth, view: document.documentElement.clientWidth,
          fits: box.scrollWidth <= box.clientWidth + 1, scrolls: box.classList.contains('scrolls'),
          overflow: getComputedStyle(box).overflowX, note: !note.hidden,
          sticky: getComputedStyle(box.querySelector('td')).position}; })()
"""


def test_sweep_page_labels_and_table_fit(browser: Chromium, small_sweep: tuple[Path, Path],
                                         tmp_path: Path) -> None:
    """The sweep page at 1400 and 900 px: nothing wider than the page; the results table fits
    or scrolls inside it (then a note says so, the point column stays); a log axis's minor
    splits have blank labels (no dash under the decade's label); the Pareto legend tells filled
    (meets the SLA) from hollow (misses it) markers."""
    _, out = small_sweep
    html = (out / "sweep.html").read_text(encoding="utf-8")
    for width in (1400, 900):
        open_report(browser, html, tmp_path, f"sweep-{width}", width)
        state = browser.evaluate(SCROLL)
        assert state["page"] <= state["view"], state
        assert state["fits"] or (state["scrolls"] and state["note"]
                                 and state["overflow"] == "auto"), state
        assert state["sticky"] == "sticky"
    assert browser.evaluate("kvreplayPlots.ticks(null, [100, null, 1000])") == ["100", "", "1000"]
    legend = {s["label"]: s for s in browser.evaluate(SWATCHES)["pareto"]}
    assert legend["meets SLA"]["fill"] != legend["misses SLA"]["fill"]
    assert legend["SLA bound"]["line"] and legend["SLA bound"]["style"] == "dashed"


def test_comparison_page_opens_cleanly(browser: Chromium, tmp_path: Path) -> None:
    """`compare --html`'s page: every chart draws for both runs, the verdict leads the page,
    nothing is logged as an error."""
    from kvreplay.compare import compare_reports, evaluate_gates, parse_gate
    from kvreplay.html.compare_page import render_comparison_html

    base, new = (example_report("shared-g2-aggregated"),
                 example_report("shared-g2-aggregated", NO_G2))
    comparison = compare_reports(base, new)
    results = evaluate_gates(comparison, [parse_gate("mean_ttft_ms > +5%")])
    html = render_comparison_html([("shared G2", base), ("no G2", new)], comparison, results)
    charts = open_report(browser, html, tmp_path, "comparison")
    assert all(c["canvas"] and c["points"] > 0 for c in charts), charts
    verdict = browser.evaluate("document.querySelector('.verdict h3').textContent")
    assert verdict.startswith(("FAILED", "Passed"))
    assert browser.evaluate("document.title") == "kvreplay comparison: shared G2 vs no G2"


def test_replicas_are_drawn_under_the_load_chart(browser: Chromium, tmp_path: Path) -> None:
    """A scaled run against the same spec with static pools: the replicas chart draws the
    scaled run's steps (the static run has none)."""
    html = render_html([("scaled", example_report("scaling-schedule")),
                        ("static", example_report("scaling-schedule", "scaling=null"))])
    charts = open_report(browser, html, tmp_path, "scaling-overlay")
    (replicas,) = [c for c in charts if c["chart"] == "timeline-replicas"]
    assert replicas["canvas"] and replicas["points"] > 0, replicas
    assert replicas["colour"][0] > 20 and replicas["colour"][1] == 0, replicas


def test_speculative_run_draws_acceptance_and_itl(browser: Chromium, tmp_path: Path) -> None:
    """mtp-mooncake against the same run without speculation: the speculation section's two
    charts (acceptance per draft position, token gaps with speculation) draw for the MTP run
    only; every other chart overlays both runs."""
    plain = example_report("mtp-mooncake", "engine.workers.aggregated.speculation=null")
    html = render_html([("mtp", example_report("mtp-mooncake")), ("plain", plain)])
    charts = open_report(browser, html, tmp_path, "mtp-overlay")
    by_name = {c["chart"]: c for c in charts}
    assert {"spec-acceptance", "spec-itl"} <= set(by_name)
    for chart in charts:
        assert chart["canvas"] and chart["points"] > 0, chart
        assert chart["colour"][0] > 20, chart
    for name in ("spec-acceptance", "spec-itl"):
        assert by_name[name]["colour"][1] == 0, by_name[name]
    assert by_name["cdf-tpot"]["colour"][1] > 20
