"""The sweep page: its data section pinned for a small sweep, the Pareto front computed as
defined (ties, dominated points, missing figures), the axes charted as numbers or categories,
nothing fetched, the same bytes for the same folder, and folders of the wrong shape refused
with one line naming the file."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from html_support import embedded_data, fetched_urls

from kvreplay.html import data_json, pareto_front, render_sweep_html, sweep_data
from kvreplay.html.page import CSP
from kvreplay.html.sweep_data import short_names
from kvreplay.sweep.folder import ResultsError, SweepResults, read_results


def pretty(data: Any) -> str:
    return json.dumps(data, sort_keys=True, indent=1) + "\n"


def pinned(folder: Path) -> SweepResults:
    """The folder's results with the kvreplay version pinned (it changes with releases)."""
    results = read_results(str(folder))
    assert results.manifest is not None
    return SweepResults(results.rows, results.best,
                        {**results.manifest, "kvreplay_version": "pinned"})


def test_data_section_of_a_small_sweep_is_pinned(small_sweep: tuple[Path, Path],
                                                 json_snapshot) -> None:  # type: ignore[no-untyped-def]
    """4 points that ran (2 meet the SLA) and 1 skipped: table, best point, axes, front."""
    _, out = small_sweep
    data = sweep_data(pinned(out))
    assert [r["status"] for r in data["rows"]] == ["ok"] * 4 + ["skipped"]
    assert data["rows"][4]["rules"] == ["G2-BACKEND"]
    assert pretty(data) == json_snapshot


def test_the_page_embeds_exactly_the_data_section(small_sweep: tuple[Path, Path]) -> None:
    """What sweep.html draws from is sweep_data of its folder, and one card per varying axis
    and the Pareto front are there to draw it in."""
    _, out = small_sweep
    html = (out / "sweep.html").read_text(encoding="utf-8")
    data = sweep_data(read_results(str(out)))
    assert embedded_data(html) == json.loads(data_json(data))
    charts = [f'data-chart="param-{i}"' for i, a in enumerate(data["axes"]) if a["varies"]]
    assert len(charts) == 2 and all(c in html for c in charts)
    assert html.count('class="plot"') == 3 and 'data-chart="pareto"' in html


def test_axes_are_numbers_or_categories(small_sweep: tuple[Path, Path]) -> None:
    """replicas is a number axis; the policy (strings) a category axis in order of first
    appearance; paths only the skipped point sets are not charted."""
    _, out = small_sweep
    data = sweep_data(read_results(str(out)))
    axes = {a["path"]: a for a in data["axes"]}
    replicas = axes["engine.workers.aggregated.parallelism.replicas"]
    assert (replicas["kind"], replicas["name"], replicas["varies"]) == ("number", "replicas", True)
    policy = axes["router.policy"]
    assert (policy["kind"], policy["categories"]) == ("category", ["round_robin", "kv_router"])
    assert [r["x"][1] for r in data["rows"][:4]] == [0, 1, 0, 1]
    backend = axes["engine.backend"]
    assert backend["categories"] == ["(base)"] and not backend["varies"]
    assert data["rows"][4]["values"][2] == "sglang" and data["rows"][4]["x"][2] is None


def test_short_names_are_unique_tails() -> None:
    """The table's headers: the shortest tail of each path no other path ends with."""
    assert short_names(["a.b.blocks", "c.blocks", "router.policy", "x.host.blocks"]) == [
        "b.blocks", "c.blocks", "policy", "host.blocks"]


def test_pareto_front_of_hand_made_points() -> None:
    """Dominated points are off the front; exact ties are both on it; a point as cheap but
    slower, or as fast but dearer, is dominated; a missing figure leaves the point out."""
    candidates = [
        (0, 1.0, 500.0),   # cheapest: front
        (1, 1.0, 500.0),   # the same figures: front too
        (2, 1.0, 600.0),   # as cheap, slower: dominated
        (3, 2.0, 300.0),   # dearer, faster: front
        (4, 2.0, 350.0),   # dominated by 3
        (5, 3.0, 300.0),   # as fast as 3, dearer: dominated
        (6, 4.0, 100.0),   # front
        (7, None, 50.0),   # no cost: left out
        (8, 0.5, None),    # no latency: left out
        (9, 5.0, 400.0),   # dominated by 3 and 6
    ]
    drawn, left_out = pareto_front(candidates)
    assert [p["point"] for p in drawn] == [0, 1, 2, 3, 4, 5, 6, 9]
    assert [p["point"] for p in drawn if p["front"]] == [0, 1, 3, 6]
    assert left_out == [7, 8]
    assert pareto_front([]) == ([], [])


def test_pareto_front_is_brute_force_non_domination() -> None:
    """On a grid of ties and near-ties, `front` is exactly "no other point dominates it"."""
    import itertools

    points = [(i, float(c), float(t)) for i, (c, t) in
              enumerate(itertools.product([1, 2, 2, 3], [5, 3, 3, 4, 1]))]
    drawn, _ = pareto_front(points)
    for p in drawn:
        dominated = any(q[1] <= p["x"] and q[2] <= p["y"] and (q[1], q[2]) != (p["x"], p["y"])
                        for q in points)
        assert p["front"] is not dominated, p


def test_pareto_of_the_small_sweep(small_sweep: tuple[Path, Path]) -> None:
    """The two 1-replica points tie (both on the front); of the two 2-replica points, the
    slower is dominated by the other; the SLA's TTFT bound is drawn."""
    _, out = small_sweep
    pareto = sweep_data(read_results(str(out)))["pareto"]
    assert (pareto["x"], pareto["y"], pareto["bound"]) == ("gpu_hours", "p90_ttft_ms", 300.0)
    fronts = {p["point"]: p["front"] for p in pareto["points"]}
    assert fronts == {0: True, 1: True, 2: False, 3: True}
    assert {p["point"]: p["sla_ok"] for p in pareto["points"]} == {
        0: False, 1: False, 2: True, 3: True}


def test_the_page_fetches_nothing(small_sweep: tuple[Path, Path]) -> None:
    """No URL the page would load, and the same Content-Security-Policy as the report."""
    _, out = small_sweep
    html = (out / "sweep.html").read_text(encoding="utf-8")
    assert fetched_urls(html) == []
    assert f'content="{CSP}"' in html and "<script src" not in html and "<link" not in html


def test_same_folder_same_bytes(small_sweep: tuple[Path, Path], tmp_path: Path) -> None:
    """Rendering is deterministic, and a copy of the folder elsewhere gives the same page."""
    _, out = small_sweep
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    page = render_sweep_html(read_results(str(out)))
    assert page == render_sweep_html(read_results(str(copy)))
    assert page == (out / "sweep.html").read_text(encoding="utf-8")


def test_a_folder_without_sweep_json_still_renders(small_sweep: tuple[Path, Path],
                                                   tmp_path: Path) -> None:
    """A results folder from before sweep.json: the page says so in its provenance."""
    _, out = small_sweep
    old = tmp_path / "old"
    shutil.copytree(out, old)
    (old / "sweep.json").unlink()
    results = read_results(str(old))
    assert results.manifest is None
    html = render_sweep_html(results)
    assert "absent: a results folder from before" in html
    assert embedded_data(html)["provenance"] == {"traces": ["trace-200.jsonl"]}


def test_labels_and_strings_are_escaped(small_sweep: tuple[Path, Path], tmp_path: Path) -> None:
    """A swept string or an error cannot close the page's script or inject markup."""
    _, out = small_sweep
    folder = tmp_path / "hostile"
    shutil.copytree(out, folder)
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    rows[0]["parameters"]["router.policy"] = "</script><img src=x>"
    rows[4]["error"] = "<b>boom</b>"
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    html = render_sweep_html(read_results(str(folder)))
    assert "<img src=x>" not in html and "<b>boom" not in html
    assert html.count("</script>") == 3


BAD_ROWS = [
    ("[1]", "results.jsonl:1: an array, expected a row of `kvreplay sweep`"),
    ('{"point": 0}', "results.jsonl:1: no `trace` (expected a row of `kvreplay sweep`)"),
    ("{", "results.jsonl:1: not valid JSON (Expecting property name enclosed in double "
          "quotes); a truncated or hand-edited file?"),
]


@pytest.mark.parametrize(("text", "message"), BAD_ROWS)
def test_malformed_rows_are_refused_with_their_line(tmp_path: Path, small_sweep: tuple[Path, Path],
                                                    text: str, message: str) -> None:
    """A row that is not a row: the file and line named, one line."""
    _, out = small_sweep
    folder = tmp_path / "bad"
    shutil.copytree(out, folder)
    (folder / "results.jsonl").write_text(text + "\n")
    with pytest.raises(ResultsError) as caught:
        read_results(str(folder))
    assert str(caught.value) == f"{folder / message.split(':')[0]}:{message.split(':', 1)[1]}"


def test_wrong_fields_are_refused(tmp_path: Path, small_sweep: tuple[Path, Path]) -> None:
    """A status, a figure or best.json's objective of the wrong kind: named, one line each."""
    _, out = small_sweep
    folder = tmp_path / "fields"
    shutil.copytree(out, folder)
    good = (folder / "results.jsonl").read_text()
    row = json.loads(good.splitlines()[1])
    for key, value, expected in (("status", "done", "`status` is a string, expected ok or "
                                  "skipped or failed or pending"),
                                 ("figures", {"gpu_hours": "1"}, "`figures` is an object, "
                                  "expected an object of numbers")):
        (folder / "results.jsonl").write_text(json.dumps({**row, key: value}) + "\n")
        with pytest.raises(ResultsError, match=re.escape(f"results.jsonl:1: {expected}") + "$"):
            read_results(str(folder))
    (folder / "results.jsonl").write_text(good)
    best = json.loads((folder / "best.json").read_text())
    (folder / "best.json").write_text(json.dumps({**best, "objective": {"least": "x"}}))
    with pytest.raises(ResultsError, match=re.escape("best.json: `objective` is an object, "
                                                     "expected {minimize")):
        read_results(str(folder))


def test_an_interrupted_sweep_renders_with_a_note(small_sweep: tuple[Path, Path],
                                                  tmp_path: Path) -> None:
    """Pending rows (a sweep stopped early) are listed, not drawn, and the page says so."""
    _, out = small_sweep
    folder = tmp_path / "partial"
    shutil.copytree(out, folder)
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    rows[3].update(status="pending", sla_ok=None, report=None,
                   figures=dict.fromkeys(rows[3]["figures"]))
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    best = json.loads((folder / "best.json").read_text())
    (folder / "best.json").write_text(json.dumps({**best, "complete": False}))
    html = render_sweep_html(read_results(str(folder)))
    assert "An interrupted sweep" in html
    data = embedded_data(html)
    assert [p["point"] for p in data["pareto"]["points"]] == [0, 1, 2]
    assert data["rows"][3]["status"] == "pending"


def test_a_sweep_where_nothing_ran_renders(small_sweep: tuple[Path, Path]) -> None:
    """Every point skipped: no chart, no front, and the page says why instead."""
    _, out = small_sweep
    results = read_results(str(out))
    rows = [{**r, "status": "skipped", "sla_ok": None, "figures": dict.fromkeys(r["figures"])}
            for r in results.rows]
    html = render_sweep_html(SweepResults(rows, {**results.best, "best": None,
                                                 "runner_up": None}, results.manifest))
    assert 'class="plot"' not in html
    assert "No point ran: nothing to chart." in html and "No point ran with both figures" in html
