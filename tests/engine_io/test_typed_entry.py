"""`kvreplay run` hands the engine the compiled Spec itself (kvreplay.engine.Replay), not its
native document: that is the same replay only if the document reads back into the same Spec,
value for value and type for type (an int where the document has a float would print
differently in a report)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from kvreplay.api import compile_config
from kvreplay.engine import read_engine_spec

REPO = Path(__file__).resolve().parents[2]
SOURCES = sorted([*(REPO / "examples").glob("*.yaml"),
                  *(REPO / "rules" / "cases").glob("*/pass-*.yaml")])


def differences(ours: Any, theirs: Any, path: str = "spec") -> list[str]:
    """Where two values differ in value or in type (attrs classes field by field)."""
    if type(ours) is not type(theirs):
        return [f"{path}: {ours!r} ({type(ours).__name__}) vs {theirs!r} "
                f"({type(theirs).__name__})"]
    if attrs.has(type(ours)):
        return [d for f in attrs.fields(type(ours))
                for d in differences(getattr(ours, f.name), getattr(theirs, f.name),
                                     f"{path}.{f.name}")]
    if isinstance(ours, tuple | list):
        if len(ours) != len(theirs):
            return [f"{path}: {len(ours)} items vs {len(theirs)}"]
        return [d for i, (a, b) in enumerate(zip(ours, theirs, strict=True))
                for d in differences(a, b, f"{path}[{i}]")]
    if isinstance(ours, dict):
        if ours.keys() != theirs.keys():
            return [f"{path}: keys {sorted(ours)} vs {sorted(theirs)}"]
        return [d for k in ours for d in differences(ours[k], theirs[k], f"{path}.{k}")]
    return [] if ours == theirs else [f"{path}: {ours!r} vs {theirs!r}"]


def test_the_corpus_is_there() -> None:
    """The examples and the rules' passing cases are found (the test below is not empty)."""
    assert len(SOURCES) > 40


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_compiled_spec_is_the_spec_its_document_reads_into(source: Path) -> None:
    """Every example and passing rule case: the engine's reading of the emitted document is
    the compiled Spec, with the same types."""
    compiled = compile_config(source)
    if not compiled.ok:
        pytest.skip("a case with errors (of other rules) never reaches the engine")
    assert compiled.spec is not None
    assert differences(compiled.spec, read_engine_spec(compiled.native())) == []


def test_the_native_document_is_emitted_once() -> None:
    """Compiled.native() is computed once and then shared."""
    compiled = compile_config(REPO / "examples" / "kv-router-mooncake.yaml")
    assert compiled.native() is compiled.native()
