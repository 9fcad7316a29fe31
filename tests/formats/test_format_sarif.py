"""The `sarif` reporter: a SARIF 2.1.0 log that validates, with indexed rules and relative URIs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema.validators import validator_for
from syrupy.assertion import SnapshotAssertion

from kvreplay.catalog import catalog as kvreplay_catalog
from kvreplay.formats import FileResult
from kvreplay.formats.sarif import Catalog, RuleMeta, render_sarif
from kvreplay.schema.diagnostics import Diagnostic, Related, Span

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "cases" / "sarif" / "sarif-schema-2.1.0.json"
# RFC 3986 URI-reference characters, with every `%` starting a two-digit escape.
URI_REFERENCE = re.compile(r"^(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-F]{2})*$")

MATRIX_RULES = {
    "POOL-CAPACITY": RuleMeta(
        "cluster_shared roles must agree on the pool capacity",
        "error",
        "https://example.com/kvreplay/rules/POOL-CAPACITY",
    ),
    "ROUTER-KV-ONLY": RuleMeta("kv_router knobs with round_robin are ignored", "warning", None),
    "NATIVE-LAYOUT-ID": ("cluster_shared needs kv_layout_id", "error", None),
}


# A fixed catalog for the snapshot, so that adding a built-in code does not change it.
SNAPSHOT_CATALOG = {
    **MATRIX_RULES,
    "FILE-UNREADABLE": ("The file cannot be read.", "error", None),
    "LINT-UNUSED-SUPPRESSION": ("An inline ignore suppresses nothing.", "warning", None),
    "SCHEMA-ENUM": ("A value is not one of the allowed names.", "error", None),
    "SCHEMA-REQUIRED": ("A required key is missing.", "error", None),
    "SCHEMA-TYPE": ("A value has the wrong type.", "error", None),
}


def catalog() -> Catalog:
    return {**kvreplay_catalog(), **MATRIX_RULES}


@pytest.fixture(scope="module")
def validate() -> Any:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    cls = validator_for(schema)
    cls.check_schema(schema)
    validator = cls(schema)

    def check(text: str) -> dict[str, Any]:
        log: dict[str, Any] = json.loads(text)
        errors = sorted(validator.iter_errors(log), key=lambda e: list(e.absolute_path))
        assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors[:5]]
        return log

    return check


def _sarif(results: tuple[FileResult, ...] | list[FileResult], **kwargs: Any) -> str:
    kwargs.setdefault("catalog", catalog())
    kwargs.setdefault("version", "9.9.9")
    return render_sarif(results, **kwargs)


def _results(log: dict[str, Any]) -> list[dict[str, Any]]:
    return log["runs"][0]["results"]  # type: ignore[no-any-return]


def test_snapshot(results: tuple[FileResult, ...], snapshot: SnapshotAssertion) -> None:
    """The SARIF log of the representative results (root /repo) is pinned."""
    text = _sarif(
        results,
        root="/repo",
        catalog=SNAPSHOT_CATALOG,
        information_uri="https://example.com/kvreplay",
    )
    assert text == snapshot


def test_one_rule_entry_in_full(snapshot: SnapshotAssertion) -> None:
    """G2-BACKEND's descriptor from the default catalog is pinned whole: descriptions, help
    text and Markdown with both examples and the fix, help URI, level, tags, precision."""
    log = json.loads(render_sarif([], version="0"))
    (entry,) = [r for r in log["runs"][0]["tool"]["driver"]["rules"] if r["id"] == "G2-BACKEND"]
    assert json.dumps(entry, indent=2, sort_keys=True) + "\n" == snapshot


@pytest.mark.parametrize("root", [None, "/repo"])
@pytest.mark.parametrize("with_catalog", [True, False])
def test_validates_against_the_official_schema(
    results: tuple[FileResult, ...], validate: Any, root: str | None, with_catalog: bool
) -> None:
    """The log validates against the OASIS SARIF 2.1.0 schema, with or without root and catalog."""
    kwargs: dict[str, Any] = {"root": root}
    if not with_catalog:
        kwargs["catalog"] = None
    log = validate(_sarif(results, **kwargs))
    assert log["version"] == "2.1.0"
    assert len(log["runs"]) == 1


def test_schema_check_catches_a_broken_log(results: tuple[FileResult, ...], validate: Any) -> None:
    """The schema check is real: a result with an unknown level or a column 0 fails it."""
    for key, value in (("level", "fatal"), ("ruleIndex", -5)):
        log = json.loads(_sarif(results))
        _results(log)[0][key] = value
        with pytest.raises(AssertionError):
            validate(json.dumps(log))


def test_empty_run_validates(validate: Any) -> None:
    """A clean run is a valid log with no results and the full rule list."""
    log = validate(_sarif([FileResult("a.yaml", "a: 1\n", ())], root="/repo"))
    assert _results(log) == []
    assert [r["id"] for r in log["runs"][0]["tool"]["driver"]["rules"]] == sorted(catalog())


def test_driver_lists_every_rule_sorted(results: tuple[FileResult, ...]) -> None:
    """Every catalog rule (and any rule used) is listed once, sorted, with its metadata."""
    log = json.loads(_sarif(results, catalog=MATRIX_RULES))
    driver = log["runs"][0]["tool"]["driver"]
    assert driver["name"] == "kvreplay"
    assert driver["version"] == "9.9.9"
    used = {d.rule for r in results for d in r.diagnostics}
    ids = [rule["id"] for rule in driver["rules"]]
    assert ids == sorted(set(MATRIX_RULES) | used)
    by_id = {rule["id"]: rule for rule in driver["rules"]}
    pool = by_id["POOL-CAPACITY"]
    assert pool["shortDescription"] == {"text": MATRIX_RULES["POOL-CAPACITY"][0]}
    assert pool["helpUri"] == MATRIX_RULES["POOL-CAPACITY"][2]
    assert pool["defaultConfiguration"] == {"level": "error"}
    assert by_id["ROUTER-KV-ONLY"]["defaultConfiguration"] == {"level": "warning"}
    assert "helpUri" not in by_id["ROUTER-KV-ONLY"]
    assert by_id["SCHEMA-REQUIRED"] == {"id": "SCHEMA-REQUIRED"}  # used but not in this catalog


def test_results_point_at_their_rule(results: tuple[FileResult, ...]) -> None:
    """Each result's ruleIndex is the index of its ruleId in the driver's rules."""
    log = json.loads(_sarif(results))
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    findings = [d for r in results for d in r.diagnostics]
    assert len(_results(log)) == len(findings)
    for result, d in zip(_results(log), findings, strict=True):
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"] == d.rule
        assert result["level"] == d.severity


def test_regions_match_the_spans(results: tuple[FileResult, ...]) -> None:
    """Regions carry the spans' 1-based lines and columns (end column exclusive, as in SARIF)."""
    log = json.loads(_sarif(results))
    findings = [d for r in results for d in r.diagnostics]
    for result, d in zip(_results(log), findings, strict=True):
        physical = result["locations"][0]["physicalLocation"]
        if d.line is None:
            assert "region" not in physical
            continue
        assert physical["region"] == {
            "startLine": d.line,
            "startColumn": d.column,
            "endLine": d.end_line,
            "endColumn": d.end_column,
        }


def test_uris_are_relative_to_srcroot(results: tuple[FileResult, ...]) -> None:
    """URIs are relative, forward-slashed, percent-encoded, based on %SRCROOT% = the root."""
    log = json.loads(_sarif(results, root="/work/repo"))
    run = log["runs"][0]
    assert run["originalUriBaseIds"] == {"%SRCROOT%": {"uri": "file:///work/repo/"}}
    locations = [
        loc["physicalLocation"]["artifactLocation"]
        for result in run["results"]
        for loc in result["locations"] + result.get("relatedLocations", [])
    ]
    assert {loc["uri"] for loc in locations} == {
        "configs/pd%20shared.yaml",
        "configs/missing.yaml",
        "specs/native.json",
    }
    assert all(loc["uriBaseId"] == "%SRCROOT%" for loc in locations)
    assert all(URI_REFERENCE.match(loc["uri"]) for loc in locations)


def test_absolute_and_awkward_paths() -> None:
    """Paths inside the root become relative; outside it, absolute file URIs; bytes preserved."""
    paths = [
        "/repo/a b/c#d?.yaml",
        "/elsewhere/x.yaml",
        "/repo/\u00e9t\u00e9-\udcff.yaml",
        "sub/:x.yaml",
    ]
    results = [
        FileResult(p, None, (Diagnostic("R", "error", "m", Span(p, None, 1)),)) for p in paths
    ]
    log = json.loads(_sarif(results, root="/repo", cwd="/repo"))
    artifacts = [r["locations"][0]["physicalLocation"]["artifactLocation"] for r in _results(log)]
    assert artifacts == [
        {"uri": "a%20b/c%23d%3F.yaml", "uriBaseId": "%SRCROOT%"},
        {"uri": "file:///elsewhere/x.yaml"},
        {"uri": "%C3%A9t%C3%A9-%FF.yaml", "uriBaseId": "%SRCROOT%"},
        {"uri": "sub/%3Ax.yaml", "uriBaseId": "%SRCROOT%"},
    ]
    assert all(URI_REFERENCE.match(a["uri"].removeprefix("file://")) for a in artifacts)


def test_hint_path_and_related_locations(results: tuple[FileResult, ...]) -> None:
    """The hint ends the message and is a property; related spans are relatedLocations."""
    log = json.loads(_sarif(results))
    pool = next(r for r in _results(log) if r["ruleId"] == "POOL-CAPACITY")
    assert pool["message"]["text"].endswith(
        "\nhint: capacity is the pool total, not per participant"
    )
    assert pool["properties"] == {
        "hint": "capacity is the pool total, not per participant",
        "path": "$.engine.workers.prefill.kv_cache.host_offload.num_host_blocks",
    }
    (related,) = pool["relatedLocations"]
    assert related["id"] == 0
    assert related["message"] == {"text": "decode sets 16 here"}
    assert related["physicalLocation"]["region"]["startLine"] == 17


def test_relative_root_is_taken_from_cwd(results: tuple[FileResult, ...]) -> None:
    """A relative root (`--root .`) is resolved against cwd; %SRCROOT% is then absolute."""
    log = json.loads(_sarif(results, root="..", cwd="/work/repo/configs"))
    assert log["runs"][0]["originalUriBaseIds"] == {"%SRCROOT%": {"uri": "file:///work/repo/"}}
    artifact = _results(log)[0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert artifact == {"uri": "configs/configs/pd%20shared.yaml", "uriBaseId": "%SRCROOT%"}


def test_relative_root_without_cwd_is_rejected(results: tuple[FileResult, ...]) -> None:
    """%SRCROOT% must be an absolute directory URI: a relative root needs a cwd."""
    with pytest.raises(ValueError, match="absolute"):
        _sarif(results, root="repo")


def test_bad_catalog_severity_is_rejected() -> None:
    """A catalog default severity outside error|warning|note is a caller error."""
    with pytest.raises(ValueError, match="X-RULE"):
        render_sarif([], catalog={"X-RULE": ("d", "fatal", None)})


def test_deterministic(results: tuple[FileResult, ...]) -> None:
    """The same results give the same bytes (sorted keys, ASCII)."""
    text = _sarif(results, root="/repo")
    assert text == _sarif(results, root="/repo")
    assert text.isascii()


_position = st.one_of(st.none(), st.integers(min_value=1, max_value=50))
_span = st.builds(
    Span,
    file=st.one_of(st.none(), st.sampled_from(["a.yaml", "d/b c.json", "/repo/x.yaml", "/o/y"])),
    path=st.one_of(st.none(), st.just("$.a")),
    line=_position,
    column=_position,
    end_line=_position,
    end_column=_position,
)
_diagnostic = st.builds(
    Diagnostic,
    rule=st.sampled_from(["POOL-CAPACITY", "SCHEMA-TYPE", "NOT-IN-CATALOG"]),
    severity=st.sampled_from(["error", "warning", "note"]),
    message=st.text(max_size=30),
    span=_span,
    hint=st.one_of(st.none(), st.text(max_size=10)),
    related=st.lists(st.builds(Related, message=st.text(max_size=10), span=_span), max_size=2).map(
        tuple
    ),
)


@settings(max_examples=40, deadline=None)
@given(diagnostics=st.lists(_diagnostic, max_size=4), root=st.sampled_from([None, "/repo"]))
def test_any_findings_validate(
    validate: Any, diagnostics: list[Diagnostic], root: str | None
) -> None:
    """Whatever the spans (missing parts, reversed ends), the log validates."""
    text = _sarif([FileResult("a.yaml", None, tuple(diagnostics))], root=root)
    validate(text)
