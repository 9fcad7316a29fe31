"""Outputs that must not be written (issue 30): compile pairs that leave the project or share an
output, outputs that are inputs (or lie inside a folder the command reads), several outputs of
one command published together or not at all, a full disk, and the temp files a SIGKILL leaves.

Each refusal is exit 2 before anything is replaced; the full-disk tests mount a small tmpfs,
which needs root (they skip without it)."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import snapshot, synthetic_config

from kvreplay.io.output import Output, OutputError, commit_all

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
OLD = '{"old": "content"}\n'


def _temps(folder: Path) -> list[Path]:
    return sorted(folder.rglob(".kvreplay-*"))


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp_path/proj holding a.yaml and b.yaml (G2 configs reading traces/weka.jsonl), the
    current folder; tmp_path/outside holds victim.json."""
    root = tmp_path / "proj"
    (root / "traces").mkdir(parents=True)
    shutil.copy(EXAMPLES / "traces" / "weka-g2-restore.jsonl", root / "traces" / "weka.jsonl")
    text = (EXAMPLES / "agentx-g2-local.yaml").read_text().replace(
        "traces/weka-g2-restore.jsonl", "traces/weka.jsonl")
    (root / "a.yaml").write_text(text)
    (root / "b.yaml").write_text(text)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "victim.json").write_text(OLD)
    monkeypatch.chdir(root)
    return root


def _pairs(root: Path, *lines: str) -> None:
    (root / "kvreplay.toml").write_text("[compile]\n" + "".join(f"{line}\n" for line in lines))


@pytest.fixture
def sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp_path/sw.yaml: the G2 host-blocks example sweep over tmp_path/base.yaml, which reads
    tmp_path/traces/t.jsonl (the current folder is tmp_path)."""
    (tmp_path / "traces").mkdir()
    shutil.copy(EXAMPLES / "traces" / "g2-restore-mooncake.jsonl", tmp_path / "traces" / "t.jsonl")
    (tmp_path / "base.yaml").write_text((EXAMPLES / "g2-restore-mooncake.yaml").read_text()
                                        .replace("traces/g2-restore-mooncake.jsonl",
                                                 "traces/t.jsonl"))
    text = (EXAMPLES / "sweeps" / "g2-host-blocks.yaml").read_text()
    (tmp_path / "sw.yaml").write_text(text.replace("../g2-restore-mooncake.yaml", "base.yaml"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "sw.yaml"


# -- item 4: compile pairs stay inside the project root ---------------------------------------


@pytest.mark.parametrize(("entry", "words"), [
    ('"a.yaml" = "{outside}/victim.json"', "the output `{outside}/victim.json` is absolute"),
    ('"a.yaml" = "../outside/victim.json"', "is not a file below the project root"),
    ('"a.yaml" = "build/../../outside/victim.json"', "is not a file below the project root"),
    ('"{root}/a.yaml" = "a.json"', "the config `{root}/a.yaml` is absolute"),
])
def test_pair_paths_outside_the_root_are_refused_at_the_setting(
        cli: Callable[..., Any], project: Path, entry: str, words: str) -> None:
    """An absolute path or `..` above the root in a pair: SETTINGS-INVALID at the pair's line
    and column, exit 2, and nothing written anywhere."""
    outside = project.parent / "outside"
    _pairs(project, entry.format(outside=outside, root=project))
    before = snapshot(project.parent)
    ran = cli("compile", "--check-pairs", "--fix")
    assert ran.code == 2, ran
    assert ran.err.startswith("kvreplay.toml:2:1: error SETTINGS-INVALID ")
    assert words.format(outside=outside, root=project) in ran.err
    assert snapshot(project.parent) == before


@pytest.mark.parametrize("how", ["folder", "file", "missing-folder"])
def test_a_pair_through_a_symlink_that_leaves_the_project_is_refused(
        cli: Callable[..., Any], project: Path, how: str) -> None:
    """A pair whose output leads outside the root through a symlink (a linked folder, a linked
    file, a folder still to be made below a linked one) is refused at its setting; nothing
    outside is written or made."""
    outside = project.parent / "outside"
    if how == "file":
        (project / "a.json").symlink_to(outside / "victim.json")
        _pairs(project, '"a.yaml" = "a.json"')
    else:
        (project / "build").symlink_to(outside)
        target = "build/victim.json" if how == "folder" else "build/new/a.json"
        _pairs(project, f'"a.yaml" = "{target}"')
    before = snapshot(project.parent)
    for args in (("--check-pairs", "--fix"), ("--fix", "a.yaml")):
        ran = cli("compile", *args)
        assert ran.code == 2, ran
        assert ran.err.startswith("kvreplay.toml:2:1: error SETTINGS-INVALID the output ")
        assert f"leads to {outside}" in ran.err
        assert "outside the project root (the folder of kvreplay.toml)" in ran.err
        assert snapshot(project.parent) == before


def test_a_sibling_pair_through_a_symlink_that_leaves_its_folder_is_refused(
        cli: Callable[..., Any], project: Path) -> None:
    """x.yaml beside x.json, where x.json links outside: exit 2 naming the link, the file it
    leads to untouched."""
    (project / "a.json").symlink_to(project.parent / "outside" / "victim.json")
    before = snapshot(project.parent)
    ran = cli("compile", "--check-pairs", "--fix", "a.yaml")
    assert ran.code == 2
    assert ran.err.startswith("kvreplay: refusing to write a.json: the output `a.json` leads to "
                              f"{project.parent / 'outside' / 'victim.json'}, outside the folder "
                              f"of the pair, {project} (through a symlink)\n")
    assert snapshot(project.parent) == before


def test_a_pair_through_a_symlink_inside_the_project_is_followed(
        cli: Callable[..., Any], project: Path) -> None:
    """A link that stays inside the root is followed as `-o` follows it: its target is
    rewritten, the link kept."""
    (project / "build").mkdir()
    (project / "build" / "a.json").write_text(OLD)
    (project / "a.json").symlink_to("build/a.json")
    _pairs(project, '"a.yaml" = "a.json"')
    ran = cli("compile", "--check-pairs", "--fix")
    assert ran.code == 1, ran
    assert (project / "a.json").is_symlink()
    assert json.loads((project / "build" / "a.json").read_text())["spec"]


# -- item 12: two pairs sharing one output ----------------------------------------------------


@pytest.mark.parametrize(("second", "words"), [
    ('"b.yaml" = "./out.json"', "`b.yaml` and `a.yaml` have the same output `./out.json`"),
    ('"b.yaml" = "alias.json"', "`b.yaml` and `a.yaml` write the same file (alias.json is "
     "out.json)"),
    ('"b.yaml" = "hard.json"', "`b.yaml` and `a.yaml` write the same file (hard.json is "
     "out.json)"),
])
def test_two_pairs_sharing_an_output_are_refused(cli: Callable[..., Any], project: Path,
                                                 second: str, words: str) -> None:
    """Two pairs writing one file (by the same path, a symlink or a hard link): exit 2 at the
    second pair's setting, and nothing rewritten (it was rewritten twice, failing forever)."""
    (project / "out.json").write_text(OLD)
    (project / "alias.json").symlink_to("out.json")
    os.link(project / "out.json", project / "hard.json")
    _pairs(project, '"a.yaml" = "out.json"', second)
    before = snapshot(project)
    ran = cli("compile", "--check-pairs", "--fix")
    assert ran.code == 2, ran
    assert ran.err.startswith(f"kvreplay.toml:3:1: error SETTINGS-INVALID {words}")
    assert snapshot(project) == before


def test_a_pair_whose_output_is_another_pairs_config_is_refused(cli: Callable[..., Any],
                                                                project: Path) -> None:
    """a.yaml -> b.yaml, b.yaml -> b.json: --fix would overwrite a config; exit 2 at a.yaml's
    pair."""
    _pairs(project, '"a.yaml" = "b.yaml"', '"b.yaml" = "b.json"')
    before = snapshot(project)
    ran = cli("compile", "--check-pairs", "--fix")
    assert ran.code == 2
    assert ran.err.startswith("kvreplay.toml:2:1: error SETTINGS-INVALID the output of "
                              "`a.yaml` is the config `b.yaml` of another pair")
    assert snapshot(project) == before


# -- item 6: no output of any command is one of its inputs ------------------------------------


@pytest.mark.parametrize(("option", "target"), [
    ("--html", "a.yaml"), ("--html", "traces/weka.jsonl"), ("--export", "traces/weka.jsonl"),
    ("--lifecycle", "a.yaml"),
])
def test_run_refuses_any_output_that_is_an_input(cli: Callable[..., Any], project: Path,
                                                 option: str, target: str) -> None:
    """run --html / --export / --lifecycle naming the config or the spec's trace: exit 2
    before replaying, nothing changed."""
    before = snapshot(project)
    ran = cli("run", "a.yaml", option, target)
    assert (ran.code, ran.out) == (2, "")
    assert ran.err.startswith(f"kvreplay: refusing to write {target}: it is the ")
    assert snapshot(project) == before


@pytest.mark.parametrize("command", ["-o", "pair"])
def test_compile_refuses_to_overwrite_the_specs_trace(cli: Callable[..., Any], project: Path,
                                                      command: str) -> None:
    """compile a.yaml -o TRACE, or a pair whose output is the trace a.yaml names: exit 2, the
    trace untouched."""
    before = snapshot(project)
    if command == "pair":
        _pairs(project, '"a.yaml" = "traces/weka.jsonl"')
        before = snapshot(project)
        ran = cli("compile", "--check-pairs", "--fix")
    else:
        ran = cli("compile", "a.yaml", "-o", "traces/weka.jsonl")
    assert ran.code == 2
    assert ran.err == ("kvreplay: refusing to write traces/weka.jsonl: it is the trace "
                       f"{project / 'traces' / 'weka.jsonl'}\n")
    assert snapshot(project) == before


@pytest.mark.parametrize(("page", "words"), [
    ("base.yaml", "it is the base config base.yaml"),
    ("traces/t.jsonl", "it is the trace {folder}/traces/t.jsonl"),
    ("sw.yaml", "it is the sweep file sw.yaml"),
    ("out/best.json", "it is the sweep results file out/best.json"),
])
def test_sweep_html_refuses_the_sweeps_inputs_and_tables(cli: Callable[..., Any], sweep: Path,
                                                         page: str, words: str) -> None:
    """sweep --html naming the base config, the trace, the sweep file or a table of the
    results folder: exit 2 before any point runs, nothing written."""
    before = snapshot(sweep.parent)
    ran = cli("sweep", f"--html={page}", "sw.yaml", "-o", "out", "--no-progress")
    assert ran.code == 2
    assert ran.err.endswith(f"kvreplay: refusing to write {page}: "
                            f"{words.format(folder=sweep.parent)}\n")
    assert snapshot(sweep.parent) == before


@pytest.mark.parametrize(("output", "source"), [
    ("out/results.csv", "base.yaml"), ("out/sweep.json", "traces/t.jsonl"),
    ("out/reports/0123456789abcdef.json", "traces/t.jsonl"),
])
def test_sweep_refuses_a_results_folder_file_that_is_an_input(
        cli: Callable[..., Any], sweep: Path, output: str, source: str) -> None:
    """A table or a report of the results folder that is an input (a hard link of the base
    config or of the trace): exit 2 before any point runs, every file as it was."""
    (sweep.parent / output).parent.mkdir(parents=True)
    os.link(sweep.parent / source, sweep.parent / output)
    before = snapshot(sweep.parent)
    ran = cli("sweep", "sw.yaml", "-o", "out", "--no-progress")
    assert ran.code == 2
    assert re.search(rf"kvreplay: refusing to write {re.escape(output)}: it is the (base "
                     rf"config|trace) \S*{re.escape(source)}\n$", ran.err), ran.err
    assert snapshot(sweep.parent) == before


def test_report_of_a_sweep_folder_refuses_to_overwrite_its_tables(cli: Callable[..., Any],
                                                                  sweep: Path) -> None:
    """report DIR -o DIR/results.csv: exit 2, the folder unchanged."""
    assert cli("sweep", "sw.yaml", "-o", "out", "--no-progress").code == 0
    before = snapshot(sweep.parent)
    ran = cli("report", "out", "-o", "out/results.csv")
    assert ran.code == 2
    assert ran.err == ("kvreplay: refusing to write out/results.csv: it is the sweep results "
                       "out/results.csv\n")
    assert snapshot(sweep.parent) == before


def test_compare_refuses_one_file_for_the_page_and_the_output(cli: Callable[..., Any],
                                                              sweep: Path) -> None:
    """compare -o X --html X: exit 2 and X never written (the page used to be written, then
    the second output refused)."""
    assert cli("run", "base.yaml", "-o", "r.json", "-q").code == 0
    ran = cli("compare", "r.json", "r.json", "-o", "x.txt", "--html", "x.txt")
    assert ran.code == 2
    assert ran.err == "kvreplay: refusing to write x.txt: it is the --html page x.txt\n"
    assert not (sweep.parent / "x.txt").exists() and not _temps(sweep.parent)


# -- item 7: outputs inside a play folder given as the trace ----------------------------------


@pytest.fixture
def plays(project: Path) -> Path:
    """project/plays: a Weka play folder, read by project/w.yaml."""
    folder = project / "plays"
    folder.mkdir()
    shutil.copy(project / "traces" / "weka.jsonl", folder / "one.jsonl")
    (project / "w.yaml").write_text((project / "a.yaml").read_text().replace(
        "traces/weka.jsonl", "plays"))
    return folder


@pytest.mark.parametrize("args", [
    ("run", "w.yaml", "-o", "plays/report.json"),
    ("run", "w.yaml", "--lifecycle", "plays/lifecycle.jsonl"),
    ("run", "w.yaml", "--export", "plays/rows.jsonl"),
    ("run", "w.yaml", "--html", "plays/page.html"),
    ("run", "a.yaml", "--trace", "plays", "-o", "plays/deeper/report.json"),
    ("trace", "convert", "plays", "-o", "plays/v2.jsonl"),
    ("compile", "w.yaml", "-o", "plays/spec.json"),
])
def test_an_output_inside_a_play_folder_is_refused(cli: Callable[..., Any], project: Path,
                                                   plays: Path, args: tuple[str, ...]) -> None:
    """An output inside the Weka folder a command reads would become one more play: exit 2
    naming the folder, and the folder still replays."""
    before = snapshot(plays)
    ran = cli(*args)
    assert ran.code == 2
    target = args[-1]
    assert re.fullmatch(rf"kvreplay: refusing to write {re.escape(target)}: it is inside the "
                        rf"trace \S*plays, a folder the command reads\n", ran.err), ran.err
    assert snapshot(plays) == before
    assert cli("run", "w.yaml", "-q").code == 0


# -- item 8: several outputs published together, or none --------------------------------------


def test_run_keeps_every_output_when_one_fails(cli: Callable[..., Any], project: Path) -> None:
    """run -o A --export B --html /dev/full: the page fails (exit 2), and A and B are the
    files they were (same content, same inode), with no temp file."""
    for name in ("A.json", "B.csv"):
        (project / name).write_text(OLD)
    before = snapshot(project)
    ran = cli("run", "a.yaml", "-o", "A.json", "--export", "B.csv", "--html", "/dev/full", "-q")
    assert (ran.code, ran.err) == (2, "kvreplay: no space left on device writing /dev/full\n")
    assert snapshot(project) == before


def test_compare_keeps_its_output_when_the_page_fails(cli: Callable[..., Any],
                                                      sweep: Path) -> None:
    """compare -o A --html /dev/full: exit 2, A as it was."""
    assert cli("run", "base.yaml", "-o", "r.json", "-q").code == 0
    (sweep.parent / "A.txt").write_text(OLD)
    before = snapshot(sweep.parent)
    ran = cli("compare", "r.json", "r.json", "-o", "A.txt", "--html", "/dev/full")
    assert (ran.code, ran.err) == (2, "kvreplay: no space left on device writing /dev/full\n")
    assert snapshot(sweep.parent) == before


def test_a_failed_rename_puts_the_earlier_outputs_back(tmp_path: Path) -> None:
    """When the second rename fails (its target became a folder), the first output is put
    back: the same file (inode) with its old content, and no temp file is left."""
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    first.write_text(OLD)
    second.write_text(OLD)
    inode = first.stat().st_ino
    with Output(str(first)) as a, Output(str(second)) as b:
        a.write("new A\n")
        b.write("new B\n")
        second.unlink()
        (second / "inside").mkdir(parents=True)
        with pytest.raises(OutputError, match=r"cannot write .*second\.json: "):
            commit_all([a, b])
    assert first.read_text() == OLD and first.stat().st_ino == inode
    assert second.is_dir() and not _temps(tmp_path)


# -- item 10: a full disk ---------------------------------------------------------------------


@pytest.fixture
def tiny(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """Mount a tmpfs of a given size at tmp_path/tiny (root only; skipped where it cannot be
    mounted) and unmount it afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    mounted: list[Path] = []

    def mount(size: str, where: Path = tmp_path / "tiny") -> Path:
        where.mkdir(exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs",
                               str(where)], capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(where)
        return where

    yield mount
    for where in reversed(mounted):
        subprocess.run(["umount", "-l", str(where)], check=True, timeout=30)


@pytest.mark.parametrize("output", [
    ("--export", "rows.parquet"), ("--export", "rows.csv"), ("-o", "report.json"),
    ("--html", "page.html"),
])
def test_a_full_disk_is_reported_and_leaves_the_previous_file(
        cli: Callable[..., Any], tiny: Callable[[str], Path], output: tuple[str, str],
        ) -> None:
    """ENOSPC while writing an output (the Parquet export was an internal error): "no space
    left on device writing PATH", exit 2, the previous file as it was and no temp file."""
    pytest.importorskip("pyarrow")
    folder = tiny("16k")
    option, name = output
    target = folder / name
    target.write_text(OLD)
    before = snapshot(folder)
    config = EXAMPLES / "kv-router-mooncake.yaml"  # 200 requests: every output is > 16 kB
    ran = cli("run", str(config), option, str(target), "-q")
    assert (ran.code, ran.err) == (2, f"kvreplay: no space left on device writing {target}\n")
    assert snapshot(folder) == before


def test_a_full_disk_for_one_output_keeps_the_others(cli: Callable[..., Any], project: Path,
                                                     tiny: Callable[[str], Path]) -> None:
    """run -o A --export FULL/rows.csv: exit 2, A as it was."""
    folder = tiny("16k")
    (project / "A.json").write_text(OLD)
    before = snapshot(project)
    ran = cli("run", str(EXAMPLES / "kv-router-mooncake.yaml"), "-o", "A.json", "--export",
              str(folder / "rows.csv"), "-q")
    assert (ran.code, ran.err) == (2, f"kvreplay: no space left on device writing "
                                      f"{folder / 'rows.csv'}\n")
    assert snapshot(project) == before


def test_a_full_disk_for_one_pair_keeps_the_others(cli: Callable[..., Any], project: Path,
                                                   tiny: Callable[[str], Path]) -> None:
    """compile --check-pairs --fix where one output's disk is full: exit 2, no pair rewritten."""
    full = tiny("4k", project / "full")
    (full / "filler").write_bytes(b"x" * 4096)
    (project / "a.json").write_text(OLD)
    _pairs(project, '"a.yaml" = "a.json"', '"b.yaml" = "full/b.json"')
    before = snapshot(project)
    ran = cli("compile", "--check-pairs", "--fix")
    assert (ran.code, ran.err) == (2, "kvreplay: no space left on device writing "
                                      "full/b.json\n")
    assert snapshot(project) == before


def test_a_full_disk_in_a_sweep_folder(cli: Callable[..., Any], tiny: Callable[[str], Path],
                                       tmp_path: Path) -> None:
    """A sweep whose results folder fills up: exit 2 naming the file, no temp file, and every
    file in the folder whole (the reports written before parse; the tables all or none)."""
    folder = tiny("1m")
    results = folder / "results"
    sweep = EXAMPLES / "sweeps" / "kv-router-capacity.yaml"  # 12 points of ~320 kB reports
    ran = cli("sweep", str(sweep), "-o", str(results), "--no-progress", "-j", "1")
    assert ran.code == 2
    assert re.search(rf"kvreplay: no space left on device writing {re.escape(str(results))}/"
                     r"\S+\n$", ran.err), ran.err
    assert not _temps(folder)
    for report in (results / "reports").iterdir():
        json.loads(report.read_text())
    tables = {p.name for p in results.iterdir() if p.is_file()}
    assert tables in (set(), {"results.jsonl", "results.csv", "results.parquet", "best.json",
                              "sweep.json"} - (set() if _has_pyarrow() else {"results.parquet"}))


def _has_pyarrow() -> bool:
    import importlib.util

    return importlib.util.find_spec("pyarrow") is not None


# -- item 14: temp files left by SIGKILL ------------------------------------------------------


def _start_long_export(folder: Path) -> subprocess.Popen[str]:
    """A replay long enough to be killed mid-way, exporting into `folder`; returns once its
    temp file exists."""
    config = synthetic_config(folder.parent, 400_000)
    proc = subprocess.Popen([sys.executable, "-m", "kvreplay", "run", str(config), "--stepwise",
                             "--export", str(folder / "rows.csv"), "-q", "--no-progress"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not _temps(folder):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no temp file appeared"
        time.sleep(0.05)
    return proc


def _compile_into(folder: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "kvreplay", "compile",
                           str(EXAMPLES / "agentx-g2-local.yaml"), "-o", str(folder / "spec.json")],
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (0, "")


def test_a_sigkilled_exports_temp_file_goes_at_the_next_write(tmp_path: Path) -> None:
    """SIGKILL during --export leaves .kvreplay-*.tmp beside the output; the next write into
    that folder removes it."""
    folder = tmp_path / "out"
    folder.mkdir()
    proc = _start_long_export(folder)
    left = _temps(folder)
    proc.kill()
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert _temps(folder) == left and left
    _compile_into(folder)
    assert not _temps(folder)
    assert sorted(p.name for p in folder.iterdir()) == ["spec.json"]


def test_a_live_writers_temp_file_is_left_alone(tmp_path: Path) -> None:
    """Another kvreplay writing into the same folder does not remove a running export's temp
    file; the export still finishes its own way (here: SIGTERM, which removes it)."""
    folder = tmp_path / "out"
    folder.mkdir()
    proc = _start_long_export(folder)
    try:
        live = _temps(folder)
        _compile_into(folder)
        assert _temps(folder) == live
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM or proc.returncode == -signal.SIGTERM
    assert not _temps(folder)


def test_only_stale_temp_files_of_kvreplays_naming_are_removed(tmp_path: Path) -> None:
    """What the cleaning removes: unlocked regular files named as kvreplay names its temp
    files (now and before). What it leaves: a file another process holds locked, a symlink
    (and what it leads to), a file with a second link, and other names."""
    folder = tmp_path / "out"
    folder.mkdir()
    victim = tmp_path / "victim.json"
    victim.write_text(OLD)
    stale = [".kvreplay-0123456789ab.tmp", ".kvreplay-a1b2_c3d.tmp"]
    for name in stale:
        (folder / name).write_text("partial")
    (folder / ".kvreplay-aaaaaaaaaaaa.tmp").symlink_to(victim)
    os.link(victim, folder / ".kvreplay-bbbbbbbbbbbb.tmp")
    for name in (".kvreplay-notours.txt", "kvreplay-cccccccccccc.tmp", "keep.json"):
        (folder / name).write_text("keep")
    held = folder / ".kvreplay-dddddddddddd.tmp"
    held.write_text("live")
    holder = subprocess.Popen(  # another process's live temp file: open and locked
        [sys.executable, "-c", "import fcntl, sys; f = open(sys.argv[1], 'a'); "
         "fcntl.flock(f, fcntl.LOCK_EX); print('locked', flush=True); sys.stdin.read()",
         str(held)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        kept = {name: body for name, body in snapshot(folder).items() if name not in stale}
        _compile_into(folder)
        after = snapshot(folder)
        assert {name: after[name] for name in kept} == kept
        assert set(after) == {*kept, "spec.json"}
        assert victim.read_text() == OLD
    finally:
        holder.communicate(input="", timeout=60)
    with held.open() as fh:  # unlocked now: a stale file like any other
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
