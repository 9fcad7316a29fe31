"""The invalid-case corpus: each broken file yields pinned diagnostics, never a traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import kvreplay
from kvreplay.cli.main import main

CASES = sorted((Path(__file__).resolve().parents[1] / "cases" / "invalid").iterdir())
IO_CODES = {"FILE-UNREADABLE", "FILE-TOO-LARGE", "FILE-BINARY", "FILE-ENCODING"}


def _pinned(path: Path) -> list[dict[str, Any]]:
    result = kvreplay.compile_config(path)
    return [
        {"rule": d.rule, "severity": d.severity, "line": d.line, "column": d.column,
         "message": d.message, "hint": d.hint}
        for d in result.diagnostics
    ]


def test_corpus_is_large_enough() -> None:
    """At least 25 broken files, covering loader and schema categories."""
    assert len(CASES) >= 25
    prefixes = {p.name.split("-")[0] for p in CASES}
    assert {"yaml", "schema", "file", "native"} <= prefixes


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.name)
def test_case_diagnostics_are_pinned(path: Path, snapshot) -> None:  # type: ignore[no-untyped-def]
    """Rule, position, message and hint of every finding equal the snapshot."""
    found = _pinned(path)
    assert found, "an invalid case must produce at least one finding"
    assert all(d["severity"] in ("error", "warning") for d in found)
    assert found == snapshot


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.name)
def test_case_lint_exit_code(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """lint exits 2 for unreadable input, 1 for findings; stderr never holds a traceback."""
    code = main(["lint", "--format", "concise", str(path)])
    out, err = capsys.readouterr()
    rules = {d["rule"] for d in _pinned(path)}
    assert code == (2 if rules & IO_CODES else 1)
    assert "Traceback" not in err and "internal error" not in err
    assert all(rule in out for rule in rules)
