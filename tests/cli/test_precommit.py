"""The pre-commit hooks end to end: installed by pre-commit itself from a local clone of this
repository's .pre-commit-hooks.yaml, run by `git commit` in a scratch project (no network: the
hooks run the kvreplay already installed, `language: system`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kvreplay.cli.main import main

REPO = Path(__file__).resolve().parents[2]
BIN = os.path.dirname(sys.executable)

pytest.importorskip("pre_commit")
if shutil.which("git") is None or shutil.which("kvreplay", path=BIN) is None:
    pytest.skip("needs git and the kvreplay console script", allow_module_level=True)

PYPROJECT = """[project]
name = "scratch"
version = "0"

[tool.kvreplay.compile]
"deploy/good.yaml" = "deploy/good.json"
"""
PRE_COMMIT_CONFIG = """repos:
  - repo: {hooks}
    rev: {rev}
    hooks:
      - id: kvreplay-lint
        language: system
      - id: kvreplay-compile-check
        language: system
      - id: kvreplay-compile-check
        alias: kvreplay-compile-fix
        language: system
        args: [--fix]
        stages: [manual]
"""
WORKFLOW = """name: ci
on: [push]
jobs:
  test: {runs-on: ubuntu-latest, steps: [{run: make}]}
"""
PACKAGE = '{"name": "scratch", "version": "1.0.0", "engines": {"node": ">=18"}}\n'
BAD = "engine:\n  model: m\n  backend: vlm\n  workers: {aggregated: {}}\n"
UNRELATED = (".pre-commit-config.yaml", ".github/workflows/ci.yml", "package.json")


def _env(home: Path) -> dict[str, str]:
    hook_variables = {"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"}
    env = {k: v for k, v in os.environ.items() if k not in hook_variables}
    return {**env, "PATH": BIN + os.pathsep + env.get("PATH", ""), "NO_COLOR": "1",
            "PRE_COMMIT_HOME": str(home / "cache"), "PRE_COMMIT_COLOR": "never",
            "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t.invalid",
            "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t.invalid"}


def _run(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run a command; its stderr goes to stdout (a git hook's output is on stderr)."""
    return subprocess.run(args, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300, check=False)


def _git(cwd: Path, env: dict[str, str], *args: str) -> str:
    done = _run(cwd, env, "git", *args)
    assert done.returncode == 0, done.stdout
    return done.stdout.strip()


def _commit(cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    _git(cwd, env, "add", "-A")
    return _run(cwd, env, "git", "commit", "-q", "-m", "change")


def _scratch(tmp_path: Path, env: dict[str, str]) -> Path:
    """A project with unrelated YAML/JSON, a config and its compiled JSON, hooks installed."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    shutil.copy(REPO / ".pre-commit-hooks.yaml", hooks)
    _git(hooks, env, "init", "-q")
    _git(hooks, env, "add", "-A")
    _git(hooks, env, "commit", "-q", "-m", "hooks")
    rev = _git(hooks, env, "rev-parse", "HEAD")
    project = tmp_path / "project"
    (project / ".github" / "workflows").mkdir(parents=True)
    (project / "deploy").mkdir()
    (project / "pyproject.toml").write_text(PYPROJECT)
    (project / ".pre-commit-config.yaml").write_text(PRE_COMMIT_CONFIG.format(hooks=hooks,
                                                                              rev=rev))
    (project / ".github" / "workflows" / "ci.yml").write_text(WORKFLOW)
    (project / "package.json").write_text(PACKAGE)
    shutil.copy(REPO / "examples" / "agentx-g2-local.yaml", project / "deploy" / "good.yaml")
    code = main(["compile", str(project / "deploy" / "good.yaml"),
                 "-o", str(project / "deploy" / "good.json")])
    assert code == 0
    _git(project, env, "init", "-q")
    installed = _run(project, env, sys.executable, "-m", "pre_commit", "install")
    assert installed.returncode == 0, installed.stdout
    return project


def test_hooks_in_a_scratch_repository(tmp_path: Path) -> None:
    """Unrelated YAML/JSON pass untouched and unreported, a bad config and a hand-edited
    compiled JSON fail with the real command to run, and the --fix hook repairs the JSON."""
    env = _env(tmp_path)
    project = _scratch(tmp_path, env)
    unrelated = {name: (project / name).read_bytes() for name in UNRELATED}

    first = _commit(project, env)
    assert first.returncode == 0, first.stdout
    assert "kvreplay lint" in first.stdout and "Passed" in first.stdout

    (project / "deploy" / "bad.yaml").write_text(BAD)
    (project / "package.json").write_text(PACKAGE.replace("1.0.0", "1.0.1"))
    bad = _commit(project, env)
    assert bad.returncode == 1
    assert "deploy/bad.yaml:3:12: error SCHEMA-ENUM" in bad.stdout
    assert not any(name in bad.stdout for name in UNRELATED), bad.stdout
    _git(project, env, "rm", "-q", "--cached", "deploy/bad.yaml")
    (project / "deploy" / "bad.yaml").unlink()
    assert _commit(project, env).returncode == 0  # unrelated edits alone pass
    unrelated["package.json"] = (project / "package.json").read_bytes()

    compiled = project / "deploy" / "good.json"
    good = compiled.read_text()
    edited = good.replace('"block_size": 4', '"block_size": 8', 1)
    assert edited != good
    compiled.write_text(edited)
    stale = _commit(project, env)
    assert stale.returncode == 1
    assert "deploy/good.json is stale: run `kvreplay compile deploy/good.yaml -o " \
        "deploy/good.json`" in stale.stdout
    assert "compile ... " not in stale.stdout and "(committed)" not in stale.stdout
    assert compiled.read_text() == edited  # checking never writes

    fixed = _run(project, env, sys.executable, "-m", "pre_commit", "run", "--hook-stage",
                 "manual", "kvreplay-compile-fix", "--files", "deploy/good.json")
    assert fixed.returncode == 1 and "files were modified by this hook" in fixed.stdout
    assert compiled.read_text() == good
    again = _run(project, env, sys.executable, "-m", "pre_commit", "run",
                 "kvreplay-compile-check", "--files", "deploy/good.json")
    assert again.returncode == 0, again.stdout
    assert _git(project, env, "diff", "HEAD", "--stat") == ""  # the committed bytes again
    assert {name: (project / name).read_bytes() for name in UNRELATED} == unrelated
