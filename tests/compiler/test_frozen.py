"""The Frozen classes (schema/frozen.py, blocks by tools/gen_models.py) behave as the attrs
classes they replace: the same __init__, repr, equality, hashing, freezing and pickling, and the
attrs view (`attrs.fields`, `attrs.evolve`, cattrs) of the same fields."""

from __future__ import annotations

import importlib
import inspect
import pickle
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest

from kvreplay.compiler import model as m
from kvreplay.compiler.pipeline import Compiled
from kvreplay.compiler.source import SourceMap
from kvreplay.schema import native_model as n
from kvreplay.schema import spec as s
from kvreplay.schema.convert import converter, native_converter
from kvreplay.schema.diagnostics import Diagnostic, Span
from kvreplay.schema.frozen import (
    FrozenInstanceError,
    Mutable,
    evolve,
    field_facts,
    is_frozen,
)

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
import gen_models  # noqa: E402


def _classes() -> list[type]:
    found = []
    for name in gen_models.MODULES:
        module = importlib.import_module(name)
        found += [v for v in vars(module).values()  # (a subclass of its own __init__ aside)
                  if is_frozen(v) and v.__module__ == name and
                  gen_models.BEGIN in inspect.getsource(v)]
    return found


CLASSES = _classes()


def _shadow(cls: type) -> Any:
    cls.__attrs_attrs__  # noqa: B018 (builds it)
    return cls.__dict__["__kv_shadow__"]


def test_there_are_classes() -> None:
    """The probe sees the models (a broken list cannot pass empty)."""
    assert {n.Document, m.Config, s.Spec, Diagnostic, SourceMap, Compiled} <= set(CLASSES)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__qualname__)
def test_init_signature_is_the_attrs_one(cls: type) -> None:
    """The generated __init__ takes the parameters, kinds and defaults attrs' __init__ did."""
    ours = inspect.signature(cls.__init__).parameters
    theirs = inspect.signature(_shadow(cls).__init__).parameters
    assert [(p.name, p.kind) for p in ours.values()] == \
        [(p.name, p.kind) for p in theirs.values()]
    for name, param in theirs.items():
        default = param.default
        if default is attrs.NOTHING or isinstance(default, attrs.Factory):  # a factory
            continue
        assert ours[name].default == default or (is_frozen(type(ours[name].default)) and
                                                repr(ours[name].default) == repr(default))
    assert [f.name for f in attrs.fields(cls)] == [f[0] for f in field_facts(cls)]


def _sample(cls: type) -> Any:
    """An instance of `cls` from its defaults (None for a required field)."""
    required = {alias: None for _, alias, init, needed, _ in field_facts(cls) if init and needed}
    return cls(**required)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__qualname__)
def test_values_behave_as_attrs_values(cls: type) -> None:
    """repr, equality, hashing and pickling agree with the attrs class of the same values;
    assignment is refused; evolve is attrs.evolve."""
    value = _sample(cls)
    shadow = _shadow(cls)(**{f.alias: getattr(value, f.name) for f in attrs.fields(cls)
                             if f.init})
    assert repr(value) == repr(shadow)
    assert value == _sample(cls)
    assert (value != _sample(cls)) is False
    assert value != shadow  # another class: not equal (attrs: NotImplemented)
    try:
        hash(shadow)
    except TypeError:  # a mapping inside: attrs cannot hash it either
        with pytest.raises(TypeError):
            hash(value)
    else:
        assert hash(value) == hash(_sample(cls))
    assert pickle.loads(pickle.dumps(value)) == value
    first = attrs.fields(cls)[0].name
    if issubclass(cls, Mutable):  # @attrs.define: assignable
        setattr(value, first, 1)
        assert getattr(value, first) == 1
    else:
        with pytest.raises(FrozenInstanceError):
            setattr(value, first, 1)
    assert evolve(value) == value == attrs.evolve(value)


def test_evolve_changes_one_field() -> None:
    """evolve replaces the named field and keeps the others (keyword-only `name` included)."""
    role = s.Role(name="decode", workers=2)
    changed = evolve(role, workers=3)
    assert (changed.name, changed.workers, changed.block_size) == ("decode", 3, role.block_size)
    assert changed != role and evolve(changed, workers=2) == role
    span = Span(file="a.yaml", line=3)
    assert evolve(Diagnostic("R", "error", "m", span), hint="h").hint == "h"


def test_converters_structure_and_unstructure_the_classes() -> None:
    """cattrs (through the attrs view) structures into the Frozen classes and back."""
    doc = {"replicas": 2, "tensor": 4}
    assert converter().structure(doc, m.Parallelism) == m.Parallelism(replicas=2, tensor=4)
    router = native_converter().structure({"policy": "kv_router", "seed": 3}, n.Router)
    assert type(router) is n.Router and router.seed == 3
    assert native_converter().unstructure(router)["policy"] == "kv_router"
