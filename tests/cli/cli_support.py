"""Plain helpers for the CLI tests (own module: `conftest` names clash across folders)."""

from __future__ import annotations

import os
import signal
from pathlib import Path


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


def snapshot(folder: Path) -> dict[str, tuple[int, int, bytes | str]]:
    """Every entry below `folder`: mode, inode and content (a symlink's target)."""
    found: dict[str, tuple[int, int, bytes | str]] = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        body: bytes | str = os.readlink(path) if path.is_symlink() else (
            path.read_bytes() if path.is_file() else b"")
        found[str(path.relative_to(folder))] = (info.st_mode, info.st_ino, body)
    return found
