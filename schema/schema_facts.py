"""Schema facts on the attrs models: each field's description and bounds, each class's
description, required keys and conditional overlays (compiler/schema_gen.py walks the config model
into schema/config.schema.json and the native model into schema/native.schema.json).

The field helpers return `field(default=..., metadata={SCHEMA: facts})` (schema/frozen.py):
types, enums and defaults are not restated here, the walker reads them from the annotation and
the default. The helper's name fixes the JSON layout of the key (which schema keywords, in which
order); `nullable=True` also admits JSON null (`anyOf: [null, ...]`), as native JSON writes unset
keys.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from kvreplay.schema.frozen import Frozen, default_of, field

if TYPE_CHECKING:
    import attrs

SCHEMA = "kvreplay.schema"
# The JSON key of a field whose Python name differs (`host_offload` is `native_host_offload`).
KEY = "kvreplay.key"
# The documented default of a key whose model default stays None (compiler/model.py says why).
APPLIED_DEFAULT = "kvreplay.applied_default"

MAX_INT = 2**53 - 1
MAX_NUM = 1e15

T = TypeVar("T")
S = dict[str, Any]


def _field(default: Any, facts: S, **kwargs: Any) -> Any:
    metadata = {SCHEMA: facts, **kwargs.pop("metadata", {})}
    if "key" in kwargs:
        metadata[KEY] = kwargs.pop("key")
    return field(default=default, metadata=metadata, **kwargs)


def positive(default: Any, desc: str, maximum: float | None = None,
             nullable: bool = False) -> Any:
    """An integer >= 1 or a number > 0 (at most `maximum`, else the generic bound)."""
    return _field(default, {"layout": "positive", "description": desc, "maximum": maximum,
                            "nullable": nullable})


def nonneg(default: Any, desc: str, maximum: float | None = None,
           nullable: bool = False) -> Any:
    """An integer or number >= 0 (at most `maximum`, else the generic bound)."""
    return _field(default, {"layout": "nonneg", "description": desc, "maximum": maximum,
                            "nullable": nullable})


def bounded(default: Any, desc: str, minimum: float, maximum: float,
            nullable: bool = False) -> Any:
    """An integer or number in [minimum, maximum] (its default, if any, before the description)."""
    return _field(default, {"layout": "bounded", "description": desc, "minimum": minimum,
                            "maximum": maximum, "nullable": nullable})


def choice(default: Any, desc: str, nullable: bool = False, **kwargs: Any) -> Any:
    """One of the annotation's Literal values."""
    return _field(default, {"layout": "choice", "description": desc, "nullable": nullable},
                  **kwargs)


def constant(default: Any, desc: str) -> Any:
    """The annotation's one Literal value."""
    return _field(default, {"layout": "constant", "description": desc})


def flag(default: bool | None, desc: str) -> Any:
    """true or false (a None default states none: the reader decides)."""
    return _field(default, {"layout": "flag", "description": desc})


def text(default: Any, desc: str, max_length: int, min_length: int | None = None,
         nullable: bool = False) -> Any:
    return _field(default, {"layout": "text", "description": desc, "minLength": min_length,
                            "maxLength": max_length, "nullable": nullable})


def pattern(default: Any, desc: str, regex: str) -> Any:
    """A string matching `regex`."""
    return _field(default, {"layout": "pattern", "description": desc, "pattern": regex})


def either(default: Any, desc: str, inner: str, maximum: int | None = None) -> Any:
    """A Literal value (or null) or a positive integer/number described by `inner`; the default
    is stated even when it is None."""
    return _field(default, {"layout": "either", "description": desc, "inner": inner,
                            "maximum": maximum})


def items(default: Any, desc: str, min_items: int, max_items: int, **item: Any) -> Any:
    """A list (tuple annotation) of `min_items..max_items` items with the keywords `item`."""
    return _field(default, {"layout": "items", "description": desc, "minItems": min_items,
                            "maxItems": max_items, "item": item})


def mapping(default: Any, desc: str, nullable: bool = False, **kwargs: Any) -> Any:
    """A free-form mapping, passed through."""
    return _field(default, {"layout": "mapping", "description": desc, "nullable": nullable},
                  **kwargs)


def nested(default: Any = None, nullable: bool = False, unset_null: bool = False,
           desc: str | None = None, **kwargs: Any) -> Any:
    """A nested attrs class (a field without facts is a plain nested object), which also admits
    JSON null (`nullable`); `unset_null`: here its keys that default to None are written null
    when unset, so they admit null (a YAML block of the same class leaves them out instead).
    Its description is the class's, or `desc` where this use of the class needs its own."""
    return _field(default, {"layout": "object", "nullable": nullable, "unset_null": unset_null,
                            "description": desc}, **kwargs)


def switch(default: Any, desc: str, when: str) -> Any:
    """One of two attrs classes (`A | B`): A when the object has key `when`, else B."""
    return _field(default, {"layout": "switch", "description": desc, "when": when})


class ObjectFacts(Frozen):
    description: str
    required: tuple[str, ...] = ()
    overlays: tuple[S, ...] = ()
    extra: tuple[tuple[str, Any], ...] = ()
    define: str | None = None

    # --- generated by tools/gen_models.py: do not edit (python tools/gen_models.py) ---
    __slots__ = ("define", "description", "extra", "overlays", "required")
    def __init__(
        self,
        description: str,
        required: tuple[str, ...] = default_of(required),
        overlays: tuple[S, ...] = default_of(overlays),
        extra: tuple[tuple[str, Any], ...] = default_of(extra),
        define: str | None = default_of(define),
    ) -> None:
        set_ = object.__setattr__
        set_(self, "description", description)
        set_(self, "required", required)
        set_(self, "overlays", overlays)
        set_(self, "extra", extra)
        set_(self, "define", define)
    # --- end of the generated block ---


OBJECTS: dict[type, ObjectFacts] = {}


def described(desc: str, required: Sequence[str] = (), overlays: Sequence[S] = (),
              define: str | None = None, **extra: Any) -> Callable[[type[T]], type[T]]:
    """Class decorator: the object's description, required keys, conditional overlays (`allOf`)
    and extra keywords (minProperties). `define`: the schema states the class once, under
    `$defs/<define>`, and refers to it."""
    def mark(cls: type[T]) -> type[T]:
        OBJECTS[cls] = ObjectFacts(desc, tuple(required), tuple(overlays), tuple(extra.items()),
                                   define)
        return cls
    return mark


def json_key(field: attrs.Attribute[Any]) -> str:
    """The JSON key of a field (its name unless KEY metadata says otherwise)."""
    key: str = field.metadata.get(KEY, field.name)
    return key


def only_keys(field: str, value: str, keys: Sequence[str]) -> S:
    """With `field == value`, only these keys apply (an if/then the validator maps to
    SCHEMA-NOT-APPLICABLE)."""
    return {
        "if": {"properties": {field: {"const": value}}, "required": [field]},
        "then": {"propertyNames": {"enum": sorted(set(keys) | {field})}},
    }


def requires(field: str, value: str, keys: Sequence[str]) -> S:
    """With `field == value`, these keys are required."""
    return {
        "if": {"properties": {field: {"const": value}}, "required": [field]},
        "then": {"required": list(keys)},
    }
