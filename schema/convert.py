"""Strict cattrs converters for the attrs models: no silent coercion ("no" is not true, 2.7 is not
2, "8" is not 8), unknown keys refused, JSON keys renamed where a field says so (schema_facts.KEY).

`converter()` structures the YAML config model (compiler/convert.py); `native_converter()` reads
and writes native JSON documents (schema/native_model.py) for the compiler and the engine.
cattrs is imported when a converter is first built: `structure_native` (and the config's
structuring) try schema/quick_structure.py first, which gives the same values for the plain
documents most runs read, without it.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args, get_origin

from kvreplay.schema.frozen import field_facts, is_frozen
from kvreplay.schema.quick_structure import quick_structure
from kvreplay.schema.schema_facts import KEY

if TYPE_CHECKING:
    import cattrs

T = TypeVar("T")


def _int(value: Any, _t: type) -> int:
    if type(value) is not int:
        raise TypeError(f"expected an integer, found {type(value).__name__} {value!r}")
    return value


def _float(value: Any, _t: type) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number, found {type(value).__name__} {value!r}")
    result = float(value)
    if not math.isfinite(result):
        raise ValueError(f"expected a finite number, found {value!r}")
    return result


def _str(value: Any, _t: type) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, found {type(value).__name__} {value!r}")
    return value


def _bool(value: Any, _t: type) -> bool:
    if type(value) is not bool:
        raise TypeError(f"expected true or false, found {type(value).__name__} {value!r}")
    return value


def _is_int_or_word(t: Any) -> bool:
    """`int | Literal["auto"]` style unions (a count or a keyword)."""
    args = get_args(t)
    return (
        len(args) == 2
        and int in args
        and any(get_origin(a) is Literal for a in args)
    )


def _int_or_word(value: Any, t: Any) -> Any:
    words = [w for a in get_args(t) if get_origin(a) is Literal for w in get_args(a)]
    if isinstance(value, str):
        if value in words:
            return value
        raise ValueError(f"expected {' or '.join(map(repr, words))} or an integer, found {value!r}")
    return _int(value, int)


def _dict(value: Any, _t: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"expected a mapping, found {type(value).__name__}")
    return dict(value)


def _renames(cls: type) -> dict[str, Any]:
    import attrs
    from cattrs.gen import override

    return {f.name: override(rename=f.metadata[KEY]) for f in attrs.fields(cls)
            if KEY in f.metadata}


def _strict(conv: cattrs.Converter, forbid_extra_keys: bool) -> cattrs.Converter:
    import attrs
    from cattrs.gen import make_dict_structure_fn

    conv.register_structure_hook(int, _int)
    conv.register_structure_hook(float, _float)
    conv.register_structure_hook(str, _str)
    conv.register_structure_hook(bool, _bool)
    conv.register_structure_hook_func(_is_int_or_word, _int_or_word)
    conv.register_structure_hook_func(
        lambda t: t == dict[str, Any] or t == (dict[str, Any] | None),
        lambda v, t: None if v is None else _dict(v, t),
    )
    conv.register_structure_hook_factory(
        attrs.has, lambda cls: make_dict_structure_fn(
            cls, conv, _cattrs_forbid_extra_keys=forbid_extra_keys, **_renames(cls)))
    return conv


@cache
def converter(detailed: bool = True) -> cattrs.Converter:
    """The YAML config model's converter (unknown keys are refused). `detailed=False` stops at
    the first error, untraced: its code is about half as costly to generate, for a first try."""
    import cattrs

    return _strict(cattrs.Converter(forbid_extra_keys=True, detailed_validation=detailed),
                   forbid_extra_keys=True)


@cache
def native_converter(strict: bool = True) -> cattrs.Converter:
    """Native documents. `strict=False` takes what a document with errors has left (the compiler
    has reported the errors and pruned the values; a role's shape may then be ambiguous).

    Both readers validate against the native schema first, which admits only what structures;
    so errors are not traced field by field (cheaper code to generate at each run's start)."""
    import cattrs

    from kvreplay.schema import native_model as n

    conv = _strict(cattrs.Converter(forbid_extra_keys=strict, detailed_validation=False),
                   forbid_extra_keys=strict)
    one_or_named: Callable[[Any, Any], Any] = lambda v, _t: conv.structure(  # noqa: E731
        v, n.Role if isinstance(v, dict) and "rank" in v else n.Roles)
    conv.register_structure_hook_func(lambda t: t == (n.Role | n.Roles), one_or_named)
    return conv


def structure_native(data: Any, cls: type[T], strict: bool = True) -> T:
    """`native_converter(strict).structure(data, cls)`: by the quick walk when it is sure (no
    cattrs), else by the converter (which structures or raises as before)."""
    quick = quick_structure(data, cls, forbid_extra_keys=strict, native=True)
    if quick is not None:
        return quick
    value: T = native_converter(strict).structure(data, cls)
    return value


@cache
def _numbers(cls: type) -> frozenset[str]:
    """The fields of `cls` annotated as numbers (float, or float | None)."""
    hints = typing.get_type_hints(cls)
    return frozenset(name for name, *_ in field_facts(cls) if hints[name] in (float, float | None))


def to_json(value: Any) -> Any:
    """An attrs value as plain JSON data under its JSON keys (the inverse of structuring).
    A number field holds a float even when it was given an integer (canonical bytes)."""
    cls: type = type(value)
    if is_frozen(cls):
        numbers = _numbers(cls)
        out = {}
        for name, _, _, _, metadata in field_facts(cls):
            item = getattr(value, name)
            number = name in numbers and type(item) is int
            out[metadata.get(KEY, name)] = float(item) if number else to_json(item)
        return out
    if isinstance(value, tuple | list):
        return [to_json(v) for v in value]
    return value
