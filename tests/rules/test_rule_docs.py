"""One catalog for `explain`, SARIF and --select: every ID's help, examples, fix and links."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kvreplay import HOMEPAGE
from kvreplay.catalog import catalog
from kvreplay.cli.main import main
from kvreplay.explainer import explain
from kvreplay.formats.sarif import render_sarif
from kvreplay.rule_docs import RuleDoc, heading, rule_docs
from kvreplay.rules.corpus import CASES_DIR

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("kvreplay", "compiler", "engine", "rules", "schema")
DOCS = rule_docs()
WITH_EXAMPLES = sorted(i for i, d in DOCS.items() if d.failing and d.passing)


@pytest.fixture(scope="module")
def sarif_rules() -> dict[str, dict[str, Any]]:
    log = json.loads(render_sarif([], version="0"))
    return {rule["id"]: rule for rule in log["runs"][0]["tool"]["driver"]["rules"]}


def _lint_json(path: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int, Any]:
    code = main(["lint", "--format", "json", *flags, str(path)])
    out = capsys.readouterr().out
    return code, json.loads(out)["files"][0]["diagnostics"]


def test_sarif_lists_the_catalog_with_its_severities(
        sarif_rules: dict[str, dict[str, Any]]) -> None:
    """SARIF's rules are exactly the catalog's IDs, each at the catalog's severity, and
    `explain` opens each with the same heading (one source for all three)."""
    assert sorted(sarif_rules) == sorted(catalog()) == list(DOCS)
    for rule_id, (summary, severity, uri) in catalog().items():
        rule = sarif_rules[rule_id]
        assert rule["defaultConfiguration"] == {"level": severity}
        assert rule["helpUri"] == uri
        assert rule["shortDescription"] == {"text": summary}
    assert {r["defaultConfiguration"]["level"] for r in sarif_rules.values()} == {
        "error", "warning", "note"}
    for rule_id in ("G2-SHARED-LINK", "SCHEMA-ENUM", "TRACE-TRUNCATED"):
        assert (explain(rule_id) or "").startswith(heading(DOCS[rule_id]) + "\n")


def test_every_rule_has_help(sarif_rules: dict[str, dict[str, Any]]) -> None:
    """Each rule has short and full descriptions, help text and Markdown with a fix, tags and a
    precision; none claims a security severity (none judges security)."""
    for rule_id, rule in sarif_rules.items():
        for key in ("shortDescription", "fullDescription"):
            assert rule[key]["text"].strip(), (rule_id, key)
        help_ = rule["help"]
        assert help_["text"].startswith(rule_id) and "\nFix: " in help_["text"], rule_id
        assert f"**{rule_id}**" in help_["markdown"] and "**Fix:** " in help_["markdown"]
        assert all(len(f) > 8 for f in DOCS[rule_id].fix), rule_id
        assert rule["properties"]["tags"] and all(rule["properties"]["tags"])
        assert rule["properties"]["precision"] in ("very-high", "high", "medium", "low")
        assert "security-severity" not in rule["properties"]


@pytest.mark.parametrize("rule_id", WITH_EXAMPLES)
def test_help_shows_both_examples(rule_id: str, sarif_rules: dict[str, dict[str, Any]]) -> None:
    """Text and Markdown help quote the failing and the passing case, and what lint reports."""
    doc = DOCS[rule_id]
    assert doc.failing and doc.passing
    help_ = sarif_rules[rule_id]["help"]
    for example in (doc.failing, doc.passing):
        assert example.shown in help_["text"] and f"`{example.shown}`" in help_["markdown"]
        assert example.text.rstrip() in help_["markdown"]
        first = next(line for line in example.text.splitlines() if line.strip())
        assert "    " + first in help_["text"]
    reported = next(d for d in doc.failing.reports if d.rule == rule_id)
    assert f"{reported.severity} {rule_id} {reported.message}" in help_["text"]
    assert f"`{rule_id}`: {reported.message}" in help_["markdown"]


@pytest.mark.parametrize("rule_id", WITH_EXAMPLES)
def test_examples_really_fail_and_pass(rule_id: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`kvreplay lint` on the failing example reports the ID; the passing one is clean even
    with --strict."""
    doc = DOCS[rule_id]
    assert doc.failing and doc.passing
    code, found = _lint_json(doc.failing.path, capsys)
    assert rule_id in {d["rule"] for d in found}
    assert code == (1 if doc.severity == "error" else 0)
    code, found = _lint_json(doc.passing.path, capsys, "--strict")
    assert (code, found) == (0, [])


def test_missing_examples_are_explained() -> None:
    """Every matrix rule has examples; an ID without them says why, and has no case folder."""
    without = {i: d for i, d in DOCS.items() if not (d.failing and d.passing)}
    assert not [i for i, d in without.items() if d.matrix]
    assert all(d.no_example and len(d.no_example) > 20 for d in without.values())
    assert not [i for i, d in DOCS.items() if d.no_example and (CASES_DIR / i).exists()]
    assert all(d.failing is None and d.passing is None for d in without.values())
    assert len(WITH_EXAMPLES) > len(without)


def _anchors(doc: Path) -> set[str]:
    return set(re.findall(r'<a id="([^"]+)"></a>', doc.read_text(encoding="utf-8")))


def test_help_uris_point_at_anchors_of_the_docs() -> None:
    """Each help URI is this project's doc page at an anchor that page really has."""
    prefix = f"{HOMEPAGE}/blob/main/"
    pages: dict[str, set[str]] = {}
    for rule_id, doc in DOCS.items():
        assert doc.help_uri and doc.help_uri.startswith(prefix), rule_id
        page, _, anchor = doc.help_uri.removeprefix(prefix).partition("#")
        if page not in pages:
            pages[page] = _anchors(REPO / page)
        assert anchor in pages[page], doc.help_uri


def _fixed_severity(node: ast.Call) -> tuple[str, str] | None:
    """(ID, severity) of a call that creates a finding with a literal ID and severity."""
    args = [a.value for a in node.args if isinstance(a, ast.Constant)]
    if not args or not isinstance(args[0], str) or args[0] not in catalog():
        return None
    for kw in node.keywords:
        if kw.arg == "severity" and isinstance(kw.value, ast.Constant):
            return args[0], str(kw.value.value)
    if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) \
            and node.args[1].value in ("error", "warning", "note"):
        return args[0], str(node.args[1].value)
    return None


def test_emitters_use_the_catalog_severity() -> None:
    """Every finding created with a literal ID and severity in the library uses the catalog's
    default severity for that ID (so SARIF's defaultConfiguration tells the truth)."""
    seen: dict[tuple[str, str], str] = {}
    for folder in SOURCES:
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text("utf-8"))):
                if isinstance(node, ast.Call) and (pair := _fixed_severity(node)):
                    seen.setdefault(pair, str(path.relative_to(REPO)))
    wrong = {pair: where for pair, where in seen.items() if catalog()[pair[0]][1] != pair[1]}
    assert not wrong
    assert {("TRACE-TRUNCATED", "note"), ("LINT-UNUSED-SUPPRESSION", "warning"),
            ("FILE-UNREADABLE", "error")} <= set(seen)


def test_text_lint_does_not_load_the_help() -> None:
    """Only SARIF builds the help: a concise lint imports neither it nor the SARIF writer."""
    example = REPO / "examples" / "kv-router-mooncake.yaml"
    probe = ("import sys\nfrom kvreplay.cli.main import main\n"
             f"code = main(['lint', '--format', 'concise', {str(example)!r}])\n"
             "print(code, 'kvreplay.rule_docs' in sys.modules, "
             "'kvreplay.formats.sarif' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split()[-3:] == ["0", "False", "False"]


def test_doc_entries_are_frozen_and_complete() -> None:
    """Every entry has a non-empty title, description, area and fix."""
    for doc in DOCS.values():
        assert isinstance(doc, RuleDoc)
        assert doc.title and doc.description and doc.area and doc.fix, doc.id
