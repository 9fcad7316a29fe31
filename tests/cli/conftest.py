"""Helpers for CLI tests: run kvreplay in-process (fast) or as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest

from kvreplay.cli.main import main


@attrs.frozen
class Ran:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Ran]:
    """Run `kvreplay ARGS...` in this process and capture its output."""

    def run(*args: str) -> Ran:
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's own usage errors exit, as they do from a shell
            code = exc.code if isinstance(exc.code, int) else 2
        captured = capsys.readouterr()
        return Ran(code, captured.out, captured.err)

    return run


@pytest.fixture
def cli_process() -> Callable[..., Ran]:
    """Run `python -m kvreplay ARGS...` as a real subprocess."""

    def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Ran:
        done = subprocess.run(
            [sys.executable, "-m", "kvreplay", *args],
            capture_output=True, text=True, timeout=300, cwd=cwd,
            env={**os.environ, "NO_COLOR": "1", **(env or {})},
        )
        return Ran(done.returncode, done.stdout, done.stderr)

    return run
