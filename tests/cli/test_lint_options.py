"""`lint --statistics`, `--exit-zero`, `--output-file` and rule prefixes."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kvreplay.formats import FileResult
from kvreplay.formats.statistics import count_rules
from kvreplay.schema.diagnostics import Diagnostic

BAD = "engine:\n  model: m\n  backend: vlm\n  workers: {aggregated: {}}\n"
TWO_TYPOS = "engine:\n  modl: m\n  workrs: {}\n"


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "a.yaml").write_text(BAD)
    (tmp_path / "b.yaml").write_text(TWO_TYPOS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_statistics_count_per_rule(cli: Callable[..., Any], folder: Path) -> None:
    """One row per rule, most frequent first, counts that add up to the findings."""
    findings = json.loads(cli("lint", "--format", "json", ".").out)
    rules = [d["rule"] for f in findings["files"] for d in f["diagnostics"]]
    ran = cli("lint", "--statistics", "--format", "concise", ".")
    assert ran.code == 1
    rows = [line.split() for line in ran.out.splitlines()]
    assert sum(int(n) for n, _, _ in rows) == len(rules)
    assert {rule: int(n) for n, rule, _ in rows} == {r: rules.count(r) for r in set(rules)}
    counts = [int(n) for n, _, _ in rows]
    assert counts == sorted(counts, reverse=True)
    as_json = json.loads(cli("lint", "--statistics", "--format", "json", ".").out)
    assert [(r["count"], r["rule"]) for r in as_json] == [(int(n), rule) for n, rule, _ in rows]


def test_statistics_ties_sort_by_rule() -> None:
    """Equal counts are ordered by rule ID, whatever order the findings came in."""
    found = (Diagnostic("B-RULE", "error", "m"), Diagnostic("A-RULE", "warning", "m"),
             Diagnostic("C-RULE", "error", "m"), Diagnostic("C-RULE", "error", "n"))
    assert count_rules([FileResult("x", None, found)]) == [
        ("C-RULE", "error", 2), ("A-RULE", "warning", 1), ("B-RULE", "error", 1)]


def test_exit_zero_keeps_findings_but_not_unreadable(cli: Callable[..., Any],
                                                     folder: Path) -> None:
    """--exit-zero turns exit 1 into 0; a missing file still exits 2."""
    ran = cli("lint", "--exit-zero", "--format", "concise", ".")
    assert ran.code == 0 and "error SCHEMA-ENUM" in ran.out
    assert cli("lint", "--exit-zero", "missing.yaml").code == 2


def test_output_file_is_written_atomically(cli: Callable[..., Any], folder: Path) -> None:
    """--output-file gets the report (not stdout), keeps the file's mode, leaves no temp
    file, and refuses to replace a linted file."""
    report = folder / "report.sarif"
    report.write_text("old")
    os.chmod(report, 0o640)
    ran = cli("lint", "--format", "sarif", "--output-file", str(report), ".")
    assert ran.code == 1 and ran.out == ""
    assert json.loads(report.read_text())["version"] == "2.1.0"
    assert os.stat(report).st_mode & 0o777 == 0o640
    assert not list(folder.glob(".kvreplay-*.tmp"))
    refused = cli("lint", "-o", "a.yaml", "a.yaml")
    assert refused.code == 2 and "refusing to write a.yaml" in refused.err
    assert (folder / "a.yaml").read_text() == BAD


def test_select_by_prefix(cli: Callable[..., Any], folder: Path) -> None:
    """`--select SCHEMA` keeps every SCHEMA-* rule and nothing else; unknown prefixes are
    usage errors."""
    ran = cli("lint", "--format", "json", "--select", "SCHEMA", ".")
    rules = {d["rule"] for f in json.loads(ran.out)["files"] for d in f["diagnostics"]}
    assert rules and all(r.startswith("SCHEMA-") for r in rules)
    bad = cli("lint", "--select", "SCHEM", ".")
    assert bad.code == 2 and "unknown rule ID `SCHEM`" in bad.err
