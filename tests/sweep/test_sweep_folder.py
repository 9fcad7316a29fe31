"""A sweep's results folder as someone else may have left it: another sweep's results, symlinks
that lead out of it, reports edited since the sweep wrote them; and the sweep file's inline
suppressions."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from sweep_support import SWEEP, invoke, same_outputs, write_sweep

from kvreplay.sweep.store import write_atomic

Capture = pytest.CaptureFixture[str]


def _copy(small_run: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    sweep, done = small_run
    out = tmp_path / "results"
    shutil.copytree(done, out)
    return sweep, out


def _rows(out: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_a_hand_edited_report_is_run_again_on_resume(small_run: tuple[Path, Path],
                                                     tmp_path: Path, capsys: Capture) -> None:
    """Issue 30: a finished point's report edited to `gpu_hours: -123` is not taken into
    best.json on resume: its bytes no longer have the digest sweep.json recorded when the sweep
    wrote it, so the point runs again and the folder ends as an undisturbed run's."""
    sweep, out = _copy(small_run, tmp_path)
    best = json.loads((out / "best.json").read_text())["best"]
    report = out / best["runs"][0]["report"]
    edited = json.loads(report.read_text())
    edited["summary"]["gpu_hours"] = -123
    report.write_text(json.dumps(edited, indent=2, sort_keys=True) + "\n")
    ran = invoke(capsys, "sweep", str(sweep), "-o", str(out), "-j", "1", "--no-progress")
    assert ran.code == 0, ran.err
    assert "1 report(s)" in ran.err and "did not match the digest recorded" in ran.err
    assert "11 already done" in ran.out
    assert json.loads((out / "best.json").read_text())["best"]["value"] > 0
    same_outputs(small_run[1], out)


def test_a_report_without_a_recorded_digest_is_run_again(small_run: tuple[Path, Path],
                                                         tmp_path: Path, capsys: Capture) -> None:
    """sweep.json records every report of the table; a report it does not name (a folder
    whose sweep.json is gone) is not trusted: every point runs again."""
    sweep, out = _copy(small_run, tmp_path)
    (out / "sweep.json").unlink()
    ran = invoke(capsys, "sweep", str(sweep), "-o", str(out), "-j", "1", "--no-progress")
    assert ran.code == 0 and "(0 already done)" in ran.out
    manifest = json.loads((out / "sweep.json").read_text())
    assert sorted(manifest["reports"]) == sorted(r["report"] for r in _rows(out) if r["report"])
    same_outputs(small_run[1], out)


@pytest.mark.parametrize("name", ["best.json", "results.csv", "reports/REPORT"])
def test_a_symlink_out_of_the_results_folder_is_never_written_through(
        small_run: tuple[Path, Path], tmp_path: Path, capsys: Capture, name: str) -> None:
    """Issue 30: best.json, results.csv or a point's report made a symlink to a file elsewhere:
    the sweep refuses the folder (exit 2, naming the link) and the file elsewhere is intact."""
    sweep, out = _copy(small_run, tmp_path)
    if name == "reports/REPORT":
        name = _rows(out)[0]["report"]
    victim = tmp_path / "elsewhere.txt"
    victim.write_text("precious\n")
    (out / name).unlink()
    (out / name).symlink_to(victim)
    ran = invoke(capsys, "sweep", str(sweep), "-o", str(out), "-j", "1", "--no-progress")
    assert ran.code == 2
    assert f"{out / name} is a symlink" in ran.err and "Traceback" not in ran.err
    assert victim.read_text() == "precious\n"


def test_a_reports_folder_that_is_a_symlink_is_refused(small_run: tuple[Path, Path],
                                                       tmp_path: Path, capsys: Capture) -> None:
    """reports/ itself a symlink to another folder: refused, nothing written there."""
    sweep, _ = small_run
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "results"
    out.mkdir()
    (out / "reports").symlink_to(elsewhere)
    ran = invoke(capsys, "sweep", str(sweep), "-o", str(out), "-j", "1", "--no-progress")
    assert ran.code == 2 and "is a symlink" in ran.err
    assert list(elsewhere.iterdir()) == []


def test_write_atomic_replaces_a_symlink_instead_of_following_it(tmp_path: Path) -> None:
    """A link planted after the check is replaced by the new file, never written through."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    link = tmp_path / "best.json"
    link.symlink_to(victim)
    write_atomic(str(link), "{}\n")
    assert not link.is_symlink() and link.read_text() == "{}\n"
    assert victim.read_text() == "precious\n"


def test_another_sweeps_folder_needs_force(small_run: tuple[Path, Path], small_trace: Path,
                                           tmp_path: Path, capsys: Capture) -> None:
    """Issue 22: a second sweep file run into a folder holding the results of another one is
    refused (exit 2, its table intact) instead of replacing that table; --force replaces it."""
    _, out = _copy(small_run, tmp_path)
    before = (out / "results.jsonl").read_bytes()
    folder = tmp_path / "other"
    folder.mkdir()
    other = write_sweep(folder, small_trace, SWEEP.replace(
        "router.policy: [round_robin, kv_router]", "router.policy: [kv_router]"))
    other = other.rename(folder / "other.yaml")
    ran = invoke(capsys, "sweep", str(other), "-o", str(out), "-j", "1", "--no-progress")
    assert ran.code == 2
    assert "holds the results of another sweep" in ran.err and "--force" in ran.err
    assert (out / "results.jsonl").read_bytes() == before
    ran = invoke(capsys, "sweep", str(other), "-o", str(out), "-j", "1", "--no-progress",
                 "--force")
    assert ran.code == 0, ran.err
    assert len(_rows(out)) == 7


def test_the_same_sweep_file_from_another_folder_resumes(small_run: tuple[Path, Path],
                                                         tmp_path: Path, capsys: Capture,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The same sweep file named another way (run from another folder) is the same sweep: its
    digest matches, so it resumes without --force."""
    sweep, out = _copy(small_run, tmp_path)
    monkeypatch.chdir(sweep.parent)
    ran = invoke(capsys, "sweep", sweep.name, "-o", str(out), "-j", "1", "--no-progress")
    assert ran.code == 0 and "(12 already done)" in ran.out


def test_sweep_honours_inline_suppressions(tmp_path: Path, capsys: Capture) -> None:
    """Issue 22: the shipped router sweep's refused point carries `# kvreplay: ignore[...]`:
    `kvreplay sweep` prints no SWEEP-POINT-SKIPPED, as `kvreplay lint` does not; without the
    comment it does."""
    repo = Path(__file__).resolve().parents[2] / "examples" / "sweeps"
    ran = invoke(capsys, "sweep", str(repo / "kv-router-capacity.yaml"), "-o",
                 str(tmp_path / "a"), "-j", "1", "--no-progress")
    assert ran.code == 0 and "SWEEP-POINT-SKIPPED" not in ran.err
    bare = repo / "kv-router-capacity.yaml"
    copy = tmp_path / "sweep.yaml"
    copy.write_text(bare.read_text().replace("  # kvreplay: ignore[SWEEP-POINT-SKIPPED]", "")
                    .replace("../", f"{repo.parent}/"))
    ran = invoke(capsys, "sweep", str(copy), "-o", str(tmp_path / "b"), "-j", "1",
                 "--no-progress")
    assert ran.code == 0 and "warning SWEEP-POINT-SKIPPED" in ran.err


def test_a_suppressed_error_still_stops_the_sweep(tmp_path: Path, capsys: Capture) -> None:
    """An error cannot be suppressed for a run (the point cannot be compiled): it is shown and
    the sweep exits 1 without running."""
    path = tmp_path / "sweep.yaml"
    path.write_text("kind: sweep\nbase:\n  engine:\n    model: m\n"
                    "    workers: {aggregated: {kv_cache: {block_size: 512}}}\n"
                    "grid:\n  engine.workers.aggregated.parallelism.replicas: [1, -2]"
                    "  # kvreplay: ignore[SCHEMA-RANGE]\n")
    ran = invoke(capsys, "sweep", str(path), "-o", str(tmp_path / "o"), "--no-progress")
    assert ran.code == 1 and "SCHEMA-RANGE" in ran.err
    assert not (tmp_path / "o").exists()
