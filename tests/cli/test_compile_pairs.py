"""`compile --check-pairs [FILE...]` and `--fix`: configured pairs (either side selects its
pair), the x.yaml / x.json convention, and messages that name the real command."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def project(cli: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """deploy/prod.yaml compiled to build/prod.json (a configured pair), unrelated files."""
    (tmp_path / "deploy").mkdir()
    (tmp_path / "build").mkdir()
    shutil.copy(REPO / "examples" / "agentx-g2-local.yaml", tmp_path / "deploy" / "prod.yaml")
    (tmp_path / "kvreplay.toml").write_text('[compile]\n"deploy/prod.yaml" = "build/prod.json"\n')
    (tmp_path / "package.json").write_text('{"name": "x"}\n')
    monkeypatch.chdir(tmp_path)
    assert cli("compile", "deploy/prod.yaml", "-o", "build/prod.json").code == 0
    return tmp_path


def _stale(project: Path) -> str:
    output = project / "build" / "prod.json"
    edited = output.read_text().replace('"block_size": 4', '"block_size": 8', 1)
    output.write_text(edited)
    return edited


def test_either_side_selects_the_pair(cli: Callable[..., Any], project: Path) -> None:
    """Staging only the compiled JSON (or only the config) checks the pair; unrelated files
    are skipped."""
    assert cli("compile", "--check-pairs", "package.json").code == 0
    assert cli("compile", "--check-pairs").code == 0
    _stale(project)
    for staged in ("build/prod.json", "deploy/prod.yaml"):
        ran = cli("compile", "--check-pairs", staged, "package.json")
        assert ran.code == 1
        assert "--- build/prod.json (on disk)" in ran.out
        assert "+++ build/prod.json (compiled from deploy/prod.yaml)" in ran.out
        assert ran.err == ("kvreplay: build/prod.json is stale: run `kvreplay compile "
                           "deploy/prod.yaml -o build/prod.json` (or add --fix)\n")
    assert cli("compile", "--check-pairs").code == 1  # every configured pair


def test_fix_rewrites_and_exits_1(cli: Callable[..., Any], project: Path) -> None:
    """--fix (alias --write) rewrites a stale or missing output atomically and exits 1; an up
    to date one is left alone (exit 0)."""
    output = project / "build" / "prod.json"
    good = output.read_text()
    _stale(project)
    os.chmod(output, 0o600)
    ran = cli("compile", "--fix", "build/prod.json")
    assert ran.code == 1 and output.read_text() == good
    assert ran.err == "kvreplay: build/prod.json was stale: rewritten from deploy/prod.yaml\n"
    assert os.stat(output).st_mode & 0o777 == 0o600
    assert not list(project.rglob(".kvreplay-*.tmp"))
    assert cli("compile", "--check-pairs", "--fix").code == 0
    output.unlink()
    assert cli("compile", "--write", "deploy/prod.yaml", "--check", "build/prod.json").code == 1
    assert output.read_text() == good


def test_sibling_convention_needs_a_kvreplay_config(cli: Callable[..., Any],
                                                    project: Path) -> None:
    """Without a configured pair, x.yaml beside x.json is a pair, but only when x.yaml is a
    kvreplay config (openapi.yaml beside openapi.json is not)."""
    (project / "kvreplay.toml").unlink()
    shutil.copy(project / "deploy" / "prod.yaml", project / "prod.yaml")
    (project / "prod.json").write_text("{}\n")
    (project / "openapi.yaml").write_text("openapi: 3.0.0\ninfo: {title: x}\n")
    (project / "openapi.json").write_text('{"openapi": "3.0.0"}\n')
    assert cli("compile", "--check-pairs", "openapi.json", "openapi.yaml").code == 0
    ran = cli("compile", "--check-pairs", "prod.json")
    assert ran.code == 1 and "run `kvreplay compile prod.yaml -o prod.json`" in ran.err


def test_the_command_carries_the_options(cli: Callable[..., Any], project: Path) -> None:
    """The suggested command repeats --set (shell-quoted) and --no-matrix."""
    ran = cli("compile", "deploy/prod.yaml", "--check", "build/prod.json", "--no-matrix",
              "--set", "engine.model=my model")
    assert ran.code == 1
    assert ("run `kvreplay compile deploy/prod.yaml --set 'engine.model=my model' --no-matrix "
            "-o build/prod.json`") in ran.err


def test_fix_with_output_is_a_usage_error(cli: Callable[..., Any], project: Path) -> None:
    """-o always writes: --fix with it is refused."""
    ran = cli("compile", "deploy/prod.yaml", "-o", "x.json", "--fix")
    assert ran.code == 2 and not (project / "x.json").exists()
