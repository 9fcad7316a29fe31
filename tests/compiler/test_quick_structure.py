"""The quick structuring walk (schema/quick_structure.py) gives exactly what the cattrs
converters give, whenever it answers: on every shipped document and on one-value mutations of
them; and it answers for the plain documents (so runs and lints do take the fast path)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_quick_valid import CONFIGS, INVALID, _mutations, _native, _yaml

from kvreplay.compiler.model import Config
from kvreplay.schema import native_model as n
from kvreplay.schema.convert import converter, native_converter
from kvreplay.schema.quick_structure import quick_structure
from kvreplay.schema.scaling import ScalingOptions

REPO = Path(__file__).resolve().parents[2]


def _cattrs(doc: Any, cls: type, native: bool, strict: bool) -> tuple[bool, Any]:
    conv = native_converter(strict) if native else converter(detailed=False)
    try:
        return True, conv.structure(doc, cls)
    except Exception:
        return False, None


def _agrees(doc: Any, cls: type, native: bool, strict: bool) -> bool:
    """Whether the walk answered; when it did, the converter gave the same value (compared by
    repr too: 1 and 1.0, a tuple and a list are equal but not the same structure)."""
    quick = quick_structure(doc, cls, forbid_extra_keys=strict, native=native)
    if quick is None:
        return False
    done, value = _cattrs(doc, cls, native, strict)
    assert done, f"the walk structured what the converter refuses: {doc!r}"[:400]
    assert type(quick) is type(value) and quick == value and repr(quick) == repr(value)
    return True


def _shipped() -> list[tuple[str, Any, type, bool, bool]]:
    cases: list[tuple[str, Any, type, bool, bool]] = []
    for path in CONFIGS:
        cases.append((path.name, _yaml(path), Config, False, True))
        native = _native(path)
        cases += [(f"{path.name} native", native, n.Document, True, strict)
                  for strict in (True, False)]
    return cases


@pytest.mark.parametrize(("name", "doc", "cls", "native", "strict"), _shipped(),
                         ids=lambda v: str(v)[:40])
def test_same_value_on_shipped_documents(name: str, doc: Any, cls: type, native: bool,
                                         strict: bool) -> None:
    """Every example config (config model) and its compiled native spec (native model, strict
    and lenient): the walk answers, with the converter's value."""
    assert _agrees(doc, cls, native, strict), name


def test_declines_what_it_does_not_know() -> None:
    """Invalid documents and values outside the walk's types: no answer (the converter's)."""
    answered = [_agrees(_yaml(path), Config, False, True) for path in INVALID]
    assert answered.count(True) < len(answered)
    assert quick_structure({"engine": []}, Config, forbid_extra_keys=True, native=False) is None
    assert quick_structure([], n.Document, forbid_extra_keys=False, native=True) is None
    options = {"schedule": [{"at_ms": 0, "workers": {"workers": 1}}], "no_such": 1}
    assert quick_structure(options, ScalingOptions, forbid_extra_keys=True, native=True) is None


@pytest.mark.parametrize(("config", "native", "strict"), [
    ("kv-router-mooncake.yaml", False, True), ("agentx-g2-shared-pd.yaml", False, True),
    ("disaggregated-hbm.yaml", True, False), ("agentx-g2-warm-profile.yaml", True, True),
    ("kv-router-mooncake.yaml", True, False),
])
def test_same_value_on_one_value_mutations(config: str, native: bool, strict: bool) -> None:
    """Each node replaced by every JSON type and edge value, deleted, or given an unknown key:
    whenever the walk answers, the converter gives the same value; and it answers for most of
    what the converter structures (not for what only reads as a document by accident: a string
    iterated as a tuple, or as a mapping without keys)."""
    path = REPO / "examples" / config
    doc = _native(path) if native else _yaml(path)
    cls = n.Document if native else Config
    mutated = list(_mutations(doc))
    answered = sum(_agrees(m, cls, native, strict) for m in mutated)
    structured = sum(_cattrs(m, cls, native, strict)[0] for m in mutated)
    assert answered >= 0.85 * structured and answered > 80, (answered, structured)
