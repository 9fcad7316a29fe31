"""A compiled spec survives being written elsewhere and moved (issue 22 item 3): `compile -o`
writes trace paths relative to the output's folder, `run --trace` replaces them, and a trace
that is not found says which folder its path was read from and why."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
CONFIG = "examples/agentx-g2-shared-pd.yaml"
TRACE = "examples/traces/weka-g2-restore.jsonl"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of examples/ in a temporary folder, which is the current folder."""
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _trace_paths(path: Path | str) -> list[str]:
    return list(json.loads(Path(path).read_text())["traffic"]["trace_paths"])


def test_the_readme_tour_runs_the_spec_it_compiled(cli: Callable[..., Any],
                                                   project: Path) -> None:
    """`compile CONFIG -o spec.json && run spec.json` from the project root (the README's
    tour) replays: the path is written relative to spec.json's folder."""
    assert cli("compile", CONFIG, "-o", "spec.json").code == 0
    assert _trace_paths("spec.json") == [TRACE]
    ran = cli("run", "spec.json", "--no-progress")
    assert ran.code == 0, ran.err
    assert "4 completed of 4" in ran.out


def test_a_spec_written_in_another_folder_runs_from_anywhere(
        cli: Callable[..., Any], project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An output two folders away gets `../../examples/...`; run from a third folder it finds
    the trace, and so does a copy moved together with its traces."""
    (project / "out" / "specs").mkdir(parents=True)
    assert cli("compile", CONFIG, "-o", "out/specs/pd.json").code == 0
    assert _trace_paths("out/specs/pd.json") == [f"../../{TRACE}"]
    (project / "elsewhere").mkdir()
    monkeypatch.chdir(project / "elsewhere")
    assert cli("run", "../out/specs/pd.json", "--no-progress").code == 0
    moved = project / "moved"
    (moved / "out" / "specs").mkdir(parents=True)
    shutil.copy(project / "out" / "specs" / "pd.json", moved / "out" / "specs" / "pd.json")
    shutil.copytree(project / "examples" / "traces", moved / "examples" / "traces")
    shutil.rmtree(project / "examples")
    assert cli("run", str(moved / "out" / "specs" / "pd.json"), "--no-progress").code == 0


def test_the_written_spec_differs_from_stdout_only_in_its_trace_paths(
        cli: Callable[..., Any], project: Path) -> None:
    """The same bytes as stdout in the config's own folder; elsewhere only `trace_paths`
    changes, and an absolute trace path is written as it is."""
    stdout = cli("compile", CONFIG).out
    assert _trace_paths_of(stdout) == ["traces/weka-g2-restore.jsonl"]
    assert cli("compile", CONFIG, "-o", "examples/beside.json").code == 0
    assert (project / "examples" / "beside.json").read_text() == stdout
    assert cli("compile", CONFIG, "-o", "spec.json").code == 0
    written = json.loads((project / "spec.json").read_text())
    expected = json.loads(stdout)
    expected["traffic"]["trace_paths"] = [TRACE]
    assert written == expected
    absolute = str(project / TRACE)
    ran = cli("compile", CONFIG, "-o", "abs.json", "--set", f"traffic.source.paths=[{absolute}]")
    assert ran.code == 0 and _trace_paths("abs.json") == [absolute]


def test_a_stream_output_keeps_the_configs_paths(cli: Callable[..., Any], project: Path) -> None:
    """`-o FIFO` (like stdout: where the text goes is unknown) writes the stdout bytes."""
    import os
    import threading

    fifo = project / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    ran = cli("compile", CONFIG, "-o", str(fifo))
    reader.join(timeout=60)
    assert ran.code == 0 and got == [cli("compile", CONFIG).out]


def _trace_paths_of(text: str) -> list[str]:
    return list(json.loads(text)["traffic"]["trace_paths"])


def test_check_compares_with_what_o_writes(cli: Callable[..., Any], project: Path) -> None:
    """`--check OUT` expects the paths `-o OUT` writes: up to date right after `-o`, stale
    when OUT holds the stdout text (paths relative to the config's folder)."""
    assert cli("compile", CONFIG, "-o", "spec.json").code == 0
    assert cli("compile", CONFIG, "--check", "spec.json").code == 0
    (project / "spec.json").write_text(cli("compile", CONFIG).out)
    ran = cli("compile", CONFIG, "--check", "spec.json")
    assert ran.code == 1
    assert f'+      "{TRACE}"' in ran.out and '-      "traces/weka-g2-restore.jsonl"' in ran.out


def test_a_spec_from_stdout_in_another_folder_says_where_it_looked(
        cli: Callable[..., Any], project: Path) -> None:
    """Saved from stdout into another folder, the spec's relative path misses: TRACE-PATH
    names the path it tried, the spec's folder it was read from and why, and the two ways out;
    `--trace` (read from the current folder) then replays it."""
    (project / "spec.json").write_text(cli("compile", CONFIG).out)
    ran = cli("run", "spec.json", "--no-progress")
    assert ran.code == 2
    (line,) = [x for x in ran.err.splitlines() if "TRACE-PATH" in x]
    looked = project / "traces" / "weka-g2-restore.jsonl"
    assert line == (f"{looked}: error TRACE-PATH cannot read Weka source {looked}: No such file "
                    "or directory (a native spec's trace paths are read relative to the spec's "
                    f"folder, {project})")
    ran = cli("run", "spec.json", "--no-progress", "--trace", TRACE)
    assert ran.code == 0 and "4 completed of 4" in ran.out


def test_the_hint_names_both_ways_out(cli: Callable[..., Any], project: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal the finding's hint says how to point the spec at its trace."""
    import sys

    (project / "spec.json").write_text(cli("compile", CONFIG).out)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setenv("NO_COLOR", "1")
    ran = cli("run", "spec.json", "--no-progress")
    assert ("hint: give the trace with `kvreplay run SPEC --trace PATH`, or recompile with "
            "`kvreplay compile CONFIG -o SPEC`") in " ".join(ran.err.split())


def test_a_missing_trace_of_a_config_or_of_trace_says_its_folder(
        cli: Callable[..., Any], project: Path) -> None:
    """A config's path is read from the config's folder, a `--trace` path from the current
    one: each miss says which."""
    shutil.copy(project / CONFIG, project / "moved.yaml")
    ran = cli("run", "moved.yaml", "--no-progress")
    assert ran.code == 2
    assert ("(`traffic.source.paths` are read relative to the config's folder, "
            f"{project})") in ran.err
    ran = cli("run", CONFIG, "--no-progress", "--trace", "nowhere.jsonl")
    assert ran.code == 2
    assert f"(a --trace path is read from the current folder, {project})" in ran.err
