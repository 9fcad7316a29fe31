"""A sweep's results folder read back (results.jsonl, best.json and, when present, sweep.json),
every part checked for the shape `kvreplay sweep` writes: a folder of unknown origin is refused
with one line naming the file, the line and the field, never a traceback."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from kvreplay.engine.traces.jsonl import json_type
from kvreplay.sweep.manifest import MANIFEST
from kvreplay.sweep.results import Row

STATUSES = ("ok", "skipped", "failed", "pending")


class ResultsError(ValueError):
    """A folder that is not a readable sweep results folder: one line, exit 2."""


@attrs.frozen
class SweepResults:
    rows: list[Row]
    best: dict[str, Any]
    manifest: dict[str, Any] | None  # None: a folder written before sweep.json existed


def read_results(folder: str) -> SweepResults:
    """The checked content of a results folder (ResultsError when it is not one)."""
    if not os.path.isdir(folder):
        what = "no such folder" if not os.path.exists(folder) else "not a folder"
        raise ResultsError(f"cannot read sweep results in {folder}: {what}")
    table = os.path.join(folder, "results.jsonl")
    if not os.path.exists(table):
        raise ResultsError(f"{folder}: not a sweep results folder (no results.jsonl; "
                           f"`kvreplay sweep SWEEP -o {folder}` writes one)")
    rows = [_row(value, f"{table}:{n}") for n, value in _lines(table)]
    if not rows:
        raise ResultsError(f"{table}: no row (an empty results table)")
    best_path = os.path.join(folder, "best.json")
    if not os.path.exists(best_path):
        raise ResultsError(f"{folder}: not a complete sweep results folder (no best.json)")
    best = _best(_document(best_path), best_path)
    manifest_path = os.path.join(folder, MANIFEST)
    manifest = (_manifest(_document(manifest_path), manifest_path)
                if os.path.exists(manifest_path) else None)
    return SweepResults(rows, best, manifest)


def _text(path: str) -> str:
    from kvreplay.schema.files import open_regular

    try:
        with open_regular(path) as fh:
            data = fh.read()
    except OSError as exc:
        raise ResultsError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ResultsError(f"{path}: not UTF-8 (byte 0x{data[exc.start]:02x} at offset "
                           f"{exc.start})") from None


def _parse(text: str, where: str) -> Any:
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{where}: not valid JSON ({exc.msg}); a truncated or hand-edited "
                           "file?") from None
    except (ValueError, RecursionError) as exc:
        raise ResultsError(f"{where}: not valid JSON ({exc})") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a sweep writes")


def _lines(path: str) -> list[tuple[int, Any]]:
    return [(n, _parse(line, f"{path}:{n}"))
            for n, line in enumerate(_text(path).splitlines(), 1) if line.strip()]


def _document(path: str) -> Any:
    return _parse(_text(path), path)


def _wrong(where: str, key: str, expected: str, value: Any) -> ResultsError:
    return ResultsError(f"{where}: `{key}` is {_article(json_type(value))}, expected {expected}")


def _article(name: str) -> str:
    return name if name == "null" else f"an {name}" if name[0] in "aeiou" else f"a {name}"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_object(value: Any) -> bool:
    return isinstance(value, dict)


def _optional(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: value is None or check(value)


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _fields(value: Any, where: str, what: str,
            checks: Mapping[str, tuple[Callable[[Any], bool], str]]) -> dict[str, Any]:
    """`value` as an object whose listed fields pass their checks."""
    if not isinstance(value, dict):
        raise ResultsError(f"{where}: {_article(json_type(value))}, expected {what}")
    for key, (ok, expected) in checks.items():
        if key not in value:
            raise ResultsError(f"{where}: no `{key}` (expected {what})")
        if not ok(value[key]):
            raise _wrong(where, key, expected, value[key])
    return value


ROW_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "point": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
              "a point number"),
    "trace": (_optional(_is_str), "a string or null"),
    "status": (lambda v: v in STATUSES, " or ".join(STATUSES)),
    "rules": (_is_strings, "an array of rule IDs"),
    "error": (_optional(_is_str), "a string or null"),
    "sla_ok": (lambda v: v is None or isinstance(v, bool), "a boolean or null"),
    "rejections": (_optional(_is_str), "a string or null"),
    "parameters": (_is_object, "an object"),
    "figures": (lambda v: _is_object(v) and all(_optional(_is_number)(x) for x in v.values()),
                "an object of numbers"),
}


def _row(value: Any, where: str) -> Row:
    if isinstance(value, dict):
        value.setdefault("rejections", None)  # a folder from before rows said it
    return _fields(value, where, "a row of `kvreplay sweep`", ROW_FIELDS)


def _goal(value: Any) -> bool:
    return (_is_object(value) and len(value) == 1
            and next(iter(value)) in ("minimize", "maximize") and _is_str(*value.values()))


def _bounds(value: Any) -> bool:
    return _is_object(value) and all(
        _is_object(b) and b and all(k in ("max", "min") and _is_number(x) for k, x in b.items())
        for b in value.values())


def _choice(value: Any) -> bool:
    return value is None or (_is_object(value) and isinstance(value.get("point"), int)
                             and _is_number(value.get("value")))


BEST_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "complete": (lambda v: isinstance(v, bool), "a boolean"),
    "objective": (_goal, "{minimize: FIGURE} or {maximize: FIGURE}"),
    "sla": (_bounds, "an object of {max: X} / {min: X} bounds"),
    "best": (_choice, "null or an object with `point` and `value`"),
    "runner_up": (_choice, "null or an object with `point` and `value`"),
    "counts": (lambda v: _is_object(v) and all(isinstance(x, int) for x in v.values()),
               "an object of counts"),
    "explanation": (_is_str, "a string"),
}


def _best(value: Any, where: str) -> dict[str, Any]:
    return _fields(value, where, "best.json of `kvreplay sweep`", BEST_FIELDS)


MANIFEST_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "kvreplay_version": (_is_str, "a string"),
    "sweep": (_is_str, "a string"),
    "sweep_digest": (_optional(_is_str), "a string or null"),
    "base_digest": (_optional(_is_str), "a string or null"),
    "overrides": (_is_strings, "an array of strings"),
    "traces": (lambda v: isinstance(v, list) and all(
        _is_object(t) and _optional(_is_str)(t.get("trace"))
        and _optional(_is_str)(t.get("digest")) for t in v), "an array of {trace, digest}"),
}


def _manifest(value: Any, where: str) -> dict[str, Any]:
    found = _fields(value, where, f"{MANIFEST} of `kvreplay sweep`", MANIFEST_FIELDS)
    reports = found.get("reports", {})  # absent in a folder from before it was recorded
    if not (_is_object(reports) and all(_is_str(v) for v in reports.values())):
        raise _wrong(where, "reports", "an object of report digests", reports)
    return found


def read_manifest(folder: str) -> dict[str, Any] | None:
    """A results folder's checked sweep.json, or None when it has none (ResultsError when it
    cannot be read as one)."""
    path = os.path.join(folder, MANIFEST)
    if not os.path.lexists(path):
        return None
    return _manifest(_document(path), path)
