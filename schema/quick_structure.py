"""Structuring a document into the attrs models without importing cattrs, when that is plain.

Importing cattrs and generating its structuring code for the models costs about 20 ms of CPU at
each start, more than structuring a valid document takes. `quick_structure` walks the model
itself for the types the models use (int, float, str, bool, Literal, Optional, homogeneous
tuples, nested attrs classes, free-form mappings, `int | Literal[...]`, a native role or named
roles) with the semantics of schema/convert.py's strict converters (no coercion, renamed JSON
keys, unknown keys refused where the converter refuses them). It answers only when it is sure:
any type, value or failure it does not know makes it return None, and the caller asks the
converter, which structures or reports the error as before. So it is a fast path in front of
cattrs, never a second opinion; tests/compiler/test_quick_structure.py pins that it gives what
the converters give on the corpus and on one-value mutations of it.
"""

from __future__ import annotations

import math
import typing
from functools import cache
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from kvreplay.schema.frozen import field_facts, is_frozen
from kvreplay.schema.schema_facts import KEY

T = TypeVar("T")
_NONE = type(None)


class _Unsure(Exception):
    """A type or value this walk does not know, or a failure: the converter decides."""


def quick_structure(data: Any, cls: type[T], *, forbid_extra_keys: bool,
                    native: bool) -> T | None:
    """`data` structured as attrs class `cls`, as the converter would (`native`: the native
    converter, whose `Role | Roles` reads a role by its `rank` key), or None when unsure."""
    try:
        value: T = _Walk(forbid_extra_keys, native).attrs_class(data, cls)
    except Exception:  # _Unsure, or a value the model refuses: the converter says what
        return None
    return value


# (JSON key, init argument, type, required) per init field of an attrs class, and its keys.
Plan = tuple[tuple[tuple[str, str, Any, bool], ...], frozenset[str]]


@cache
def _plan(cls: Any) -> Plan:
    hints = typing.get_type_hints(cls)
    fields = tuple((metadata.get(KEY, name), alias, hints[name], required)
                   for name, alias, init, required, metadata in field_facts(cls) if init)
    return fields, frozenset(key for key, _, _, _ in fields)


@cache
def _roles() -> set[type]:
    """The native converter's one union of attrs classes: a role, or roles by name."""
    from kvreplay.schema import native_model as n

    return {n.Role, n.Roles}


class _Walk:
    def __init__(self, forbid_extra_keys: bool, native: bool) -> None:
        self.forbid = forbid_extra_keys
        self.native = native

    def attrs_class(self, data: Any, cls: Any) -> Any:
        if type(data) is not dict:
            raise _Unsure
        fields, keys = _plan(cls)
        given = {}
        for key, alias, kind, required in fields:
            if key in data:
                given[alias] = self.value(data[key], kind)
            elif required:
                raise _Unsure
        if self.forbid and not keys.issuperset(data):
            raise _Unsure
        return cls(**given)

    def value(self, v: Any, t: Any) -> Any:
        # In the converters' order of precedence: the hooks schema/convert.py registers first.
        if t is int:
            if type(v) is not int:
                raise _Unsure
            return v
        if t is float:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise _Unsure
            number = float(v)
            if not math.isfinite(number):
                raise _Unsure
            return number
        if t is str or t is bool:
            if type(v) is not t:
                raise _Unsure
            return v
        if t == dict[str, Any] or t == (dict[str, Any] | None):
            if v is None:
                return None
            if not isinstance(v, dict):
                raise _Unsure
            return dict(v)
        if is_frozen(t):
            return self.attrs_class(v, t)
        origin, args = get_origin(t), get_args(t)
        if origin is Literal:
            if v not in args:
                raise _Unsure
            return v
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            if type(v) is not list and type(v) is not tuple:
                raise _Unsure
            return tuple(self.value(item, args[0]) for item in v)
        if origin in (Union, type(int | None)):
            return self.union(v, args)
        raise _Unsure

    def union(self, v: Any, args: tuple[Any, ...]) -> Any:
        words = [a for a in args if get_origin(a) is Literal]
        if len(args) == 2 and int in args and words:  # a count or a keyword
            if isinstance(v, str):
                if v not in get_args(words[0]):
                    raise _Unsure
                return v
            return self.value(v, int)
        if self.native and len(args) == 2 and set(args) == _roles():
            from kvreplay.schema import native_model as n

            return self.attrs_class(v, n.Role if isinstance(v, dict) and "rank" in v else n.Roles)
        if len(args) == 2 and _NONE in args:
            if v is None:
                return None
            return self.value(v, args[0] if args[1] is _NONE else args[1])
        raise _Unsure
