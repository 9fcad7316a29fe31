"""Schema findings name the key at fault and the bound it broke, in configs and native specs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import kvreplay
from kvreplay.compiler.documents import compile_text
from kvreplay.compiler.validate import load_schema

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "g2-restore-mooncake.yaml"


def _native() -> dict[str, Any]:
    native: dict[str, Any] = kvreplay.compile_config(EXAMPLE, matrix=False).native()
    return native


def _found(native: dict[str, Any], replace: tuple[str, str] | None = None) -> list[Any]:
    text = json.dumps(native, indent=1)
    if replace is not None:
        text = text.replace(*replace)
    compiled = compile_text(text, "spec.json")
    return [(d.rule, d.span.path, d.span.line, d.message, d.hint) for d in compiled.diagnostics]


def test_a_float_seed_in_a_nullable_mapping_is_blamed_on_the_seed() -> None:
    """`"seed": 0.0` in the router config: SCHEMA-TYPE at the seed, not at `config`."""
    native = _native()
    native["spec"]["adapters"]["placement"]["config"] = {"seed": 0.0}
    ((rule, path, _line, message, hint),) = _found(native)
    assert (rule, path) == ("SCHEMA-TYPE", "/spec/adapters/placement/config/seed")
    assert message.startswith("`seed` must be an integer >= 0, found number `0.0`")
    assert hint == "write a whole number without a decimal point"


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_a_non_finite_seed_is_one_finding_at_the_seed(literal: str) -> None:
    """The loader's JSON-NON-FINITE is the only finding: no follow-on about `config`."""
    native = _native()
    native["spec"]["adapters"]["placement"]["config"] = {"seed": "SEED"}
    (found,) = _found(native, ('"SEED"', literal))
    assert found[:2] == ("JSON-NON-FINITE", "/spec/adapters/placement/config/seed")


def test_a_nullable_integer_out_of_range_states_its_bound() -> None:
    """`stop_requests` past 1e8 in a native spec: SCHEMA-RANGE naming the maximum."""
    native = _native()
    native["traffic"]["stop_requests"] = 10**9
    ((rule, path, _line, message, _hint),) = _found(native)
    assert (rule, path) == ("SCHEMA-RANGE", "/traffic/stop_requests")
    assert message == "`stop_requests` must be <= 100000000, found integer `1000000000`"


def test_a_wrong_type_under_a_nullable_keeps_the_union_message() -> None:
    """A string where null or an integer belongs still names both alternatives."""
    native = _native()
    native["traffic"]["stop_requests"] = "5"
    ((rule, _path, _line, message, _hint),) = _found(native)
    assert rule == "SCHEMA-TYPE"
    assert message == "`stop_requests` must be null or an integer >= 1, found string `5`"


@pytest.mark.parametrize(("schema", "pointer"), [
    ("native", ("properties", "traffic", "properties", "stop_requests")),
    ("config", ("properties", "traffic", "properties", "stop", "properties", "requests")),
])
def test_schema_descriptions_state_policy_maxima(schema: str, pointer: tuple[str, ...]) -> None:
    """Editors show descriptions: a bound like 100,000,000 requests is written there."""
    node: Any = load_schema(schema)
    for key in pointer:
        node = node[key]
    assert node["description"].endswith("At most 100,000,000.")
