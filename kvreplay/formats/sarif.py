"""`--format sarif`: one SARIF 2.1.0 run, for GitHub code scanning and other SARIF viewers.

`tool.driver.rules` lists every rule of the catalog (plus any rule a finding uses that the
catalog lacks), sorted by ID; each result points at its rule by `ruleId` and `ruleIndex`. File
URIs are relative to `%SRCROOT%` (the repository root, given in `originalUriBaseIds` when the
caller passes `root`); files outside the root get absolute `file://` URIs. Columns are Unicode
code points with exclusive end columns, as in kvreplay's spans.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any, NamedTuple
from urllib.parse import quote

from kvreplay.diagnostics import SEVERITY_ORDER, Diagnostic, Span
from kvreplay.formats.paths import resolve_root, root_relative
from kvreplay.formats.result import FileResult

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
SRCROOT = "%SRCROOT%"
TOOL_NAME = "kvreplay"


class RuleMeta(NamedTuple):
    """What SARIF says about a rule: short description, default severity, help URI (or None)."""

    description: str
    severity: str
    help_uri: str | None = None


# Rule ID -> (short description, default severity, help URI); RuleMeta or plain tuples.
Catalog = Mapping[str, tuple[str, str, str | None]]


def codes_catalog() -> dict[str, RuleMeta]:
    """The built-in diagnostic codes (kvreplay.codes) as a catalog, all defaulting to `error`."""
    from kvreplay.codes import CODES

    return {code: RuleMeta(info.summary, "error") for code, info in CODES.items()}


def render_sarif(
    results: Sequence[FileResult],
    *,
    catalog: Catalog | None = None,
    version: str | None = None,
    root: str | None = None,
    cwd: str | None = None,
    information_uri: str | None = None,
) -> str:
    """The SARIF log as JSON text (sorted keys, two-space indent, ASCII, final newline).

    `catalog` defaults to `codes_catalog()`; `version` to kvreplay's own. `root` is the
    repository root, absolute or relative to `cwd`; relative file paths are taken from `cwd`
    (default: `root`).
    """
    if catalog is None:
        catalog = codes_catalog()
    if version is None:
        import kvreplay

        version = kvreplay.__version__
    used = {d.rule for r in results for d in r.diagnostics}
    rule_ids = sorted(set(catalog) | used)
    index = {rule: i for i, rule in enumerate(rule_ids)}
    driver: dict[str, Any] = {
        "name": TOOL_NAME,
        "version": version,
        "rules": [_rule(rule, catalog.get(rule)) for rule in rule_ids],
    }
    if information_uri is not None:
        driver["informationUri"] = information_uri
    run: dict[str, Any] = {
        "tool": {"driver": driver},
        "columnKind": "unicodeCodePoints",
        "results": [
            _result(d, r.path, index[d.rule], root, cwd) for r in results for d in r.diagnostics
        ],
    }
    if root is not None:
        run["originalUriBaseIds"] = {SRCROOT: {"uri": _directory_uri(root, cwd)}}
    log = {"$schema": SARIF_SCHEMA_URI, "version": SARIF_VERSION, "runs": [run]}
    return json.dumps(log, indent=2, sort_keys=True, ensure_ascii=True) + "\n"


def _rule(rule: str, meta: tuple[str, str, str | None] | None) -> dict[str, Any]:
    descriptor: dict[str, Any] = {"id": rule}
    if meta is None:
        return descriptor
    description, severity, help_uri = meta
    if severity not in SEVERITY_ORDER:
        raise ValueError(f"rule {rule}: default severity {severity!r} is not error|warning|note")
    descriptor["shortDescription"] = {"text": description}
    descriptor["defaultConfiguration"] = {"level": severity}
    if help_uri is not None:
        descriptor["helpUri"] = help_uri
    return descriptor


def _result(
    d: Diagnostic, default_file: str, rule_index: int, root: str | None, cwd: str | None
) -> dict[str, Any]:
    file = d.file or default_file
    text = f"{d.message}\nhint: {d.hint}" if d.hint else d.message
    result: dict[str, Any] = {
        "ruleId": d.rule,
        "ruleIndex": rule_index,
        "level": d.severity,
        "message": {"text": text},
    }
    if file:
        result["locations"] = [{"physicalLocation": _physical(file, d.span, root, cwd)}]
    related = []
    for i, r in enumerate(d.related):
        entry: dict[str, Any] = {"id": i, "message": {"text": r.message}}
        related_file = r.span.file or file
        if related_file:
            entry["physicalLocation"] = _physical(related_file, r.span, root, cwd)
        related.append(entry)
    if related:
        result["relatedLocations"] = related
    properties = {"hint": d.hint, "path": d.path}
    if any(v is not None for v in properties.values()):
        result["properties"] = {k: v for k, v in properties.items() if v is not None}
    return result


def _physical(file: str, span: Span, root: str | None, cwd: str | None) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": artifact_location(file, root, cwd)}
    region = _region(span)
    if region is not None:
        physical["region"] = region
    return physical


def artifact_location(file: str, root: str | None, cwd: str | None = None) -> dict[str, str]:
    """`{"uri", "uriBaseId"}` for a file under the root, `{"uri": "file:///..."}` otherwise."""
    path, relative = root_relative(file, root, cwd)
    if relative:
        return {"uri": _quote(path), "uriBaseId": SRCROOT}
    if not PurePath(path).is_absolute():  # only when the caller's cwd is itself relative
        return {"uri": _quote(path)}
    return {"uri": PurePath(path).as_uri()}


def _region(span: Span) -> dict[str, int] | None:
    if span.line is None or span.line < 1:
        return None
    region = {"startLine": span.line}
    start_column = span.column if span.column is not None and span.column >= 1 else None
    if start_column is not None:
        region["startColumn"] = start_column
    if span.end_line is None or span.end_line < span.line:
        return region
    region["endLine"] = span.end_line
    if (
        start_column is not None
        and span.end_column is not None
        and (span.end_line > span.line or span.end_column >= start_column)
    ):
        region["endColumn"] = span.end_column
    return region


def _directory_uri(root: str, cwd: str | None) -> str:
    directory = resolve_root(root, cwd)
    if not directory.is_absolute():
        raise ValueError(f"the SARIF source root must be absolute (or cwd given), got {root!r}")
    uri = directory.as_uri()
    return uri if uri.endswith("/") else uri + "/"


def _quote(path: str) -> str:
    # Undecodable file names arrive with lone surrogates: percent-encode their original bytes.
    try:
        return quote(path, safe="/", errors="surrogateescape")
    except UnicodeEncodeError:
        return quote(path, safe="/", errors="surrogatepass")
