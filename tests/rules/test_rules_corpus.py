"""The case corpus: each rule's (and code's) failing and passing cases, findings snapshot-pinned."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvreplay import suppressions
from kvreplay.catalog import catalog as all_ids
from kvreplay.compiler.documents import compile_text
from kvreplay.rules import catalog, run_rules
from kvreplay.rules.corpus import CASES_DIR, all_cases, cases
from kvreplay.rules.loader import shipped_ruleset

CASES = all_cases()


def case_id(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def findings(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    compiled = compile_text(text, case_id(path), rules=run_rules)
    found = suppressions.apply(compiled.diagnostics, text, case_id(path))  # as lint does
    return [
        {
            "rule": d.rule,
            "severity": d.severity,
            "line": d.line,
            "column": d.column,
            "message": d.message,
            "hint": d.hint,
            "related": [(r.message, r.span.line, r.span.column) for r in d.related],
        }
        for d in found
    ]


def test_corpus_is_present() -> None:
    """The corpus folder exists in the source tree and holds cases."""
    assert CASES_DIR.is_dir() and len(CASES) >= 2 * len(catalog())


@pytest.mark.parametrize("path", CASES, ids=case_id)
def test_case_findings_are_pinned(path: Path, snapshot: Any) -> None:
    """Every diagnostic of a case (ID, severity, line, column, message, hint, related) is pinned."""
    assert findings(path) == snapshot


@pytest.mark.parametrize("path", [p for p in CASES if p.name.startswith("fail-")], ids=case_id)
def test_failing_case_reports_its_rule(path: Path) -> None:
    """A `fail-*` case under RULE-ID/ makes RULE-ID fire."""
    assert path.parent.name in {f["rule"] for f in findings(path)}


@pytest.mark.parametrize("path", [p for p in CASES if p.name.startswith("pass-")], ids=case_id)
def test_passing_case_reports_no_matrix_rule(path: Path) -> None:
    """A `pass-*` case makes no support-matrix rule fire at all (not only its own)."""
    rules = set(catalog())
    assert [f for f in findings(path) if f["rule"] in rules] == []


def test_every_rule_has_a_failing_and_a_passing_case() -> None:
    """Each rule ID has at least one `fail-*` and one `pass-*` case, and every folder is named
    after a catalog ID (a rule or a built-in code)."""
    ids = set(catalog())
    missing = sorted(i for i in ids if not cases(i, "fail") or not cases(i, "pass"))
    assert missing == []
    assert sorted({p.parent.name for p in CASES} - set(all_ids())) == []


def test_accepted_families_name_existing_passing_cases() -> None:
    """Each `accepted` statement names pass cases that exist (and so pass, per the test above)."""
    for accepted in shipped_ruleset().accepted:
        for case in accepted.cases:
            path = CASES_DIR / case
            assert path.is_file(), case
            assert path.name.startswith("pass-"), case
