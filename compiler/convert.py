"""Structuring a (schema-valid) config document into the frozen model, failures as diagnostics.

The converter and its strict hooks are schema/convert.py's, shared with native reading.
"""

from __future__ import annotations

from typing import Any

from kvreplay.compiler.model import Config
from kvreplay.schema.convert import converter
from kvreplay.schema.diagnostics import Diagnostic, Span
from kvreplay.schema.quick_structure import quick_structure


def structure_config(
    data: dict[str, Any], file: str | None = None
) -> tuple[Config | None, list[Diagnostic]]:
    """Structure a (schema-valid) document into the frozen model; failures become diagnostics."""
    quick = quick_structure(data, Config, forbid_extra_keys=True, native=False)
    if quick is not None:  # the converter's value, without cattrs (schema/quick_structure.py)
        return quick, []
    import cattrs
    from cattrs.errors import BaseValidationError

    try:  # the same hooks, untraced: a document that structures needs no more
        return converter(detailed=False).structure(data, Config), []
    except Exception:  # whatever failed, the traced try below reports it
        pass
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
