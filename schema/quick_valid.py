"""A quick yes to "is this document valid?" for the shipped schemas, without importing jsonschema.

Importing jsonschema (its referencing registry and metaschemas) costs more CPU than linting a
valid config does, and most documents are valid. `quick_valid` walks the schema itself for the
keywords the shipped schemas use, with jsonschema's semantics (Draft 2020-12, the strict
integers of json_schemas.py: 2.0 and True are not integers). It answers True only when
jsonschema would find no error; False means "invalid, or cannot tell" (a keyword, a `$ref` or a
value type it does not know): the caller then asks jsonschema, which writes the diagnostics. So
being stricter than jsonschema only costs time; tests/compiler/test_quick_valid.py pins that it
agrees with jsonschema on the corpus and on one-value mutations of it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

_JSON = (dict, list, str, int, float, type(None))  # int covers bool
# Keywords that never make an instance invalid (annotations, and $defs: reached through $ref).
_INERT = frozenset({"$schema", "$comment", "$defs", "title", "description", "default",
                    "examples", "deprecated", "readOnly", "writeOnly"})


class _Unsure(Exception):
    """A keyword, reference or value this check does not know: jsonschema decides."""


def quick_valid(root: Mapping[str, Any], instance: Any) -> bool:
    """True when `instance` is valid against schema `root`; False when it is not or when this
    check cannot tell."""
    try:
        return _valid(root, root, instance)
    except (_Unsure, RecursionError):
        return False


def _valid(root: Mapping[str, Any], schema: Any, x: Any) -> bool:
    if schema is True:
        return True
    if schema is False:
        return False
    if not isinstance(schema, dict) or not isinstance(x, _JSON):
        raise _Unsure
    for key, value in schema.items():
        check = _KEYWORDS.get(key)
        if check is None:
            if key in _INERT or (key == "$id" and schema is root):
                continue
            raise _Unsure
        if not check(root, value, x, schema):
            return False
    return True


def _is_type(x: Any, kind: Any) -> bool:
    if kind == "object":
        return isinstance(x, dict)
    if kind == "array":
        return isinstance(x, list)
    if kind == "string":
        return isinstance(x, str)
    if kind == "boolean":
        return isinstance(x, bool)
    if kind == "null":
        return x is None
    if kind == "integer":
        return isinstance(x, int) and not isinstance(x, bool)
    if kind == "number":
        return isinstance(x, (int, float)) and not isinstance(x, bool)
    raise _Unsure


def _equal(one: Any, two: Any) -> bool:
    """jsonschema's `equal`: True and 1 differ, 1 and 1.0 do not, containers compared deeply."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, Sequence) and isinstance(two, Sequence):
        return len(one) == len(two) and all(_equal(a, b) for a, b in zip(one, two, strict=True))
    if isinstance(one, Mapping) and isinstance(two, Mapping):
        return len(one) == len(two) and all(k in two and _equal(v, two[k])
                                            for k, v in one.items())
    if isinstance(one, bool) or isinstance(two, bool):
        return isinstance(one, bool) and isinstance(two, bool) and one == two
    return bool(one == two)


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


Check = Callable[[Mapping[str, Any], Any, Any, Mapping[str, Any]], bool]


def _type(_root: Any, kinds: Any, x: Any, _schema: Any) -> bool:
    return any(_is_type(x, k) for k in ([kinds] if isinstance(kinds, str) else kinds))


def _ref(root: Mapping[str, Any], ref: Any, x: Any, _schema: Any) -> bool:
    prefix = "#/$defs/"
    name = ref[len(prefix):] if isinstance(ref, str) and ref.startswith(prefix) else ""
    if not name or any(c in name for c in "/~%") or name not in root.get("$defs", {}):
        raise _Unsure
    return _valid(root, root["$defs"][name], x)


def _properties(root: Mapping[str, Any], props: Any, x: Any, _schema: Any) -> bool:
    return not isinstance(x, dict) or all(_valid(root, sub, x[k]) for k, sub in props.items()
                                          if k in x)


def _additional(root: Mapping[str, Any], extra: Any, x: Any, schema: Mapping[str, Any]) -> bool:
    if not isinstance(x, dict):
        return True
    if "patternProperties" in schema:
        raise _Unsure
    known = schema.get("properties", {})
    return all(_valid(root, extra, x[k]) for k in x if k not in known)


def _items(root: Mapping[str, Any], items: Any, x: Any, schema: Mapping[str, Any]) -> bool:
    if "prefixItems" in schema:
        raise _Unsure
    return not isinstance(x, list) or all(_valid(root, items, item) for item in x)


def _if(root: Mapping[str, Any], test: Any, x: Any, schema: Mapping[str, Any]) -> bool:
    branch = "then" if _valid(root, test, x) else "else"
    return branch not in schema or _valid(root, schema[branch], x)


def _one_of(root: Mapping[str, Any], subs: Any, x: Any, _schema: Any) -> bool:
    return sum(1 for sub in subs if _valid(root, sub, x)) == 1


def _pattern(_root: Any, pattern: Any, x: Any, _schema: Any) -> bool:
    return not isinstance(x, str) or re.search(pattern, x) is not None


_KEYWORDS: dict[str, Check] = {
    "type": _type,
    "$ref": _ref,
    "enum": lambda _r, values, x, _s: any(_equal(v, x) for v in values),
    "const": lambda _r, value, x, _s: _equal(x, value),
    "minimum": lambda _r, low, x, _s: not _number(x) or not x < low,
    "maximum": lambda _r, high, x, _s: not _number(x) or not x > high,
    "exclusiveMinimum": lambda _r, low, x, _s: not _number(x) or not x <= low,
    "exclusiveMaximum": lambda _r, high, x, _s: not _number(x) or not x >= high,
    "minLength": lambda _r, n, x, _s: not isinstance(x, str) or len(x) >= n,
    "maxLength": lambda _r, n, x, _s: not isinstance(x, str) or len(x) <= n,
    "pattern": _pattern,
    "properties": _properties,
    "additionalProperties": _additional,
    "required": lambda _r, names, x, _s: not isinstance(x, dict) or all(n in x for n in names),
    "propertyNames": lambda r, sub, x, _s: not isinstance(x, dict) or all(_valid(r, sub, k)
                                                                         for k in x),
    "minProperties": lambda _r, n, x, _s: not isinstance(x, dict) or len(x) >= n,
    "maxProperties": lambda _r, n, x, _s: not isinstance(x, dict) or len(x) <= n,
    "items": _items,
    "minItems": lambda _r, n, x, _s: not isinstance(x, list) or len(x) >= n,
    "maxItems": lambda _r, n, x, _s: not isinstance(x, list) or len(x) <= n,
    "allOf": lambda r, subs, x, _s: all(_valid(r, sub, x) for sub in subs),
    "anyOf": lambda r, subs, x, _s: any(_valid(r, sub, x) for sub in subs),
    "oneOf": _one_of,
    "if": _if,
    "then": lambda _r, _v, _x, _s: True,  # applied by `if`
    "else": lambda _r, _v, _x, _s: True,
}
