"""`--format sarif`: one SARIF 2.1.0 run, for GitHub code scanning and other SARIF viewers.

`tool.driver.rules` lists every ID of the catalog (plus any rule a finding uses that the catalog
lacks), sorted by ID; each result points at its rule by `ruleId` and `ruleIndex`. The default
catalog is kvreplay's own (kvreplay.rule_docs, the same entries `kvreplay explain` prints): each
rule with its default severity, descriptions, help text and Markdown (rationale, a failing and a
passing example, the fix), help URI, tags and precision. File URIs are relative to `%SRCROOT%`
(the repository root, given in `originalUriBaseIds` when the caller passes `root`); files outside
the root get absolute `file://` URIs. Columns are Unicode code points with exclusive end columns,
as in kvreplay's spans.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any, NamedTuple
from urllib.parse import quote

from kvreplay.formats.paths import resolve_root, root_relative
from kvreplay.formats.result import FileResult
from kvreplay.schema.diagnostics import SEVERITY_ORDER, Diagnostic, Span

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
SRCROOT = "%SRCROOT%"
TOOL_NAME = "kvreplay"


class RuleMeta(NamedTuple):
    """What SARIF says about a rule; only the first two fields are required."""

    description: str  # shortDescription
    severity: str  # defaultConfiguration.level
    help_uri: str | None = None
    full_description: str | None = None
    help_text: str | None = None
    help_markdown: str | None = None
    tags: tuple[str, ...] = ()
    precision: str | None = None


# Rule ID -> RuleMeta, or a plain (short description, default severity, help URI) tuple.
Catalog = Mapping[str, RuleMeta | tuple[str, str, str | None]]


def default_catalog() -> dict[str, RuleMeta]:
    """kvreplay's catalog with its help: every rule and code, as `kvreplay explain` knows it.

    Building it lints each ID's failing example (for the findings and fix the help shows).
    """
    from kvreplay.rule_docs import render_markdown, render_text, rule_docs

    return {
        rule_id: RuleMeta(doc.title, doc.severity, doc.help_uri, doc.description,
                          render_text(doc), render_markdown(doc), doc.tags, doc.precision)
        for rule_id, doc in rule_docs().items()
    }


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

    `catalog` defaults to `default_catalog()`; `version` to kvreplay's own. `root` is the
    repository root, absolute or relative to `cwd`; relative file paths are taken from `cwd`
    (default: `root`).
    """
    if catalog is None:
        catalog = default_catalog()
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


def _rule(rule: str, entry: RuleMeta | tuple[str, str, str | None] | None) -> dict[str, Any]:
    descriptor: dict[str, Any] = {"id": rule}
    if entry is None:
        return descriptor
    meta = RuleMeta(*entry)
    if meta.severity not in SEVERITY_ORDER:
        raise ValueError(
            f"rule {rule}: default severity {meta.severity!r} is not error|warning|note")
    descriptor["shortDescription"] = {"text": meta.description}
    descriptor["defaultConfiguration"] = {"level": meta.severity}
    if meta.full_description is not None:
        descriptor["fullDescription"] = {"text": meta.full_description}
    if meta.help_text is not None:
        descriptor["help"] = {"text": meta.help_text}
        if meta.help_markdown is not None:
            descriptor["help"]["markdown"] = meta.help_markdown
    if meta.help_uri is not None:
        descriptor["helpUri"] = meta.help_uri
    # No `security-severity`: these rules judge whether a deployment is valid, not its security.
    properties: dict[str, Any] = {}
    if meta.tags:
        properties["tags"] = list(meta.tags)
    if meta.precision is not None:
        properties["precision"] = meta.precision
    if properties:
        descriptor["properties"] = properties
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
    if d.count > 1:  # repeats folded into one finding (its message names their lines)
        result["occurrenceCount"] = d.count
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
