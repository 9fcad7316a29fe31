"""The shipped JSON Schemas (schema/*.schema.json, generated from the attrs models) and their
validators, shared by the compiler (positioned diagnostics) and the engine (native documents)."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

import jsonschema


@cache
def load_schema(name: str) -> dict[str, Any]:
    """A schema shipped in kvreplay.schema (`config`, `native` or `report`)."""
    text = resources.files("kvreplay.schema").joinpath(f"{name}.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def _is_integer(_checker: object, instance: object) -> bool:
    # Strict: 2.0 is a float, not an integer; True is a bool, not 1.
    return isinstance(instance, int) and not isinstance(instance, bool)


@cache
def _validator_class() -> Any:
    base = jsonschema.Draft202012Validator
    checker = base.TYPE_CHECKER.redefine("integer", _is_integer)
    return jsonschema.validators.extend(base, type_checker=checker)  # type: ignore[no-untyped-call]


@cache
def validator(name: str) -> jsonschema.protocols.Validator:
    """A validator of schema `name` whose integers are strict (2.0 and True are not integers)."""
    found: jsonschema.protocols.Validator = _validator_class()(load_schema(name))
    return found


def pointer(path: Any) -> str:
    """The JSON pointer (RFC 6901) of a path of keys and indexes; `/` for the whole document."""
    parts = [str(p).replace("~", "~0").replace("/", "~1") for p in path]
    return "/" + "/".join(parts)
