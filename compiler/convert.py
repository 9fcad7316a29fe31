"""A strict cattrs converter: no silent coercion ("no" is not true, 2.7 is not 2, "8" is not 8)."""

from __future__ import annotations

import math
from functools import cache
from typing import Any, Literal, get_args, get_origin

import cattrs
from cattrs.errors import BaseValidationError
from kvreplay.compiler.model import Config

from kvreplay.diagnostics import Diagnostic, Span


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


@cache
def converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True)
    conv.register_structure_hook(int, _int)
    conv.register_structure_hook(float, _float)
    conv.register_structure_hook(str, _str)
    conv.register_structure_hook(bool, _bool)
    conv.register_structure_hook_func(_is_int_or_word, _int_or_word)
    conv.register_structure_hook_func(
        lambda t: t == dict[str, Any] or t == (dict[str, Any] | None),
        lambda v, t: None if v is None else _dict(v, t),
    )
    return conv


def structure_config(
    data: dict[str, Any], file: str | None = None
) -> tuple[Config | None, list[Diagnostic]]:
    """Structure a (schema-valid) document into the frozen model; failures become diagnostics."""
    try:
        return converter().structure(data, Config), []
    except BaseValidationError as exc:
        messages = cattrs.transform_error(exc, path="$", format_exception=_format)
        return None, [
            Diagnostic("MODEL-INVALID", "error", _tidy(m), Span(file=file, path=_path_of(m)))
            for m in messages
        ]


def _format(exc: BaseException, _type: Any) -> str:
    if isinstance(exc, KeyError):
        return "required field missing"
    return str(exc) or type(exc).__name__


def _path_of(message: str) -> str | None:
    return message.rsplit(" @ ", 1)[1] if " @ " in message else None


def _tidy(message: str) -> str:
    return message.rsplit(" @ ", 1)[0]
