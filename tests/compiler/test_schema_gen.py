"""The schemas are generated from the attrs models (compiler/schema_gen.py)."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any, Literal

import attrs
import pytest

from kvreplay.compiler import model as m
from kvreplay.compiler import schema_gen
from kvreplay.schema import native_model as n
from kvreplay.schema.frozen import Frozen
from kvreplay.schema.schema_facts import (
    OBJECTS,
    SCHEMA,
    choice,
    described,
    nested,
    only_keys,
    positive,
)

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "schema" / "config.schema.json"


def _classes(cls: type, seen: set[type]) -> set[type]:
    seen.add(cls)
    for tp in typing.get_type_hints(cls).values():
        for member in (tp, *typing.get_args(tp)):
            if isinstance(member, type) and attrs.has(member) and member not in seen:
                _classes(member, seen)
    return seen


@pytest.mark.parametrize("root", [m.Config, n.Document], ids=["config", "native"])
def test_every_model_class_and_leaf_field_carries_schema_facts(root: type) -> None:
    """Every class reachable from the root is described; every field is a fact or a nested
    class."""
    for cls in _classes(root, set()):
        assert cls in OBJECTS, cls.__name__
        for field in attrs.fields(cls):
            tp = typing.get_type_hints(cls)[field.name]
            nested = [t for t in (tp, *typing.get_args(tp)) if isinstance(t, type) and attrs.has(t)]
            assert SCHEMA in field.metadata or nested, f"{cls.__name__}.{field.name}"


def test_the_walker_reproduces_the_committed_properties() -> None:
    """Property order, enums from Literal and defaults from the model (before bound notes)."""
    committed = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    fresh = schema_gen.config_schema()
    assert list(fresh) == list(committed)
    assert list(fresh["properties"]) == [f.name for f in attrs.fields(m.Config)]
    source = fresh["properties"]["traffic"]["properties"]["source"]["properties"]
    assert source["format"]["enum"] == list(typing.get_args(
        typing.get_type_hints(m.Source, vars(m))["format"]))
    assert source["nested_timestamp_basis"]["default"] == "auto"  # APPLIED_DEFAULT
    assert source["input_tokens"]["default"] == m.Source().input_tokens


def test_the_walker_refuses_overlays_on_unknown_keys() -> None:
    @described("Broken.", overlays=[only_keys("type", "a", ["missing"])])
    class Broken(Frozen):
        type: Literal["a"] = choice("a", "Kind.")

    with pytest.raises(ValueError, match="missing"):
        schema_gen.object_schema(Broken)
    del OBJECTS[Broken]


def test_the_walker_refuses_a_field_without_facts() -> None:
    @described("Bare.")
    class Bare(Frozen):
        count: int = 1
        ok: int = positive(1, "Fine.")

    with pytest.raises(ValueError, match="count: no schema facts"):
        schema_gen.object_schema(Bare)
    del OBJECTS[Bare]


def test_numbers_take_their_bounds_from_the_annotation() -> None:
    """`positive` is minimum 1 on an integer, exclusiveMinimum 0 on a number; an integer's own
    maximum is stated in its description."""
    @described("Numbers.")
    class Numbers(Frozen):
        whole: int = positive(2, "W.", 9)
        real: float | None = positive(None, "R.")

    props: dict[str, Any] = schema_gen.object_schema(Numbers)["properties"]
    del OBJECTS[Numbers]
    assert props["whole"] == {"type": "integer", "minimum": 1, "maximum": 9,
                              "description": "W. At most 9.", "default": 2}
    assert props["real"] == {"type": "number", "exclusiveMinimum": 0, "maximum": 1e15,
                             "description": "R."}


@described("Leaf.", define="leaf")
class _Leaf(Frozen):
    size: int | None = positive(None, "S.", 7, nullable=True)


@described("Bud.")
class _Bud(Frozen):
    size: int | None = positive(None, "S.")
    age: int = positive(1, "A.")


@described("Tree.")
class _Tree(Frozen):
    left: _Leaf | None = None
    right: _Leaf | None = nested(nullable=True)
    bud: _Bud | None = nested(unset_null=True)


def test_nullable_keys_and_defined_classes() -> None:
    """`nullable` wraps a key in anyOf null; a `define`d class is stated once under $defs;
    `unset_null` admits null for the block's keys that default to None."""
    tree = schema_gen.document_schema(_Tree, "tree", "T")
    bud = tree["properties"]["bud"]["properties"]
    assert bud["size"]["anyOf"][0] == {"type": "null"} and "anyOf" not in bud["age"]
    assert tree["$defs"]["leaf"]["properties"]["size"] == {
        "anyOf": [{"type": "null"}, {"type": "integer", "minimum": 1, "maximum": 7,
                                     "description": "S. At most 7."}],
        "description": "S. At most 7."}
    assert tree["properties"]["left"] == {"$ref": "#/$defs/leaf"}
    assert tree["properties"]["right"] == {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/leaf"}],
                                           "description": "Leaf."}
