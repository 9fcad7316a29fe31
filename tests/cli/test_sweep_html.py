"""`kvreplay sweep SWEEP -o DIR --html [FILE]` and `kvreplay report DIR`: the page of a sweep's
results folder, the same bytes however it is made (fresh, resumed, rendered afterwards), and a
folder that is missing or not a results folder refused with exit 2 and one line."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any


def test_report_of_the_folder_is_the_sweep_page(cli: Callable[..., Any],
                                                small_sweep: tuple[Path, Path],
                                                tmp_path: Path) -> None:
    """`kvreplay report DIR -o OUT` writes what `sweep --html` wrote; without -o, stdout."""
    _, out = small_sweep
    page = tmp_path / "page.html"
    ran = cli("report", str(out), "-o", str(page))
    assert (ran.code, ran.out, ran.err) == (0, f"sweep page written to {page}\n", "")
    assert page.read_bytes() == (out / "sweep.html").read_bytes()
    ran = cli("report", str(out) + "/")
    assert ran.code == 0 and ran.out == (out / "sweep.html").read_text()


def test_a_resumed_sweep_writes_the_same_page(cli: Callable[..., Any],
                                             small_sweep: tuple[Path, Path],
                                             tmp_path: Path) -> None:
    """Rerunning the sweep (nothing left to run) with --html FILE gives the same bytes, and
    says where the page went."""
    sweep, done = small_sweep
    out = tmp_path / "results"
    shutil.copytree(done, out)
    page = tmp_path / "again.html"
    ran = cli("sweep", str(sweep), "-o", str(out), "--html", str(page), "--no-progress")
    assert ran.code == 0, ran.err
    assert "4 ok (4 already done)" in ran.out and f"page: {page}\n" in ran.out
    assert page.read_bytes() == (done / "sweep.html").read_bytes()


def test_set_is_recorded_in_the_provenance(cli: Callable[..., Any],
                                           small_sweep: tuple[Path, Path],
                                           tmp_path: Path) -> None:
    """`--set` on the base changes its digest, and the page's provenance says what was set."""
    sweep, done = small_sweep
    out = tmp_path / "results"
    setting = "engine.workers.aggregated.timing.prefill_ms=30"
    ran = cli("sweep", str(sweep), "-o", str(out), "--set", setting, "--html", "-q",
              "--no-progress")
    assert ran.code == 0, ran.err
    manifest = json.loads((out / "sweep.json").read_text())
    assert manifest["overrides"] == [setting]
    assert manifest["base_digest"] != json.loads((done / "sweep.json").read_text())["base_digest"]
    assert setting in (out / "sweep.html").read_text()


def test_bad_folders_exit_2_with_one_line(cli: Callable[..., Any], small_sweep: tuple[Path, Path],
                                          tmp_path: Path) -> None:
    """Missing, empty, without best.json, a cut table: exit 2, one line, nothing written."""
    _, done = small_sweep
    empty = tmp_path / "empty"
    empty.mkdir()
    no_best = tmp_path / "no-best"
    shutil.copytree(done, no_best)
    (no_best / "best.json").unlink()
    cut = tmp_path / "cut"
    shutil.copytree(done, cut)
    table = (cut / "results.jsonl").read_text()
    (cut / "results.jsonl").write_text(table[: len(table) // 2])
    cases = {
        empty: f"{empty}: not a sweep results folder (no results.jsonl; `kvreplay sweep SWEEP "
               f"-o {empty}` writes one)",
        no_best: f"{no_best}: not a complete sweep results folder (no best.json)",
        cut: f"{cut}/results.jsonl:3: not valid JSON (Unterminated string starting at); a "
             "truncated or hand-edited file?",
    }
    for folder, message in cases.items():
        page = tmp_path / "page.html"
        ran = cli("report", str(folder), "-o", str(page))
        assert (ran.code, ran.out, ran.err) == (2, "", f"kvreplay: {message}\n")
        assert not page.exists()
    missing = f"{tmp_path / 'missing'}/"
    ran = cli("report", missing, "-o", str(tmp_path / "page.html"))
    assert (ran.code, ran.err) == (2, f"kvreplay: cannot read {missing}: No such file or "
                                      "directory\n")


def test_a_folder_is_rendered_alone(cli: Callable[..., Any], small_sweep: tuple[Path, Path],
                                    tmp_path: Path) -> None:
    """A results folder with a report file, or with --label: exit 2, one line."""
    _, done = small_sweep
    report = next((done / "reports").iterdir())
    for args in ([str(done), str(report)], [str(done), "--label", "x"]):
        ran = cli("report", *args, "-o", str(tmp_path / "page.html"))
        assert ran.code == 2 and ran.err == (
            f"kvreplay: {done} is a sweep results folder: its page is rendered alone, without "
            "other reports or --label\n")
    assert not (tmp_path / "page.html").exists()


def test_html_that_cannot_be_written_is_refused_before_the_run(
        cli: Callable[..., Any], small_sweep: tuple[Path, Path], tmp_path: Path) -> None:
    """--html naming a folder or the sweep file itself: exit 2 before any point runs."""
    sweep, _ = small_sweep
    out = tmp_path / "results"
    for target in (tmp_path, sweep):
        ran = cli("sweep", str(sweep), "-o", str(out), "--html", str(target), "-q",
                  "--no-progress")
        assert ran.code == 2 and ran.err.count("\n") == 1, ran.err
        assert not out.exists()
