"""The output folder: reports named by digest, finished ones recognized for resuming, and every
file written atomically (a temp file renamed into place)."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

REPORTS = "reports"


def report_name(spec_digest: str, trace_digest: str | None, several_traces: bool) -> str:
    """`<spec digest>`, or `<spec digest>-<trace digest>` when the sweep has several traces."""
    if several_traces and trace_digest is not None:
        return f"{spec_digest}-{trace_digest}"
    return spec_digest


def report_path(name: str) -> str:
    """The report's path relative to the output folder (as the table shows it)."""
    return f"{REPORTS}/{name}.json"


@cache
def _required_summary() -> frozenset[str]:
    from kvreplay.compiler.validate import load_schema

    required = load_schema("report")["properties"]["summary"].get("required", [])
    return frozenset(required)


def report_digest(data: bytes) -> str:
    """What sweep.json records of a report when the sweep writes it: the first 16 hex digits
    of the SHA-256 of its bytes."""
    import hashlib

    return hashlib.sha256(data).hexdigest()[:16]


def finished_summary(path: str, spec_digest: str, trace_digest: str | None,
                     version: str, recorded: str | None) -> dict[str, Any] | None:
    """The summary of a complete report this sweep wrote for this spec and trace with this
    kvreplay version, still as it was written (its bytes have the digest `recorded`); None
    when the file is missing, cut, foreign, from another version, edited since or its digest
    is not recorded."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    if recorded is None or report_digest(data) != recorded:
        return None
    try:
        report = json.loads(data)
    except ValueError:
        return None
    if not isinstance(report, dict) or set(report) != {"summary", "per_request", "meta"}:
        return None
    meta, summary = report["meta"], report["summary"]
    if not isinstance(meta, dict) or not isinstance(summary, dict) \
            or not isinstance(report["per_request"], list):
        return None
    if meta.get("kvreplay_version") != version or meta.get("sweep_point") != {
            "spec_digest": spec_digest, "trace_digest": trace_digest}:
        return None
    if not _required_summary() <= set(summary):
        return None
    return summary


def write_atomic(path: str, text: str | bytes) -> None:
    """Replace `path` with `text` (or bytes) through a temp file beside it."""
    from kvreplay.io.output import write_files

    write_files([(path, text)], follow_symlinks=False)
