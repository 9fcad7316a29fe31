"""Hostile outputs: a stdout that cannot be written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GOOD = REPO / "examples" / "agentx-g2-local.yaml"

# -- stdout that cannot be written ------------------------------------------------------------


@pytest.mark.parametrize("args", [
    ("compile", str(GOOD)),
    ("lint", "--format", "json", str(GOOD)),
    ("schema", "config"),
    ("--version",),
    ("compile", "--help"),
])
def test_stdout_on_a_full_disk_is_an_output_error(args: tuple[str, ...]) -> None:
    """`> /dev/full`: exit 2 and one line saying stdout could not be written (no "internal
    error", no traceback, no "Exception ignored")."""
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "kvreplay", *args], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr == "kvreplay: cannot write to stdout: No space left on device\n"


def test_a_closed_stdout_is_an_output_error() -> None:
    """`>&-`: exit 2 with one line."""
    done = subprocess.run([sys.executable, "-m", "kvreplay", "compile", str(GOOD)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          timeout=120, preexec_fn=lambda: os.close(1))
    assert (done.returncode, done.stderr) == (2, "kvreplay: cannot write to stdout: it is "
                                                 "closed\n")


def test_a_reader_that_goes_away_is_not_an_error() -> None:
    """`| head -c1`: the rest is dropped quietly, exit 0."""
    with subprocess.Popen([sys.executable, "-m", "kvreplay", "schema", "config"],  # 94 kB
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.read(1)
        proc.stdout.close()
        err = proc.stderr.read()
        assert (proc.wait(timeout=60), err) == (0, b"")
