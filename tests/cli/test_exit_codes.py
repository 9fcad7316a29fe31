"""Exit codes 0/1/2 of cli.md, through real subprocesses."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
GOOD = REPO / "examples" / "agentx-g2-local.yaml"


def test_lint_clean_file_exits_0(cli_process: Callable[..., Any]) -> None:
    """A valid config lints clean: exit 0, nothing on stdout."""
    ran = cli_process("lint", str(GOOD))
    assert (ran.code, ran.out) == (0, "")


def test_lint_findings_exit_1(cli_process: Callable[..., Any], tmp_path: Path) -> None:
    """A config with an error: exit 1 and the finding on stdout."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("engine:\n  model: m\n  backend: vlm\n  workers: {aggregated: {}}\n")
    ran = cli_process("lint", str(bad))
    assert ran.code == 1
    assert "SCHEMA-ENUM" in ran.out and "Traceback" not in ran.err


def test_lint_unreadable_input_exits_2(cli_process: Callable[..., Any], tmp_path: Path) -> None:
    """A missing file is an unreadable-input case: exit 2, and the other files are still linted."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("engine:\n  model: m\n  backend: vlm\n  workers: {aggregated: {}}\n")
    ran = cli_process("lint", str(tmp_path / "missing.yaml"), str(bad))
    assert ran.code == 2
    assert "FILE-UNREADABLE" in ran.out and "SCHEMA-ENUM" in ran.out


def test_usage_error_exits_2(cli_process: Callable[..., Any]) -> None:
    """An unknown option is a usage error: exit 2."""
    assert cli_process("lint", "--no-such-flag", str(GOOD)).code == 2


def test_compile_config_errors_exit_1_and_write_nothing(cli_process: Callable[..., Any],
                                                        tmp_path: Path) -> None:
    """compile refuses a config with errors (exit 1) and writes no output file."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("engine:\n  model: m\n  workers: {aggregated: {kv_cache: {block_size: 0}}}\n")
    out = tmp_path / "out.json"
    ran = cli_process("compile", str(bad), "-o", str(out))
    assert ran.code == 1 and not out.exists()
    assert "SCHEMA-RANGE" in ran.err


def test_compile_check_stale_exits_1_with_diff(cli_process: Callable[..., Any],
                                               tmp_path: Path) -> None:
    """--check against a stale artifact: exit 1 and a unified diff on stdout; fresh: exit 0."""
    out = tmp_path / "spec.json"
    assert cli_process("compile", str(GOOD), "-o", str(out)).code == 0
    assert cli_process("compile", str(GOOD), "--check", str(out)).code == 0
    out.write_text(out.read_text().replace('"num_gpu_blocks": 3', '"num_gpu_blocks": 4'))
    ran = cli_process("compile", str(GOOD), "--check", str(out))
    assert ran.code == 1
    changed = [line for line in ran.out.splitlines() if '"num_gpu_blocks"' in line]
    assert [line[0] + line[1:].strip() for line in changed] == [
        '-"num_gpu_blocks": 4,', '+"num_gpu_blocks": 3,']


def test_explain_unknown_rule_exits_2(cli_process: Callable[..., Any]) -> None:
    """explain with an unknown rule ID is a usage error."""
    assert cli_process("explain", "NO-SUCH-RULE").code == 2
