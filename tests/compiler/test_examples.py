"""Every example compiles cleanly, and its canonical JSON is pinned byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

import kvreplay

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


def test_there_are_examples() -> None:
    """The examples folder holds the five deployments the docs promise."""
    names = {p.name for p in EXAMPLES}
    assert {
        "agentx-g2-local.yaml",
        "agentx-g2-shared-pd.yaml",
        "shared-g2-aggregated.yaml",
        "disaggregated-hbm.yaml",
        "kv-router-mooncake.yaml",
    } <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_compiles_without_findings(path: Path) -> None:
    """An example has no errors and no warnings under the full support matrix."""
    result = kvreplay.compile_config(path)
    assert result.ok
    assert [d.rule for d in result.diagnostics] == []


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_json_is_pinned(path: Path, json_snapshot) -> None:  # type: ignore[no-untyped-def]
    """The compiled bytes of each example equal the committed snapshot."""
    assert kvreplay.compile_config(path).emitted() == json_snapshot
