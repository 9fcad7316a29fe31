"""structure_config tries the untraced converter first and falls back to the traced one: the
model is the traced converter's, and a document that does not structure is still reported with
the path of what failed."""

from __future__ import annotations

from pathlib import Path

from ruamel.yaml import YAML

from kvreplay.compiler.convert import structure_config
from kvreplay.compiler.model import Config
from kvreplay.schema.convert import converter

REPO = Path(__file__).resolve().parents[2]


def test_the_untraced_try_gives_the_traced_model() -> None:
    """Every example config structures to the model the traced converter builds."""
    for path in sorted((REPO / "examples").glob("*.yaml")):
        data = YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))
        model, problems = structure_config(data, path.name)
        assert problems == [] and model == converter().structure(data, Config), path.name


def test_a_document_that_does_not_structure_is_located() -> None:
    """A failure of the untraced try is reported by the traced one, at the failing path."""
    model, problems = structure_config({"engine": {"mode": "aggregated", "model": 5}}, "c.yaml")
    assert model is None and problems
    assert {d.rule for d in problems} == {"MODEL-INVALID"}
    assert any(d.span.path == "$.engine.model" and d.span.file == "c.yaml" for d in problems)
