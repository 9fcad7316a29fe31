"""Reading a report file (`compare`, `report`): every way a file can be wrong becomes one line."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from kvreplay.engine.simtime import HORIZON_MS, HORIZON_TEXT
from kvreplay.engine.traces.jsonl import MAX_NESTING, TOO_DEEP, json_type, too_deep
from kvreplay.io.display import escape_inline

SUPPORTED_VERSIONS = frozenset({1})
# The per-request figures `compare` joins on: a number, or null when a request has none.
JOINED_FIGURES = ("ttft_ms", "e2e_latency_ms")


class ReportInputError(Exception):
    """A report that cannot be read (unreadable, not JSON, not a kvreplay report) or compared
    (not comparable with the other one): exit 2."""


def load_report(path: str) -> dict[str, Any]:
    """The report at `path` (a regular file: a FIFO is refused, not waited on), checked for the
    shape `compare` and `report` read."""
    from kvreplay.schema.files import open_regular

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
        report = json.loads(text, parse_constant=_no_constant, parse_float=_finite,
                            parse_int=_int64)
    except json.JSONDecodeError as exc:
        raise ReportInputError(f"{label}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg}); "
                               "a truncated or hand-edited report?") from None
    except _NumberError as exc:
        raise ReportInputError(f"{label}{_where(text, exc.literal)}: {exc}") from None
    except RecursionError:
        at = too_deep(text)
        line, column = text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)
        raise ReportInputError(f"{label}:{line}:{column}: not valid JSON ({TOO_DEEP}, past "
                               f"{MAX_NESTING} levels here)") from None
    except ValueError as exc:
        raise ReportInputError(f"{label}: not valid JSON ({exc})") from None
    check_shape(report, label)
    return report  # type: ignore[no-any-return]


class _NumberError(ValueError):
    """A number no report holds; `literal` is its text, to find it in the file."""

    def __init__(self, literal: str, why: str) -> None:
        super().__init__(f"{literal[:40]}{'...' if len(literal) > 40 else ''} {why}")
        self.literal = literal


def _finite(text: str) -> float:
    value = float(text)
    if value in (math.inf, -math.inf):
        raise _NumberError(text, "is out of the range of a double")
    return value


def _int64(text: str) -> int:
    # A report's counts are 64-bit integers (the Parquet export's int64 columns): a larger
    # one would overflow every float it meets (a rate, a share, a delta).
    if len(text) < 19:  # the common case, first: this runs for every integer of the file
        return int(text)
    value = int(text) if len(text) <= 20 else 2**63
    if not -2**63 <= value < 2**63:
        raise _NumberError(text, "is past the 64-bit integers a report holds")
    return value


def _where(text: str, literal: str) -> str:
    """`:line:col` of the number token `literal` (its first occurrence as a token)."""
    found = re.search(r"(?:^|(?<=[\s:,\[]))" + re.escape(literal) + r"(?=[\s,\]}]|$)", text)
    if found is None:
        return ""
    line = text.count("\n", 0, found.start()) + 1
    column = found.start() - (text.rfind("\n", 0, found.start()) + 1) + 1
    return f":{line}:{column}"


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
    check_rows(report["per_request"], label)


def check_rows(rows: list[Any], label: str) -> None:
    """Request rows with a string `uuid` each, no uuid twice (a row would leave the join
    unseen), and the JOINED_FIGURES numbers (within the engine's horizon) or null."""
    first: dict[str, int] = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not isinstance(row.get("uuid"), str):
            raise ReportInputError(f"{label}: per_request[{i}] is not a request row with a "
                                   "string `uuid`")
        uuid = row["uuid"]
        seen = first.setdefault(uuid, i)
        if seen != i:
            raise ReportInputError(f"{label}: per_request[{i}].uuid {escape_inline(repr(uuid))} "
                                   f"is also per_request[{seen}]'s: a report lists each request "
                                   "once")
        for key in JOINED_FIGURES:
            value = row.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                shown = escape_inline(json.dumps(value, ensure_ascii=False)[:40])
                raise ReportInputError(f"{label}: per_request[{i}].{key} is a "
                                       f"{json_type(value)} ({shown}), expected a number or "
                                       "null")
            if not -HORIZON_MS <= value <= HORIZON_MS:
                raise ReportInputError(f"{label}: per_request[{i}].{key}: {value:.6g} ms is "
                                       f"past the engine's horizon of {HORIZON_TEXT}: no replay "
                                       "reaches it")


def check_comparable(base: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    """Two reports of the same layout (their report_version)."""
    ours, theirs = base["meta"]["report_version"], new["meta"]["report_version"]
    if ours != theirs:
        raise ReportInputError(f"mismatched reports: BASE has report_version {ours}, NEW "
                               f"{theirs}; compare reports of one layout")
