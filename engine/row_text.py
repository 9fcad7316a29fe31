"""Per-request rows printed straight from the record, without building the row's dict.

`row_text(record)` is the text `canonical_json` prints for `per_request_row(record)` at its place
in the report (an item of the top-level `per_request` list), byte for byte, about three times
faster: rows are most of a report, and each is printed as its request ends, during the replay.

Each row shape (host tier or not, agentic or not, with or without a warmup phase; an admission
with or without the G1/host split; the common row's single admission and routing decision
inlined) has a template: the fixed text of the shape (keys, brackets, indentation), made once by
printing a skeleton of the shape through `canonical_json` itself, so the layout cannot drift
from the reference encoder. The values are filled in by a function generated for the shape from
the field tables of engine/row_fields.py (`per_request_row`'s own): each value is printed inline as
`canonical_json` prints it (an exact float by `float.__repr__` once it is known finite, an exact
int by `int.__repr__`, a str by `json.encoder.encode_basestring`, None as null), anything else
by `canonical_json` itself. A value the fast path cannot print (a NaN, a nested container where a
number belongs) sends the row through `per_request_row` and `canonical_json`, which print it or
raise the error they always raised.

Faster still, when the package was built with a C compiler: engine/_rowtext.c prints the rows of
ordinary records (exact types, ASCII strings needing no escape, finite numbers, ints below 1e16)
from plans made here out of the same tables and skeletons (`compiled_plan`), and hands any other
record back (None) to the Python printers above. It decides nothing about the text; tests compare
the two printers byte for byte over every shape and value.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from kvreplay.engine.canonical_json import canonical_json
from kvreplay.engine.records import Admission, RequestRecord, RoutingDecision
from kvreplay.engine.report import ReportError
from kvreplay.engine.row_fields import (
    ADMISSION as _ADMISSION,
)
from kvreplay.engine.row_fields import (
    ROUTE as _ROUTE,
)
from kvreplay.engine.row_fields import (
    ROW,
    ROW_TIMES,
    Field,
    per_request_row,
    uuid_for,
)

ROW_INDENT = " " * 4  # a row is an item of the top-level object's list
_MARK = "\x00"  # a skeleton's value: printed "\u0000", which no key or fixed text holds
_SLOT = canonical_json(_MARK)

# How each kind of value is printed (`{v}` is the value's local): the common type first, then
# None, then `_scalar` for anything else (another type, a non-finite float: it raises then). An
# exact int or finite float is left to the f-string, which prints it as repr() does.
_KINDS = {
    "float": '{v} if type({v}) is float and {v} - {v} == 0.0 else "null" if {v} is None '
             'else _scalar({v})',
    "int": '{v} if type({v}) is int else "null" if {v} is None else _scalar({v})',
    "str": '_string({v}) if type({v}) is str else "null" if {v} is None else _scalar({v})',
    "bool": '"true" if {v} is True else "false" if {v} is False else _scalar({v})',
    "text": "{v}",  # already printed
}

# How the printers print the two values they do not print as their kind: the uuid straight from
# the ordinal (without building the str first), the agentic mapping at a row value's indentation.
_PRINTED = {
    "uuid": ("'\"00000000-0000-0000-0000-%012x\"' % (r.ordinal + 1) if type(r.ordinal) is int "
             "and 0 <= r.ordinal < 0xFFFFFFFFFFFF else _string(uuid_for(r.ordinal))"),
    "agentic": "_nested(dict(r.agentic), inner)",
}
_ROW: tuple[Field, ...] = tuple(
    (key, _PRINTED[key], "text", flag) if key in _PRINTED else (key, expression, kind, flag)
    for key, expression, kind, flag in ROW)
_ROW_TIMES = ROW_TIMES
# A history kind: its entry table, and the printer of a whole list (its entries one by one).
_HISTORIES = {"admissions": (_ADMISSION, "_admissions"), "routes": (_ROUTE, "_routes")}


class _Unprintable(Exception):
    """A value the fast path leaves to the reference printer."""


def _scalar(value: Any) -> str:
    """A value of an unexpected type, as `canonical_json` prints it; not a container (its
    indentation depends on where it sits)."""
    if isinstance(value, Mapping | list | tuple):
        raise _Unprintable
    return canonical_json(value)


class _Code:
    """A printer's body: each value's local, then its text's; the texts' names in printed
    order."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.texts: list[str] = []
        self.fields: list[tuple[str, str, str]] = []  # (key, expression, kind), in order

    def value(self, key: str, expression: str, kind: str) -> None:
        n = len(self.texts)
        self.lines += [f"v{n} = {expression}", f"t{n} = " + _KINDS[kind].format(v=f"v{n}")]
        self.texts.append(f"t{n}")
        self.fields.append((key, expression, kind))


def _skeleton(table: tuple[Field, ...], flags: frozenset[str], code: _Code,
              inline: bool) -> dict[str, Any]:
    """The mapping of `table`'s fields for `flags`, each value a mark; `code` gets the values
    in the order `canonical_json` prints them (sorted keys, depth first). `inline`: the
    histories hold one entry each, printed in place (else each list is one printed value)."""
    skeleton: dict[str, Any] = {}
    for key, expression, kind, flag in sorted(table):
        if flag is not None and flag not in flags:
            continue
        if kind in _HISTORIES:
            entries, printer = _HISTORIES[kind]
            if inline:
                skeleton[key] = [_skeleton(entries, flags, code, inline=False)]
                continue
            expression, kind = f"{printer}({expression})", "text"
        code.value(key, expression, kind)
        skeleton[key] = _MARK
    return skeleton


def _pieces(skeleton: Mapping[str, Any], indent: str, prefix: str, count: int) -> list[str]:
    """`skeleton` as `canonical_json` prints it at `indent`, after `prefix`, cut at its `count`
    marks."""
    pieces = (prefix + canonical_json(skeleton, indent)).split(_SLOT)
    if len(pieces) != count + 1:
        raise AssertionError("a key holds the skeleton's mark")
    return pieces


def _fstring(skeleton: Mapping[str, Any], indent: str, prefix: str, texts: list[str]) -> str:
    """An f-string expression: `skeleton` as `canonical_json` prints it at `indent`, after
    `prefix`, each mark replaced by the next of `texts` (local names)."""
    pieces = _pieces(skeleton, indent, prefix, len(texts))
    fields = [f"{{{name}!s}}" for name in texts] + [""]  # !s: floats print faster
    body = "".join(piece.replace("{", "{{").replace("}", "}}") + field
                   for piece, field in zip(pieces, fields, strict=True))
    return "f" + repr(body)


_NAMESPACE: dict[str, Any] = {}  # what printers call: filled once the helpers are defined


def _printer(table: tuple[Field, ...], flags: frozenset[str], parameter: str, indent: str,
             prelude: tuple[str, ...] = (), inline: bool = False) -> Callable[[Any], str]:
    """The printer of one shape: `prelude`, each value's local and text, the f-string of the
    shape's text (a row starts with its indentation, an entry of a history list after the
    list's)."""
    code = _Code()
    skeleton = _skeleton(table, flags, code, inline)
    prefix = indent if parameter == "r" else ""
    lines = [f"def printer({parameter}):", *(f"    {line}" for line in (*prelude, *code.lines)),
             "    return " + _fstring(skeleton, indent, prefix, code.texts)]
    exec(compile("\n".join(lines), "<kvreplay row printer>", "exec"), _NAMESPACE)
    printer: Callable[[Any], str] = _NAMESPACE.pop("printer")
    return printer


def _list_layout(indent: str) -> tuple[str, str, str]:
    """How `canonical_json` prints a non-empty list at `indent`: opening, separator, closing."""
    opening, separator, closing = canonical_json([_MARK, _MARK], indent).split(_SLOT)
    return opening, separator, closing


_INNER = ROW_INDENT + "  "  # a value inside a row
_ENTRY = _INNER + "  "  # an admission or a routing decision, in its row's list
_OPEN, _SEPARATOR, _CLOSE = _list_layout(_INNER)


def _admissions(history: list[Admission]) -> str:
    if not history:
        return "[]"
    texts = [(_ADMISSION_SPLIT if a.g1_reused_input_tokens is not None else _ADMISSION_PLAIN)(a)
             for a in history]
    return _OPEN + _SEPARATOR.join(texts) + _CLOSE


def _routes(history: list[RoutingDecision]) -> str:
    if not history:
        return "[]"
    return _OPEN + _SEPARATOR.join([_ROUTE_TEXT(d) for d in history]) + _CLOSE


_NAMESPACE.update({
    "inner": _INNER, "_scalar": _scalar, "_string": json.encoder.encode_basestring,
    "_nested": canonical_json, "uuid_for": uuid_for,
    "_admissions": _admissions, "_routes": _routes})
_ADMISSION_PLAIN = _printer(_ADMISSION, frozenset(), "a", _ENTRY)
_ADMISSION_SPLIT = _printer(_ADMISSION, frozenset({"split"}), "a", _ENTRY)
_ROUTE_TEXT = _printer(_ROUTE, frozenset(), "d", _ENTRY)

Shape = tuple[bool, bool, bool, bool]  # agentic, with a warmup phase, with a host tier, MTP
_ROWS: dict[Shape, Callable[[Any], str]] = {}


def _row_printer(shape: Shape) -> Callable[[Any], str]:
    """A shape's row printer: the common row (one admission, split as the row is, and one
    routing decision) printed by one template; any other by the lists' own printers."""
    agentic, phase, host, mtp = shape
    flags = frozenset(flag for flag, on in (("agentic", agentic), ("phase", phase),
                                            ("host", host), ("split", host), ("mtp", mtp)) if on)
    name = f"_general_{len(_NAMESPACE)}"
    _NAMESPACE[name] = _printer(_ROW, flags, "r", ROW_INDENT, _ROW_TIMES)
    common = (f"if len(r.admission_history) != 1 or len(r.routing_history) != 1 or "
              f"(r.admission_history[0].g1_reused_input_tokens is None) is {host}:",
              f"    return {name}(r)",
              "a = r.admission_history[0]", "d = r.routing_history[0]", *_ROW_TIMES)
    printer = _ROWS[shape] = _printer(_ROW, flags, "r", ROW_INDENT, common, inline=True)
    return printer


# The compiled printer (engine/_rowtext.c, built by setup.py when a C compiler is at hand; set
# KVREPLAY_PURE_PYTHON=1 to do without it) prints the rows of ordinary records from plans made
# here, from the same tables and skeletons, and answers None for anything else.
_ATTRIBUTE = re.compile(r"[rad]\.(\w+)")
_OPS = ("float", "int", "str", "bool", "uuid", "or_none", "count", "span", "per_token", "nested",
        "admissions", "routes")  # engine/_rowtext.c's enum of ops, in its order
# The values that are not one attribute printed as its kind: key -> (op, name, name2).
_DERIVED_OPS: dict[str, tuple[str, str, str | None]] = {
    "uuid": ("uuid", "ordinal", None),
    "request_id": ("or_none", "request_id", None),
    "admission_count": ("count", "admission_history", None),
    "ttft_ms": ("span", "first_token_ms", "arrival_time_ms"),
    "ttst_ms": ("span", "second_token_ms", "first_token_ms"),
    "e2e_latency_ms": ("span", "last_token_ms", "arrival_time_ms"),
    "itl_ms": ("per_token", "last_token_ms", "first_token_ms"),
    "agentic": ("nested", "agentic", None),
    "admission_history": ("admissions", "admission_history", None),
    "routing_history": ("routes", "routing_history", None),
}
_TIMES = dict(line.split(" = ") for line in _ROW_TIMES)  # `first` -> `r.first_token_ms`...
Step = tuple[bytes, int, str, str | None]
Plan = tuple[tuple[Step, ...], bytes]


def _op(key: str, expression: str, kind: str) -> tuple[int, str, str | None]:
    """How the compiled printer reads and prints a field."""
    if key in _DERIVED_OPS:
        op, name, name2 = _DERIVED_OPS[key]
        return _OPS.index(op), name, name2
    attribute = _ATTRIBUTE.fullmatch(_TIMES.get(expression, expression))
    if attribute is None or kind not in _OPS[:4]:
        raise AssertionError(f"the compiled row printer cannot print {key} = {expression}")
    return _OPS.index(kind), attribute[1], None


def compiled_plan(table: tuple[Field, ...], flags: frozenset[str], indent: str,
                  prefix: str) -> Plan:
    """A shape's plan for _rowtext.c: its fixed text (as the Python printers print it: the same
    skeleton) cut before each value, with how that value is read and printed, and the tail."""
    code = _Code()
    skeleton = _skeleton(table, flags, code, inline=False)
    pieces = [piece.encode("ascii")
              for piece in _pieces(skeleton, indent, prefix, len(code.fields))]
    steps = tuple((piece, *_op(key, expression, kind))
                  for piece, (key, expression, kind) in zip(pieces[:-1], code.fields, strict=True))
    return steps, pieces[-1]


def _shape_flags(index: int) -> frozenset[str]:
    """The flags of row shape `index` (agentic * 4 + with a warmup phase * 2 + with a host
    tier), as _row_printer sets them."""
    on = {"agentic": index & 4, "phase": index & 2, "host": index & 1, "split": index & 1}
    return frozenset(flag for flag, set_ in on.items() if set_)


def _configure_compiled() -> Callable[[Any], str | None] | None:
    """The compiled printer, configured, or None (not built, or KVREPLAY_PURE_PYTHON set)."""
    if os.environ.get("KVREPLAY_PURE_PYTHON"):
        return None
    try:
        from kvreplay.engine import _rowtext
    except ImportError:
        return None
    _rowtext.configure(
        tuple(compiled_plan(_ROW, _shape_flags(i), ROW_INDENT, ROW_INDENT) for i in range(8)),
        compiled_plan(_ADMISSION, frozenset(), _ENTRY, ""),
        compiled_plan(_ADMISSION, frozenset({"split"}), _ENTRY, ""),
        compiled_plan(_ROUTE, frozenset(), _ENTRY, ""),
        (_OPEN.encode("ascii"), _SEPARATOR.encode("ascii"), _CLOSE.encode("ascii")),
        lambda agentic: canonical_json(dict(agentic), _INNER),
        ("agentic", "agentic_phase", "first_admission_g1_reused_input_tokens",
         "g1_reused_input_tokens", "output_length"))
    return _rowtext.row


compiled_row = _configure_compiled()


def row_text(record: RequestRecord) -> str:
    """`record`'s row as the canonical report prints it inside `per_request` (indented, no
    separator); ReportError (naming the request) for a value a report cannot hold. A row
    with the G3 split (G3 below G2) has no template: the mapping is printed; an MTP row (its
    speculation counts) has no compiled plan: the Python printers print it."""
    if record.first_admission_g3_reused_input_tokens is not None:
        return mapping_text(per_request_row(record))
    if compiled_row is not None and record.speculative_steps is None:
        text = compiled_row(record)
        if text is not None:
            return text
    return python_row_text(record)


def python_row_text(record: RequestRecord) -> str:
    """`row_text` printed by the Python printers alone (any record, any value)."""
    shape = (record.agentic is not None, record.agentic_phase is not None,
             record.first_admission_g1_reused_input_tokens is not None,
             record.speculative_steps is not None)
    printer = _ROWS.get(shape) or _row_printer(shape)
    try:
        return printer(record)
    except Exception:  # the reference path prints it or raises its own error
        return mapping_text(per_request_row(record))


def mapping_text(row: Mapping[str, Any]) -> str:
    """A row given as a mapping, printed as `row_text` prints a record's."""
    try:
        return ROW_INDENT + canonical_json(row, ROW_INDENT)
    except ValueError as exc:
        raise ReportError(f"request {row.get('uuid')}: {exc}") from exc
