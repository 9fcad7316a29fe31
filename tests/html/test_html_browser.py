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
from html_support import NO_G2, example_report

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


def open_report(browser: Chromium, html: str, folder: Path, name: str) -> list[dict[str, Any]]:
    """Load the page, wait for its script, probe the charts and keep a screenshot."""
    page = folder / f"{name}.html"
    page.write_text(html, encoding="utf-8")
    browser.events.clear()
    browser.resize(1400, 900)
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
