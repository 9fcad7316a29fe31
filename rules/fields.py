"""What a rule may read: the fields of the normalized Spec, their kinds and their defaults.

Derived from the attrs classes of kvreplay.schema.spec, so a field added there is readable by
rules without touching this module. `traffic.agentic` and the scaling schedule's shape
(`scaling.steps_increasing`, `names_aggregated`, `names_split`) are derived (property) fields.
"""

from __future__ import annotations

import functools
import types
import typing
from typing import Any, Literal

import attrs

from kvreplay.schema import spec as spec_module

# str | num | bool | list | obj (an attrs class) | any
Kind = Literal["str", "num", "bool", "list", "obj", "any"]


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()


@attrs.frozen
class FieldInfo:
    name: str
    kind: Kind
    cls: type | None = None  # the attrs class, for kind "obj"
    default: Any = NO_DEFAULT

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT


# Spec.roles is reached only through role variables; `model` etc. are plain roots.
ROLE_CLASS = spec_module.Role
ROOT_CLASS = spec_module.Spec
HIDDEN_ROOTS = frozenset({"roles"})
DERIVED: dict[type, dict[str, FieldInfo]] = {
    spec_module.Traffic: {"agentic": FieldInfo("agentic", "bool")},
    spec_module.Scaling: {name: FieldInfo(name, "bool") for name in
                          ("steps_increasing", "names_aggregated", "names_split")},
}


def _kind(tp: Any) -> tuple[Kind, type | None]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        kinds = {_kind(a) for a in typing.get_args(tp) if a is not type(None)}
        return next(iter(kinds)) if len(kinds) == 1 else ("any", None)
    if origin is Literal:
        values = typing.get_args(tp)
        if all(isinstance(v, str) for v in values):
            return ("str", None)
        return ("any", None)
    if origin is tuple or tp is tuple:
        return ("list", None)
    if tp is bool:
        return ("bool", None)
    if tp in (int, float):
        return ("num", None)
    if tp is str:
        return ("str", None)
    if isinstance(tp, type) and attrs.has(tp):
        return ("obj", tp)
    return ("any", None)


@functools.cache
def fields_of(cls: type) -> dict[str, FieldInfo]:
    """The readable fields of one Spec class (attrs fields plus derived ones)."""
    attrs.resolve_types(cls)  # each class's annotations in its own module (schema/native_model.py)
    out: dict[str, FieldInfo] = {}
    for f in attrs.fields(cls):
        kind, sub = _kind(f.type)
        default = f.default
        if default is attrs.NOTHING or isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            default = NO_DEFAULT
        out[f.name] = FieldInfo(f.name, kind, sub, default)
    out.update(DERIVED.get(cls, {}))
    return out


def root_fields() -> dict[str, FieldInfo]:
    return {k: v for k, v in fields_of(ROOT_CLASS).items() if k not in HIDDEN_ROOTS}
