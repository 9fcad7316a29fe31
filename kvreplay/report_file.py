"""Reading a report file (`compare`, `report`): every way a file can be wrong becomes one line."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from kvreplay.engine.traces.jsonl import json_type

SUPPORTED_VERSIONS = frozenset({1})


class ReportInputError(Exception):
    """A report that cannot be read (unreadable, not JSON, not a kvreplay report) or compared
    (not comparable with the other one): exit 2."""


def load_report(path: str) -> dict[str, Any]:
    """The report at `path` (a regular file: a FIFO is refused, not waited on), checked for the
    shape `compare` and `report` read."""
    from kvreplay.files import open_regular

    try:
        with open_regular(path) as f:
            data = f.read()
    except OSError as exc:
        raise ReportInputError(f"cannot read {path}: {exc.strerror or exc}") from None
    return parse_report(data, path)


def parse_report(data: bytes, label: str) -> dict[str, Any]:
    """A report from its bytes (`label` names it in messages)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReportInputError(f"{label}: not UTF-8 (byte 0x{data[exc.start]:02x} at offset "
                               f"{exc.start})") from None
    if not text.strip():
        raise ReportInputError(f"{label}: empty file, not a kvreplay report")
    try:
        report = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except json.JSONDecodeError as exc:
        raise ReportInputError(f"{label}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg}); "
                               "a truncated or hand-edited report?") from None
    except (ValueError, RecursionError) as exc:
        raise ReportInputError(f"{label}: not valid JSON ({exc})") from None
    check_shape(report, label)
    return report  # type: ignore[no-any-return]


def _finite(text: str) -> float:
    value = float(text)
    if value in (math.inf, -math.inf):
        raise ValueError(f"{text[:40]} is out of the range of a double")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a report may hold")


def check_shape(report: Any, label: str) -> None:
    """The parts `compare` and `report` read: a summary object, a per-request list of objects
    with uuids, a meta object from kvreplay with a supported `report_version`."""
    if not isinstance(report, dict):
        raise ReportInputError(f"{label}: not a kvreplay report (a JSON {json_type(report)}, "
                               "expected an object with summary, per_request, meta)")
    missing = [key for key in ("summary", "per_request", "meta") if key not in report]
    if missing:
        raise ReportInputError(f"{label}: not a kvreplay report (no "
                               + ", ".join(f"`{m}`" for m in missing) + ")")
    for key, kind in (("summary", dict), ("per_request", list), ("meta", dict)):
        if not isinstance(report[key], kind):
            expected = "an object" if kind is dict else "an array"
            raise ReportInputError(f"{label}: `{key}` is a {json_type(report[key])}, expected "
                                   f"{expected}")
    meta = report["meta"]
    if meta.get("generator") != "kvreplay":
        raise ReportInputError(f"{label}: meta.generator is {meta.get('generator')!r}, not "
                               "'kvreplay'")
    version = meta.get("report_version")
    if version not in SUPPORTED_VERSIONS or isinstance(version, bool):
        raise ReportInputError(f"{label}: report_version {version!r} is not one this kvreplay "
                               f"reads ({', '.join(map(str, sorted(SUPPORTED_VERSIONS)))})")
    for i, row in enumerate(report["per_request"]):
        if not isinstance(row, dict) or not isinstance(row.get("uuid"), str):
            raise ReportInputError(f"{label}: per_request[{i}] is not a request row with a "
                                   "string `uuid`")


def check_comparable(base: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    """Two reports of the same layout (their report_version)."""
    ours, theirs = base["meta"]["report_version"], new["meta"]["report_version"]
    if ours != theirs:
        raise ReportInputError(f"mismatched reports: BASE has report_version {ours}, NEW "
                               f"{theirs}; compare reports of one layout")
