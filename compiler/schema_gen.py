"""The JSON Schemas, generated from the attrs models (schema/schema_facts.py says how).

`config_schema()` walks compiler/model.py and `native_schema()` schema/native_model.py:
properties in field order (under their JSON keys), types and enums from the annotations, defaults
from the field defaults (a required key states none), descriptions and bounds from the fields'
metadata, and each class's description, required keys and conditional overlays from its
`described` decorator. An integer whose own maximum is below the generic bounds says it in its
description ("At most N."), since editors show the description. tools/gen_schemas.py writes the
results to schema/*.schema.json.
"""

from __future__ import annotations

import sys
import types
import typing
from typing import Any, Literal

import attrs

from kvreplay.schema.schema_facts import (
    APPLIED_DEFAULT,
    MAX_INT,
    MAX_NUM,
    OBJECTS,
    SCHEMA,
    json_key,
)

S = dict[str, Any]
NOTE_BELOW = 1e9  # maxima at or above this are generic, not a policy worth stating


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


def _noted(node: S) -> S:
    """The node with its integer maximum stated in its description, if that is a policy."""
    typed = [node, *node.get("anyOf", [])]
    bound = next((b["maximum"] for b in typed if b.get("type") == "integer"
                  and b.get("maximum", NOTE_BELOW) < NOTE_BELOW), None)
    text = node.get("description")
    if bound is not None and isinstance(text, str) and f"..{bound})" not in text \
            and "At most" not in text:
        node["description"] = f"{text.rstrip('.')}. At most {bound:,}."
    return node


def _number(kind: str, layout: str, desc: str, maximum: Any) -> S:
    """A positive or non-negative integer/number."""
    out: S = {"type": kind}
    if layout == "positive" and kind == "number":
        out["exclusiveMinimum"] = 0
    else:
        out["minimum"] = 1 if layout == "positive" else 0
    out["maximum"] = maximum if maximum is not None else (MAX_INT if kind == "integer" else MAX_NUM)
    out["description"] = desc
    return _noted(out)


def _default(field: attrs.Attribute[Any]) -> Any:
    """The documented default: APPLIED_DEFAULT metadata, else the field's default."""
    default = field.metadata.get(APPLIED_DEFAULT, field.default)
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        raise ValueError(f"{field.name}: a factory default cannot be stated in the schema")
    return default


class _Walker:
    """Walks one model; classes with a `define` name are stated once, under `$defs`."""

    def __init__(self) -> None:
        self.defs: S = {}

    def leaf(self, cls: type, field: attrs.Attribute[Any], tp: Any, required: bool) -> S:
        facts: S = field.metadata[SCHEMA]
        node = self.layout(cls, field, tp, required, facts)
        if not facts.get("nullable"):
            return node
        if facts["layout"] == "text":  # a string's description is stated once, around it
            node = {k: v for k, v in node.items() if k != "description"}
        desc = facts.get("description") or OBJECTS[_split(tp)[0][0]].description  # or the class's
        return _noted({"anyOf": [{"type": "null"}, node], "description": desc})

    def layout(self, cls: type, field: attrs.Attribute[Any], tp: Any, required: bool,
               facts: S) -> S:
        layout = facts["layout"]
        desc = facts.get("description") or ""
        plain, special = _split(tp)
        default = _default(field)
        has_default = not required and default is not None and default != ()
        out: S
        if layout in ("positive", "nonneg"):
            (base,) = plain
            out = _number(_kind(base), layout, desc, facts["maximum"])
        elif layout == "bounded":
            (base,) = plain
            out = {"type": _kind(base), "minimum": facts["minimum"], "maximum": facts["maximum"]}
            if has_default:
                out["default"] = default
            out["description"] = desc
            return _noted(out)
        elif layout == "choice":
            out = {"enum": [v for v in special if v is not None], "description": desc}
        elif layout == "constant":
            (value,) = [v for v in special if v is not None]
            return {"const": value, "description": desc}
        elif layout == "flag":
            return {"type": "boolean", "default": default, "description": desc} \
                if default is not None else {"type": "boolean", "description": desc}
        elif layout in ("text", "pattern"):
            out = {"type": "string"}
            if layout == "pattern":
                return {**out, "pattern": facts["pattern"], "description": desc}
            if facts["minLength"] is not None:
                out["minLength"] = facts["minLength"]
            out |= {"maxLength": facts["maxLength"], "description": desc}
        elif layout == "either":
            (base,) = plain
            (alt,) = special
            first: S = {"type": "null"} if alt is None else {"const": alt}
            inner = _number(_kind(base), "positive", facts["inner"], facts["maximum"])
            return _noted({"description": desc, "default": default, "anyOf": [first, inner]})
        elif layout == "items":
            (element,) = [a for a in typing.get_args(plain[0]) if a is not Ellipsis]
            item = (self.object(element) if attrs.has(element)
                    else {"type": _kind(element), **facts["item"]})
            return {"type": "array", "minItems": facts["minItems"], "maxItems": facts["maxItems"],
                    "items": item, "description": desc}
        elif layout == "mapping":
            return {"type": "object", "description": desc}
        elif layout == "object":
            (nested,) = plain
            node = self.object(nested, unset_null=facts["unset_null"])
            return node | {"description": desc} if desc and "description" in node else node
        elif layout == "switch":
            first_cls, other_cls = plain
            return {"description": desc, "type": "object",
                    "if": {"required": [facts["when"]]}, "then": self.object(first_cls),
                    "else": self.object(other_cls)}
        else:  # pragma: no cover - a new layout without a walker branch
            raise ValueError(f"{cls.__name__}.{field.name}: unknown schema layout {layout!r}")
        if has_default:
            out["default"] = default
        return out

    def object(self, cls: type, unset_null: bool = False) -> S:
        """The schema of one attrs class (or a `$ref` to it), with its nested classes;
        `unset_null`: its keys that default to None also admit null."""
        facts = OBJECTS[cls]
        if facts.define is not None and not unset_null:
            if facts.define not in self.defs:
                self.defs[facts.define] = {}  # reserved first: a class may refer to itself
                self.defs[facts.define] = self.body(cls, False)
            return {"$ref": f"#/$defs/{facts.define}"}
        return self.body(cls, unset_null)

    def body(self, cls: type, unset_null: bool) -> S:
        facts = OBJECTS[cls]
        hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
        fields = attrs.fields(cls)
        names = [json_key(f) for f in fields]
        unknown = {k for k in facts.required if k not in names}
        for overlay in facts.overlays:
            then = overlay["then"]
            unknown |= set(then.get("required", ()))
            unknown |= set(then.get("propertyNames", {}).get("enum", ()))
            unknown |= set(overlay["if"]["properties"])
        if unknown - set(names):
            raise ValueError(f"{cls.__name__}: schema facts name unknown keys {sorted(unknown)}")
        properties: S = {}
        for field in fields:
            key = json_key(field)
            properties[key] = self.property(cls, field, hints[field.name], key in facts.required)
            nullable = field.metadata.get(SCHEMA, {}).get("nullable", False)
            if unset_null and field.default is None and key not in facts.required \
                    and not nullable:
                node = properties[key]
                properties[key] = _noted({"anyOf": [{"type": "null"}, node],
                                          "description": node["description"]})
        out: S = {"type": "object", "description": facts.description, "properties": properties,
                  "additionalProperties": False}
        if facts.required:
            out["required"] = list(facts.required)
        if facts.overlays:
            out["allOf"] = [dict(o) for o in facts.overlays]
        out.update(facts.extra)
        return out

    def property(self, cls: type, field: attrs.Attribute[Any], tp: Any, required: bool) -> S:
        if SCHEMA in field.metadata:
            return self.leaf(cls, field, tp, required)
        plain, _ = _split(tp)
        nested = [t for t in plain if isinstance(t, type) and attrs.has(t)]
        if len(nested) != 1:
            raise ValueError(f"{cls.__name__}.{field.name}: no schema facts")
        return self.object(nested[0])


def object_schema(cls: type) -> S:
    """The schema object of one attrs class, with its nested classes."""
    return _Walker().body(cls, False)


def document_schema(cls: type, name: str, title: str) -> S:
    """A whole schema file: the root class's object with the file's identity."""
    walker = _Walker()
    root = walker.body(cls, False)
    out: S = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://kvreplay.dev/schema/{name}.schema.json",
        "title": title,
        "description": root["description"],
        "type": "object",
    }
    if walker.defs:
        out["$defs"] = walker.defs
    out["properties"] = root["properties"]
    if "required" in root:
        out["required"] = root["required"]
    return out | {"additionalProperties": False}


def config_schema() -> S:
    """schema/config.schema.json's tree."""
    from kvreplay.compiler import model

    return document_schema(model.Config, "config", "kvreplay deployment configuration")


def native_schema() -> S:
    """schema/native.schema.json's tree."""
    from kvreplay.schema import native_model

    return document_schema(native_model.Document, "native",
                           "kvreplay canonical native replay spec")
