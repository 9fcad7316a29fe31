"""The config schema, generated from the attrs model (kvreplay/schema_facts.py says how).

`config_schema()` walks compiler/model.py: properties in field order, types and enums from the
annotations, defaults from the field defaults (a required key states none), descriptions and
bounds from the fields' metadata, and each class's description, required keys and conditional
overlays from its `described` decorator. tools/gen_schemas.py writes the result to
schema/config.schema.json.
"""

from __future__ import annotations

import sys
import types
import typing
from typing import Any, Literal

import attrs

from kvreplay.schema_facts import APPLIED_DEFAULT, MAX_INT, MAX_NUM, OBJECTS, SCHEMA

S = dict[str, Any]


def _split(tp: Any) -> tuple[list[Any], list[Any]]:
    """(the non-Literal, non-None members, the Literal values and None) of a union or type."""
    members = list(typing.get_args(tp)) if typing.get_origin(tp) in (
        typing.Union, types.UnionType) else [tp]
    plain: list[Any] = []
    special: list[Any] = []
    for member in members:
        if member is type(None):
            special.append(None)
        elif typing.get_origin(member) is Literal:
            special.extend(typing.get_args(member))
        else:
            plain.append(member)
    return plain, special


def _kind(tp: Any) -> str:
    return {int: "integer", float: "number", bool: "boolean", str: "string"}[tp]


def _number(kind: str, layout: str, desc: str, maximum: Any) -> S:
    """A positive or non-negative integer/number (the old pos_int, nonneg_num, ... layouts)."""
    out: S = {"type": kind}
    if layout == "positive" and kind == "number":
        out["exclusiveMinimum"] = 0
    else:
        out["minimum"] = 1 if layout == "positive" else 0
    out["maximum"] = maximum if maximum is not None else (MAX_INT if kind == "integer" else MAX_NUM)
    out["description"] = desc
    return out


def _default(field: attrs.Attribute[Any]) -> Any:
    """The documented default: APPLIED_DEFAULT metadata, else the field's default."""
    default = field.metadata.get(APPLIED_DEFAULT, field.default)
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        raise ValueError(f"{field.name}: a factory default cannot be stated in the schema")
    return default


def _leaf(cls: type, field: attrs.Attribute[Any], tp: Any, required: bool) -> S:
    facts: S = field.metadata[SCHEMA]
    layout = facts["layout"]
    desc = facts["description"]
    plain, special = _split(tp)
    default = _default(field)
    has_default = not required and default is not None and default != ()
    if layout in ("positive", "nonneg"):
        (base,) = plain
        out = _number(_kind(base), layout, desc, facts["maximum"])
    elif layout == "bounded":
        (base,) = plain
        out = {"type": _kind(base), "minimum": facts["minimum"], "maximum": facts["maximum"]}
        if has_default:
            out["default"] = default
        out["description"] = desc
        return out
    elif layout == "choice":
        out = {"enum": [v for v in special if v is not None], "description": desc}
    elif layout == "constant":
        (value,) = [v for v in special if v is not None]
        return {"const": value, "description": desc}
    elif layout == "flag":
        return {"type": "boolean", "default": default, "description": desc}
    elif layout == "text":
        out = {"type": "string"}
        if facts["minLength"] is not None:
            out["minLength"] = facts["minLength"]
        out |= {"maxLength": facts["maxLength"], "description": desc}
    elif layout == "either":
        (base,) = plain
        (alt,) = special
        first: S = {"type": "null"} if alt is None else {"const": alt}
        inner = _number(_kind(base), "positive", facts["inner"], facts["maximum"])
        return {"description": desc, "default": default, "anyOf": [first, inner]}
    elif layout == "items":
        (element,) = [a for a in typing.get_args(plain[0]) if a is not Ellipsis]
        return {"type": "array", "minItems": facts["minItems"], "maxItems": facts["maxItems"],
                "items": {"type": _kind(element), **facts["item"]}, "description": desc}
    elif layout == "mapping":
        return {"type": "object", "description": desc}
    else:  # pragma: no cover - a new layout without a walker branch
        raise ValueError(f"{cls.__name__}.{field.name}: unknown schema layout {layout!r}")
    if has_default:
        out["default"] = default
    return out


def object_schema(cls: type) -> S:
    """The schema object of one attrs class, with its nested classes."""
    facts = OBJECTS[cls]
    hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
    names = [f.name for f in attrs.fields(cls)]
    unknown = {k for k in facts.required if k not in names}
    for overlay in facts.overlays:
        then = overlay["then"]
        unknown |= set(then.get("required", ()))
        unknown |= set(then.get("propertyNames", {}).get("enum", ()))
        unknown |= set(overlay["if"]["properties"])
    if unknown - set(names):
        raise ValueError(f"{cls.__name__}: schema facts name unknown keys {sorted(unknown)}")
    properties: S = {}
    for field in attrs.fields(cls):
        tp = hints[field.name]
        if SCHEMA in field.metadata:
            properties[field.name] = _leaf(cls, field, tp, field.name in facts.required)
            continue
        plain, _ = _split(tp)
        nested = [t for t in plain if isinstance(t, type) and attrs.has(t)]
        if len(nested) != 1:
            raise ValueError(f"{cls.__name__}.{field.name}: no schema facts")
        properties[field.name] = object_schema(nested[0])
    out: S = {"type": "object", "description": facts.description, "properties": properties,
              "additionalProperties": False}
    if facts.required:
        out["required"] = list(facts.required)
    if facts.overlays:
        out["allOf"] = [dict(o) for o in facts.overlays]
    out.update(facts.extra)
    return out


def config_schema() -> S:
    """schema/config.schema.json's tree (before tools/gen_schemas.py states integer bounds in
    descriptions)."""
    from kvreplay.compiler import model

    root = object_schema(model.Config)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://kvreplay.dev/schema/config.schema.json",
        "title": "kvreplay deployment configuration",
        "description": root["description"],
        "type": "object",
        "properties": root["properties"],
        "required": root["required"],
        "additionalProperties": False,
    }
