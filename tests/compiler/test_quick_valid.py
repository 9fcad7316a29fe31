"""The quick validity check (schema/quick_valid.py) says valid exactly when jsonschema finds no
error: on every shipped document and on one-value mutations of them."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

import kvreplay
from kvreplay.schema.json_schemas import ValidMemo, known_valid, load_schema, remembering, validator
from kvreplay.schema.quick_valid import quick_valid

REPO = Path(__file__).resolve().parents[2]
CONFIGS = sorted((REPO / "examples").glob("*.yaml"))
SWEEPS = sorted((REPO / "examples" / "sweeps").glob("*.yaml"))
INVALID = sorted((REPO / "tests" / "cases" / "invalid").glob("schema-*.yaml"))
# Values each leaf is replaced by: every JSON type, the integer/float/bool edges the strict
# integers care about, a string and numbers beyond the usual bounds.
PROBES: tuple[Any, ...] = (None, True, 0, -1, 2.0, 1.5, 10**30, "", "default", [], {"x": 1})


def _yaml(path: Path) -> Any:
    return YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))


def _jsonschema_valid(name: str, doc: Any) -> bool:
    return not any(True for _ in validator(name).iter_errors(doc))


def _leaves(doc: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _leaves(value, (*path, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            yield from _leaves(value, (*path, index))


def _mutations(doc: Any) -> Iterator[Any]:
    """The document with one node replaced by each probe, deleted, or given an unknown key."""
    for path in _leaves(doc):
        if not path:
            continue
        for probe in (*PROBES, "DELETE", "EXTRA"):
            out = copy.deepcopy(doc)
            parent = out
            for part in path[:-1]:
                parent = parent[part]
            if probe == "DELETE":
                del parent[path[-1]]
            elif probe == "EXTRA":
                if not isinstance(parent[path[-1]], dict):
                    continue
                parent[path[-1]]["no_such_key"] = 1
            else:
                parent[path[-1]] = copy.deepcopy(probe)
            yield out


def _native(config: Path) -> dict[str, Any]:
    native: dict[str, Any] = kvreplay.compile_config(config, matrix=False).native()
    return native


def _documents() -> list[tuple[str, str, Any]]:
    docs = [("config", p.name, _yaml(p)) for p in (*CONFIGS, *INVALID)]
    docs += [("sweep", p.name, _yaml(p)) for p in SWEEPS]
    docs += [("native", p.name, _native(p)) for p in CONFIGS]
    return docs


@pytest.mark.parametrize(("schema", "name", "doc"), _documents(), ids=lambda v: str(v)[:40])
def test_agrees_on_shipped_documents(schema: str, name: str, doc: Any) -> None:
    """Every example, example sweep, compiled native spec and schema-invalid case: the quick
    check's answer is jsonschema's."""
    assert known_valid(schema, doc) == _jsonschema_valid(schema, doc), name


@pytest.mark.parametrize(("schema", "config"), [
    ("config", "kv-router-mooncake.yaml"), ("config", "agentx-g2-shared-pd.yaml"),
    ("native", "disaggregated-hbm.yaml"), ("native", "agentx-g2-warm-profile.yaml"),
])
def test_agrees_on_one_value_mutations(schema: str, config: str) -> None:
    """Each node replaced by every JSON type and edge value, deleted, or given an unknown key:
    never valid to the quick check when jsonschema finds an error, and valid whenever it finds
    none (so valid documents do take the fast path)."""
    path = REPO / "examples" / config
    doc = _native(path) if schema == "native" else _yaml(path)
    seen = {True: 0, False: 0}
    for mutated in _mutations(doc):
        expected = _jsonschema_valid(schema, mutated)
        assert known_valid(schema, mutated) == expected, json.dumps(mutated)[:300]
        seen[expected] += 1
    assert seen[True] > 20 and seen[False] > 200, seen


def test_unknown_keywords_references_and_values_defer_to_jsonschema() -> None:
    """What the check does not know makes it answer False (ask jsonschema), never True."""
    assert quick_valid({"type": "string", "format": "email"}, "x") is False
    assert quick_valid({"$ref": "other.json#/x"}, 1) is False
    assert quick_valid({"$defs": {"a": {"$id": "n", "type": "integer"}}, "$ref": "#/$defs/a"},
                       1) is False
    assert quick_valid({"type": "number", "minimum": 0}, complex(1, 0)) is False
    assert quick_valid({"propertyNames": {"type": "string"}}, {(1, 2): 1}) is False
    assert quick_valid({"type": "integer"}, 1) is True


def test_strict_integers_and_json_equality() -> None:
    """2.0 and True are not integers; const 1 takes 1.0 but not True, as jsonschema's `equal`."""
    schema = load_schema("config")
    assert quick_valid({"type": "integer"}, 2.0) is False
    assert quick_valid({"type": "integer"}, True) is False
    assert quick_valid({"type": "number", "maximum": 0}, True) is False
    assert quick_valid({"const": 1}, 1.0) is True
    assert quick_valid({"const": 1}, True) is False
    assert quick_valid({"enum": [False]}, 0) is False
    assert quick_valid(schema, {"engine": 1}) is False


def test_a_sweep_memo_keeps_its_validator() -> None:
    """Inside `remembering` (a sweep's points) the memo's jsonschema validator decides: it checks
    only what a point changed, cheaper than the quick walk over the whole point."""
    doc = _yaml(CONFIGS[0])
    assert known_valid("config", doc) is True
    with remembering(ValidMemo()):
        assert known_valid("config", doc) is False
