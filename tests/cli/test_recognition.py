"""Which files are ours: when walking a folder, only kvreplay configs and native specs are linted
(named by the settings, or recognized by content); named files always are; .gitignore counts."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kvreplay.cli.recognize import CONFIG_KEYS, NATIVE_KEYS, SWEEP_KEYS, recognize_text

REPO = Path(__file__).resolve().parents[2]
BAD = "engine:\n  model: m\n  backend: vlm\n  workers: {aggregated: {}}\n"
UNRELATED = {
    "other-kind.yaml": "kind: sweep-config\nbase: x\n",
    ".pre-commit-config.yaml": "repos:\n  - repo: local\n    hooks: []\n",
    "ci.yml": "name: ci\non: [push]\njobs:\n  t: {runs-on: x, steps: []}\n",
    "package.json": '{"name": "x", "engines": {"node": "18"}, "spec": 1}\n',
    "k8s.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: []\n",
    "compose.yaml": "services:\n  engine:\n    image: x\n",
    "broken.yaml": "a: [\n",
}


def _linted(ran: Any) -> list[str]:
    return [Path(f["path"]).name for f in json.loads(ran.out)["files"]]


@pytest.mark.parametrize(("head", "why"), [
    ("# yaml-language-server: $schema=./kvreplay.schema.json\nfoo: 1\n", "schema comment"),
    ("# yaml-language-server: $schema=https://kvreplay.dev/schema/config.schema.json\n",
     "schema comment"),
    ("# c\n---\nrouter: {}\nengine:\n  model: m\n", "config keys"),
    ('"engine": {}\n', "config keys"),
    ('{"traffic": {"a": {"spec": 1}}, "spec": {}}', "native keys"),
    ('\ufeff{\n  "engine": {"model": "m"}\n}', "config keys"),
    ("kind: sweep\nbase: cfg.yaml\ngrid:\n  router.policy: [kv, round_robin]\n", "sweep keys"),
    ("kind: 'sweep'  # a sweep\npoints: []\n", "sweep keys"),
])
def test_recognized_by_content(head: str, why: str) -> None:
    """The schema comment, a config's `engine`, a native spec's `spec` (alone or with traffic)."""
    assert recognize_text(head) == why


@pytest.mark.parametrize("name", sorted(UNRELATED))
def test_unrelated_files_are_not_recognized(name: str) -> None:
    """Workflows, pre-commit configs, package.json, Kubernetes manifests, compose files."""
    assert recognize_text(UNRELATED[name]) is None


def test_top_level_keys_match_the_schemas() -> None:
    """The sniffed key sets are the top-level properties of the config and native schemas."""
    for name, keys in (("config", CONFIG_KEYS), ("native", NATIVE_KEYS), ("sweep", SWEEP_KEYS)):
        schema = json.loads((REPO / "schema" / f"{name}.schema.json").read_text())
        assert set(schema["properties"]) == keys


def test_walk_lints_only_ours_and_counts_the_rest(cli: Callable[..., Any], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Unrelated YAML/JSON is skipped silently; --verbose names each and counts them."""
    for name, text in UNRELATED.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "bad.yaml").write_text(BAD)
    monkeypatch.chdir(tmp_path)
    ran = cli("lint", "--format", "json")
    assert ran.code == 1 and _linted(ran) == ["bad.yaml"] and ran.err == ""
    verbose = cli("lint", "--format", "json", "-v", ".")
    assert f"{len(UNRELATED)} not a kvreplay config" in verbose.err
    assert "skipped package.json: not a kvreplay config" in verbose.err
    named = cli("lint", "--format", "json", "bad.yaml", "broken.yaml")
    assert _linted(named) == ["bad.yaml", "broken.yaml"]  # named files are always linted
    hook = cli("lint", "--format", "json", "--force-exclude", "bad.yaml", "package.json")
    assert _linted(hook) == ["bad.yaml"]


def test_include_and_exclude(cli: Callable[..., Any], tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    """`include` names files whatever their content; `exclude` drops files and folders."""
    (tmp_path / "deploy" / "old").mkdir(parents=True)
    (tmp_path / "deploy" / "odd.conf").write_text("engin: {}\n")
    (tmp_path / "deploy" / "old" / "bad.yaml").write_text(BAD)
    (tmp_path / "deploy" / "bad.yaml").write_text(BAD)
    (tmp_path / "kvreplay.toml").write_text('include = ["deploy/*.conf"]\nexclude = ["old"]\n')
    monkeypatch.chdir(tmp_path)
    ran = cli("lint", "--format", "json", "deploy")
    assert _linted(ran) == ["bad.yaml", "odd.conf"]
    forced = cli("lint", "--format", "json", "--force-exclude", "deploy/old/bad.yaml")
    assert forced.code == 0 and json.loads(forced.out)["files"] == []
    assert _linted(cli("lint", "--format", "json", "deploy/old/bad.yaml")) == ["bad.yaml"]


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_gitignore_is_respected_in_a_git_work_tree(cli: Callable[..., Any], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Ignored files are skipped when walking, linted with --no-respect-gitignore or when
    named; the setting can turn it off too."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "bad.yaml").write_text(BAD)
    (tmp_path / "bad.yaml").write_text(BAD)
    (tmp_path / ".gitignore").write_text("build/\n")
    monkeypatch.chdir(tmp_path)
    assert _linted(cli("lint", "--format", "json")) == ["bad.yaml"]
    assert len(_linted(cli("lint", "--format", "json", "--no-respect-gitignore"))) == 2
    assert _linted(cli("lint", "--format", "json", "build/bad.yaml")) == ["bad.yaml"]
    (tmp_path / "kvreplay.toml").write_text("respect-gitignore = false\n")
    assert len(_linted(cli("lint", "--format", "json"))) == 2


def test_nothing_to_lint_is_not_an_error(cli: Callable[..., Any], tmp_path: Path) -> None:
    """A folder with no kvreplay file: exit 0, one line on stderr, and still a valid document
    for the machine formats (a SARIF upload needs one)."""
    (tmp_path / "package.json").write_text(UNRELATED["package.json"])
    ran = cli("lint", "--format", "concise", str(tmp_path))
    assert ran.code == 0 and ran.out == "" and "no kvreplay configs found" in ran.err
    sarif = cli("lint", "--format", "sarif", str(tmp_path))
    assert sarif.code == 0 and json.loads(sarif.out)["runs"][0]["results"] == []
