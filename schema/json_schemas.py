"""The shipped JSON Schemas (schema/*.schema.json, generated from the attrs models) and their
validators, shared by the compiler (positioned diagnostics) and the engine (native documents).

jsonschema is imported on first use of a validator, not with this module: `known_valid` answers
for a valid document without it (schema/quick_valid.py), so a clean lint or run never pays for it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from contextvars import ContextVar
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvreplay.schema.quick_valid import quick_valid

if TYPE_CHECKING:
    import jsonschema


@cache
def load_schema(name: str) -> dict[str, Any]:
    """A schema shipped in kvreplay.schema (`config`, `native` or `report`)."""
    # Beside this module, as rules/loader.py finds the rule files (importlib.resources costs
    # more to import than reading the file does).
    text = Path(__file__).with_name(f"{name}.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def _is_integer(_checker: object, instance: object) -> bool:
    # Strict: 2.0 is a float, not an integer; True is a bool, not 1.
    return isinstance(instance, int) and not isinstance(instance, bool)


class ValidMemo:
    """(subschema, instance) pairs known to give no error, by identity: validating many
    documents that share subtrees (a sweep's points share the base's objects wherever they do
    not change it) validates each shared subtree once. Only valid for objects never mutated
    while the memo is in use; pairs are kept alive so that their ids stay theirs."""

    def __init__(self) -> None:
        self.valid: dict[tuple[int, int], tuple[Any, Any]] = {}
        self.recording = True


_MEMO: ContextVar[ValidMemo | None] = ContextVar("kvreplay_valid_memo", default=None)


def known_valid(name: str, instance: Any) -> bool:
    """True when `instance` is surely valid against schema `name` (what `validator(name)` would
    find no error in), without importing jsonschema; False: ask `validator(name)`. Inside
    `remembering` it is always False: the memo's validator checks only what a sweep's point
    changed, which is cheaper than walking the whole point again."""
    return _MEMO.get() is None and quick_valid(load_schema(name), instance)


@contextlib.contextmanager
def remembering(memo: ValidMemo) -> Iterator[ValidMemo]:
    """Validations inside the block skip the pairs `memo` knows valid (and, while
    `memo.recording`, add the ones they find valid)."""
    token = _MEMO.set(memo)
    try:
        yield memo
    finally:
        _MEMO.reset(token)


def _properties(validator: Any, properties: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """The `properties` keyword, skipping subtrees the memo in use knows valid. Exact for the
    shipped schemas: they use no keyword whose result depends on more than the subschema and
    the instance (no `unevaluated*`, no `$dynamicRef`; a test checks)."""
    memo = _MEMO.get()
    if memo is None:
        yield from _standard_properties()(validator, properties, instance, schema)
        return
    if not validator.is_type(instance, "object"):
        return
    for name, subschema in properties.items():
        if name not in instance:
            continue
        value = instance[name]
        pair = (id(subschema), id(value))
        if pair in memo.valid:
            continue
        clean = True
        for error in validator.descend(value, subschema, path=name, schema_path=name):
            clean = False
            yield error
        if clean and memo.recording:
            memo.valid[pair] = (subschema, value)


@cache
def _standard_properties() -> Any:
    import jsonschema

    return jsonschema.Draft202012Validator.VALIDATORS["properties"]


@cache
def _validator_class() -> Any:
    import jsonschema

    base = jsonschema.Draft202012Validator
    checker = base.TYPE_CHECKER.redefine("integer", _is_integer)
    return jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        base, validators={"properties": _properties}, type_checker=checker)


@cache
def validator(name: str) -> jsonschema.protocols.Validator:
    """A validator of schema `name` whose integers are strict (2.0 and True are not integers)."""
    found: jsonschema.protocols.Validator = _validator_class()(load_schema(name))
    return found


def pointer(path: Any) -> str:
    """The JSON pointer (RFC 6901) of a path of keys and indexes; `/` for the whole document."""
    parts = [str(p).replace("~", "~0").replace("/", "~1") for p in path]
    return "/" + "/".join(parts)
