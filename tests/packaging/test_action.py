"""The GitHub Action (action.yml): its run steps, executed here as the runner would execute them.

A small stand-in for the runner: inputs take their defaults unless given, `${{ }}` expressions
are evaluated (only the few forms the action uses; anything else fails the test), each `run:`
step runs with `bash --noprofile --norc -eo pipefail` and its `env:`, `GITHUB_OUTPUT` and
`GITHUB_PATH` work as on GitHub, and `uses:` steps are recorded with their resolved `with:`
instead of being run. The install step runs against a stand-in `python` that records the pip
command, so no package is downloaded; the lint step runs the kvreplay under test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import pytest
from ruamel.yaml import YAML

REPO = Path(__file__).resolve().parents[2]
ACTION: dict[str, Any] = YAML(typ="safe").load((REPO / "action.yml").read_text("utf-8"))
SARIF_SCHEMA = REPO / "tests" / "cases" / "sarif" / "sarif-schema-2.1.0.json"
BAD = REPO / "rules" / "cases" / "G2-BACKEND" / "fail-sglang.yaml"  # one error, line 8
WARNS = REPO / "rules" / "cases" / "G2-SHARED-LINK" / "fail-local-shared-bandwidth.yaml"
EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}")
# The runner's environment the steps see (the rest is set below, as GitHub sets it).
PASSED_ENV = ("HOME", "TMPDIR", "XDG_CACHE_HOME", "KVREPLAY_CACHE_DIR", "KVREPLAY_NO_CACHE")

# A `python` that records its arguments; `-m venv DIR` makes DIR/bin/python (itself) too.
FAKE_PYTHON = """#!/usr/bin/env bash
echo "$0 $*" >> "$KVREPLAY_TEST_LOG"
if [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin" && cp "$0" "$3/bin/python"; fi
"""


@attrs.frozen
class Step:
    name: str
    ran: bool
    code: int | None = None
    out: str = ""
    err: str = ""
    uses: str | None = None
    with_: dict[str, str] = attrs.field(factory=dict)


@attrs.frozen
class Outcome:
    steps: dict[str, Step]
    outputs: dict[str, str]
    failed: bool

    def out(self, name: str) -> str:
        return self.steps[name].out


class Context:
    """`inputs.*` and `steps.<id>.outputs.*`, as GitHub's expressions see them."""

    def __init__(self, inputs: dict[str, str]) -> None:
        unknown = set(inputs) - set(ACTION["inputs"])
        assert not unknown, f"not inputs of action.yml: {unknown}"
        self.inputs = {name: str(spec.get("default", "")) for name, spec in
                       ACTION["inputs"].items()} | inputs
        self.steps: dict[str, dict[str, str]] = {}

    def value(self, token: str) -> str:
        token = token.strip()
        if token.startswith("'") and token.endswith("'"):
            return token[1:-1]
        parts = token.split(".")
        if parts[0] == "inputs" and len(parts) == 2:
            return self.inputs[parts[1]]
        if parts[0] == "steps" and len(parts) == 4 and parts[2] == "outputs":
            return self.steps.get(parts[1], {}).get(parts[3], "")
        raise AssertionError(f"expression the test runner does not know: {token!r}")

    def condition(self, text: str) -> bool:
        """`a == 'b'`, `a != 'b'`, joined by `&&` (string comparisons ignore case, as on GitHub)."""
        result = True
        for clause in EXPRESSION.sub(r"\1", text).split("&&"):
            match = re.fullmatch(r"\s*(\S+)\s*(==|!=)\s*(\S+)\s*", clause)
            assert match, f"condition the test runner does not know: {clause!r}"
            left, op, right = match.groups()
            same = self.value(left).lower() == self.value(right).lower()
            result = result and (same if op == "==" else not same)
        return result

    def substitute(self, text: object) -> str:
        return EXPRESSION.sub(lambda m: self.value(m.group(1)), str(text))


def run_action(workspace: Path, tmp: Path, **inputs: str) -> Outcome:
    """Run action.yml's steps in `workspace` with these inputs (dashes as underscores)."""
    context = Context({k.replace("_", "-"): v for k, v in inputs.items()})
    fake_bin = tmp / "fake-bin"
    fake_bin.mkdir(exist_ok=True)
    (fake_bin / "python").write_text(FAKE_PYTHON, encoding="utf-8")
    (fake_bin / "python").chmod(0o755)
    runner_temp = tmp / "runner-temp"
    runner_temp.mkdir(exist_ok=True)
    base_path = os.pathsep.join([str(fake_bin), str(Path(sys.executable).parent),
                                 os.environ.get("PATH", "")])
    added_path: list[str] = []
    steps: dict[str, Step] = {}
    failed = False
    for number, spec in enumerate(ACTION["runs"]["steps"]):
        name = spec.get("id") or spec["name"]
        if failed or ("if" in spec and not context.condition(spec["if"])):
            steps[name] = Step(name, ran=False)
            continue
        if "uses" in spec:
            with_ = {k: context.substitute(v) for k, v in (spec.get("with") or {}).items()}
            steps[name] = Step(name, ran=True, uses=spec["uses"], with_=with_)
            continue
        assert spec["shell"] == "bash"
        outputs, path_file = tmp / f"output-{number}", tmp / f"path-{number}"
        outputs.touch()
        path_file.touch()
        script = tmp / f"step-{number}.sh"
        script.write_text(spec["run"], encoding="utf-8")
        env = {
            "PATH": os.pathsep.join([*reversed(added_path), base_path]),
            **{k: v for k, v in os.environ.items() if k in PASSED_ENV},
            "LANG": "C.UTF-8", "CI": "true", "GITHUB_ACTIONS": "true",
            "GITHUB_WORKSPACE": str(workspace), "GITHUB_ACTION_PATH": str(REPO),
            "GITHUB_OUTPUT": str(outputs), "GITHUB_PATH": str(path_file),
            "RUNNER_TEMP": str(runner_temp), "KVREPLAY_TEST_LOG": str(tmp / "python.log"),
            **{k: context.substitute(v) for k, v in (spec.get("env") or {}).items()},
        }
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                              cwd=workspace, env=env, capture_output=True, text=True,
                              timeout=300)
        if "id" in spec:
            context.steps[spec["id"]] = dict(
                line.split("=", 1) for line in outputs.read_text("utf-8").splitlines() if line)
        added_path += [p for p in path_file.read_text("utf-8").splitlines() if p]
        steps[name] = Step(name, ran=True, code=done.returncode, out=done.stdout, err=done.stderr)
        failed = done.returncode != 0
    outputs_ = {k: context.substitute(v["value"]) for k, v in ACTION["outputs"].items()}
    return Outcome(steps, outputs_, failed)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A checkout with the repository's examples and two configs that fail."""
    root = tmp_path / "ws"
    shutil.copytree(REPO / "examples", root / "examples")
    (root / "deploy").mkdir()
    shutil.copy(BAD, root / "deploy" / "g2-sglang.yaml")
    shutil.copy(WARNS, root / "deploy" / "shared-link.yaml")
    return root


def test_scripts_take_inputs_only_through_env() -> None:
    """No `${{ }}` inside a `run:` script (an input's text can never become shell code), and
    every expression names a real input or step."""
    ids = {s.get("id") for s in ACTION["runs"]["steps"]}
    for spec in ACTION["runs"]["steps"]:
        assert "${{" not in spec.get("run", "")
        for value in (spec.get("env") or {}).values():
            for expr in EXPRESSION.findall(str(value)):
                kind, name, *_ = expr.strip().split(".")
                assert (kind == "inputs" and name in ACTION["inputs"]) or \
                    (kind == "steps" and name in ids), expr
    assert ACTION["runs"]["using"] == "composite"


def test_clean_examples_annotate_nothing(workspace: Path, tmp_path: Path) -> None:
    """On the examples, lint exits 0, prints no annotation, and the action succeeds."""
    run = run_action(workspace, tmp_path, paths="examples")
    assert not run.failed and run.outputs == {"exit-code": "0", "sarif-file": ""}
    assert run.steps["lint"].code == 0 and "::" not in run.out("lint")
    assert not run.steps["Fail on findings"].ran and not run.steps["Upload SARIF"].ran


def test_bad_config_is_annotated_and_fails(workspace: Path, tmp_path: Path) -> None:
    """A G2-on-SGLang config: a `::error` annotation at its file and line, exit status 1 as the
    action's output, and the last step fails the job with it."""
    run = run_action(workspace, tmp_path, paths="examples\ndeploy/g2-sglang.yaml")
    assert run.outputs["exit-code"] == "1" and run.failed
    (line,) = [x for x in run.out("lint").splitlines() if x.startswith("::")]
    assert line.startswith("::error file=deploy/g2-sglang.yaml,line=8,")
    assert ",title=G2-BACKEND::" in line
    assert run.steps["Fail on findings"].code == 1


def test_strict_and_extra_args(workspace: Path, tmp_path: Path) -> None:
    """A warning passes unless `strict`; `args` reach kvreplay (here an --ignore)."""
    run = run_action(workspace, tmp_path, paths="deploy/shared-link.yaml")
    assert run.outputs["exit-code"] == "0" and "::warning file=deploy/shared-link.yaml" in \
        run.out("lint")
    run = run_action(workspace, tmp_path, paths="deploy/shared-link.yaml", strict="true")
    assert run.outputs["exit-code"] == "1" and run.failed
    run = run_action(workspace, tmp_path, paths="deploy", args="--ignore G2-BACKEND --strict")
    assert run.outputs["exit-code"] == "1"
    assert "G2-BACKEND" not in run.out("lint") and "G2-SHARED-LINK" in run.out("lint")


def test_sarif_is_written_valid_and_uploaded(workspace: Path, tmp_path: Path) -> None:
    """With `sarif`, the log validates against SARIF 2.1.0 with workspace-relative URIs, the
    upload step gets that file, and the job still fails on the finding after uploading."""
    run = run_action(workspace, tmp_path, paths="deploy/g2-sglang.yaml examples", sarif="true")
    assert run.outputs == {"exit-code": "1", "sarif-file": "kvreplay.sarif"} and run.failed
    log = json.loads((workspace / "kvreplay.sarif").read_text("utf-8"))
    schema = json.loads(SARIF_SCHEMA.read_text("utf-8"))
    jsonschema.validators.validator_for(schema)(schema).validate(log)
    (result,) = log["runs"][0]["results"]
    assert result["ruleId"] == "G2-BACKEND"
    artifact = result["locations"][0]["physicalLocation"]["artifactLocation"]
    assert artifact == {"uri": "deploy/g2-sglang.yaml", "uriBaseId": "%SRCROOT%"}
    assert log["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"] == workspace.as_uri() + "/"
    upload = run.steps["Upload SARIF"]
    assert upload.uses and upload.uses.startswith("github/codeql-action/upload-sarif@")
    assert upload.with_ == {"sarif_file": "kvreplay.sarif", "category": "kvreplay"}
    assert (workspace / upload.with_["sarif_file"]).is_file()
    assert run.steps["Fail on findings"].code == 1


def test_clean_sarif_is_uploaded_and_passes(workspace: Path, tmp_path: Path) -> None:
    """A clean run uploads an empty result list (closing old alerts) and succeeds; the SARIF
    file's folder is made when missing."""
    run = run_action(workspace, tmp_path, paths="examples", sarif="true",
                     sarif_file="out/k.sarif", category="configs")
    assert not run.failed and run.outputs == {"exit-code": "0", "sarif-file": "out/k.sarif"}
    assert json.loads((workspace / "out" / "k.sarif").read_text("utf-8"))["runs"][0][
        "results"] == []
    assert run.steps["Upload SARIF"].with_ == {"sarif_file": "out/k.sarif",
                                               "category": "configs"}


def test_usage_error_uploads_nothing(workspace: Path, tmp_path: Path) -> None:
    """An unknown rule in `args` is a usage error: exit 2, no SARIF to upload, the job fails."""
    run = run_action(workspace, tmp_path, paths="examples", sarif="true",
                     args="--select NO-SUCH-RULE")
    assert run.outputs == {"exit-code": "2", "sarif-file": ""} and run.failed
    assert not run.steps["Upload SARIF"].ran and run.steps["Fail on findings"].code == 2


@pytest.mark.parametrize(("inputs", "spec"), [
    ({}, str(REPO)),
    ({"version": "0.1.0"}, "kvreplay==0.1.0"),
    ({"version": "0.1.0", "install_source": "dist/kvreplay-0.1.0-py3-none-any.whl"},
     "dist/kvreplay-0.1.0-py3-none-any.whl"),
])
def test_install_step(workspace: Path, tmp_path: Path, inputs: dict[str, str],
                      spec: str) -> None:
    """The install step makes a virtual environment in RUNNER_TEMP and pip-installs the action's
    own checkout by default, else the PyPI version, else the given source; its bin folder goes
    on the PATH of the later steps."""
    run = run_action(workspace, tmp_path, paths="examples", **inputs)
    assert run.steps["install"].code == 0, run.steps["install"].err
    venv = tmp_path / "runner-temp" / "kvreplay-venv"
    log = (tmp_path / "python.log").read_text("utf-8").splitlines()
    assert log[0].endswith(f"python -m venv {venv}")
    assert log[1] == (f"{venv}/bin/python -m pip install --disable-pip-version-check --quiet "
                      f"{spec}")
    assert run.steps["Set up Python"].uses == "actions/setup-python@v5"
    assert run.steps["Set up Python"].with_ == {"python-version": "3.12"}


def test_setup_python_can_be_skipped(workspace: Path, tmp_path: Path) -> None:
    """An empty `python-version` uses the runner's Python (setup-python does not run)."""
    run = run_action(workspace, tmp_path, paths="examples", python_version="")
    assert not run.steps["Set up Python"].ran and not run.failed


def test_documented_workflows_use_real_inputs() -> None:
    """Every `uses: kvreplay/kvreplay@...` in docs/ci.md passes only inputs action.yml has,
    and the page shows both modes and the permission SARIF upload needs."""
    text = (REPO / "docs" / "ci.md").read_text("utf-8")
    blocks = [YAML(typ="safe").load(b) for b in re.findall(r"```yaml\n(.*?)```", text, re.S)]
    uses = [step for block in blocks if isinstance(block, dict)
            for job in (block.get("jobs") or {}).values() for step in job["steps"]
            if str(step.get("uses", "")).startswith("kvreplay/kvreplay@")]
    assert len(uses) >= 2
    for step in uses:
        assert set(step.get("with") or {}) <= set(ACTION["inputs"]), step
    assert any((s.get("with") or {}).get("sarif") in (True, "true") for s in uses)
    assert "security-events: write" in text
