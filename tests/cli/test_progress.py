"""Progress on stderr: plain lines in logs at a bounded rate, an ETA, the phases after the
replay; nothing under --quiet or --no-progress."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import synthetic_config

from kvreplay.cli.progress import ProgressDisplay, duration, eta, mode_for

REPO = Path(__file__).resolve().parents[2]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().err.splitlines()


def test_lines_at_each_tenth_or_every_10_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    """A log gets a line when a new tenth is done or 10 s passed since the last one; not for
    every engine call, and nothing in the first second."""
    clock = Clock()
    show = ProgressDisplay("lines", clock=clock)
    show.counts = {"requests": 5}
    show(10.0, 0.01)  # within the first second: silent
    clock.now = 1.5
    show(20.0, 0.02)  # the first line
    for fraction in (0.03, 0.05, 0.09):
        clock.now += 0.5
        show(30.0, fraction)  # same tenth, < 10 s: silent
    clock.now = 12.0
    show(40.0, 0.095)  # 10 s without a line
    clock.now = 13.0
    show(50.0, 0.25)  # a new tenth
    show(50.0, 0.26)
    lines = _lines(capsys)
    assert len(lines) == 3, lines
    assert lines[0].startswith("kvreplay: replaying 2% (simulated 0.0 s, 5 requests done)")
    assert "ETA" in lines[0] and lines[2].startswith("kvreplay: replaying 25%")


def test_phases_are_one_line_each(capsys: pytest.CaptureFixture[str]) -> None:
    """After the replay, each phase is named once (its own progress stays on terminals)."""
    clock = Clock()
    show = ProgressDisplay("lines", clock=clock)
    clock.now = 2.0
    show.phase("building the report")
    show.phase("writing r.json")
    show.phase("writing r.json", 0.5)
    assert _lines(capsys) == ["kvreplay: building the report (2 s elapsed)",
                              "kvreplay: writing r.json (2 s elapsed)"]


def test_terminal_bar_shows_eta_and_phases(capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Without rich the terminal line is rewritten in place, with an ETA, then the phase."""
    monkeypatch.setitem(sys.modules, "rich.progress", None)
    clock = Clock()
    show = ProgressDisplay("bar", clock=clock)
    clock.now = 4.0
    show(1000.0, 0.25)
    show.phase("building the report")
    show.close()
    err = capsys.readouterr().err
    assert "replaying (simulated 1.0 s, ETA 12 s)  25.0%" in err
    assert "building the report 100.0%" in err and err.endswith("\r\033[K")


def test_eta_and_durations() -> None:
    """The ETA is elapsed x (1 - f) / f; none before a fraction or once done."""
    assert eta(30.0, 0.25) == "1 min 30 s"
    assert eta(30.0, None) is None and eta(30.0, 1.0) is None and eta(1.0, 0.0) is None
    assert duration(7322) == "2 h 02 min"


def test_mode() -> None:
    """A terminal gets the bar, anything else lines; --quiet and --no-progress silence it."""

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert mode_for(Tty(), quiet=False, disabled=False) == "bar"
    assert mode_for(io.StringIO(), quiet=False, disabled=False) == "lines"
    assert mode_for(io.StringIO(), quiet=True, disabled=False) is None
    assert mode_for(Tty(), quiet=False, disabled=True) is None


def test_ci_log_of_a_long_run(tmp_path: Path) -> None:
    """A replay longer than a second with stderr in a file: progress lines, then the report
    phases; --quiet prints none."""
    config = synthetic_config(tmp_path, 24_000)  # about 2 s: the report no longer adds 0.3 s
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "kvreplay", "run", str(config), "-o", str(out), "--stepwise"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True)
    lines = [line for line in done.stderr.splitlines() if line.startswith("kvreplay: ")]
    if not lines:
        pytest.skip("the replay took less than a second on this machine")
    assert lines[-2:] == [line for line in lines[-2:] if "elapsed" in line]
    assert lines[-2].startswith("kvreplay: building the report")
    assert lines[-1].startswith(f"kvreplay: writing {out}")
    assert len(lines) <= 2 + 10 + 1
    quiet = subprocess.run([*cmd, "--quiet"], capture_output=True, text=True, timeout=600,
                           check=True)
    assert quiet.stderr == ""
