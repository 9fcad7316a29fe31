"""Helpers for CLI tests: run kvreplay in-process (fast) or as a real subprocess."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest

from kvreplay.cli.main import main


def default_signals() -> None:
    """For a child process (`preexec_fn`): the signals a test sends act as in a terminal, even
    when the test run itself was started in the background (`&` ignores SIGINT, `nohup`
    SIGHUP), which the child would otherwise inherit, and rightly keep ignoring."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def synthetic_config(folder: Path, requests: int) -> Path:
    """A config of `requests` synthetic requests on one worker (long enough, with --stepwise,
    to be interrupted or to show progress)."""
    config = folder / "long.yaml"
    config.write_text(
        "engine:\n  model: m\n  workers:\n    aggregated:\n"
        "      kv_cache: {block_size: 16, capacity: {type: fixed, blocks: 4096}}\n"
        "      timing: {type: fixed, prefill_ms: 1, decode_ms: 1}\n"
        "traffic:\n  source: {type: synthetic, input_tokens: 64, output_tokens: 64}\n"
        f"  load: {{type: concurrency, concurrency: 32}}\n  stop: {{requests: {requests}}}\n")
    return config


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
