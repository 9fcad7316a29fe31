"""The configs shown in the docs are valid (docs that compile cannot drift from the schema)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ruamel.yaml import YAML

import kvreplay

REPO = Path(__file__).resolve().parents[2]


def _yaml_blocks(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return [b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if b.lstrip().startswith(
        ("engine:", "# yaml-language-server"))]


@pytest.mark.parametrize("doc", ["docs/config.md"])
def test_config_examples_in_docs_compile(doc: str) -> None:
    """Every full config example in the page compiles with no finding."""
    blocks = _yaml_blocks(REPO / doc)
    assert blocks
    for block in blocks:
        result = kvreplay.compile_config(YAML(typ="safe").load(block))
        assert result.ok and not result.diagnostics, result.diagnostics


def test_timing_default_gets_a_pointed_hint() -> None:
    """The predictor's `timing: {type: default}` is refused with a hint naming the alternatives."""
    result = kvreplay.compile_config({"engine": {"model": "m", "workers": {"aggregated": {
        "timing": {"type": "default"}}}}})
    (finding,) = result.diagnostics
    assert finding.rule == "SCHEMA-ENUM" and "no performance database" in (finding.hint or "")


def test_readme_python_snippets_run(monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The README's Python examples run as written, from the repository root."""
    monkeypatch.chdir(REPO)
    text = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
    assert float(capsys.readouterr().out.strip().splitlines()[-1]) > 0
