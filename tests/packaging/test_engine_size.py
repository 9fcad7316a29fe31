"""The engine's functions stay small enough to read (issue 23's bounds): none over 60 lines,
none over cyclomatic complexity 25 (radon's measure)."""

from __future__ import annotations

import ast
from pathlib import Path

from radon.complexity import cc_visit

ENGINE = Path(__file__).resolve().parents[2] / "engine"
MAX_LINES = 60
MAX_COMPLEXITY = 25


def _sources() -> list[Path]:
    return sorted(ENGINE.rglob("*.py"))


def test_no_engine_function_is_longer_than_60_lines() -> None:
    """Every function and method of engine/ spans at most 60 lines, decorators aside."""
    long = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_LINES:
                    long.append(f"{path.relative_to(ENGINE)}:{node.lineno} {node.name} ({lines})")
    assert not long, long


def test_no_engine_function_is_more_complex_than_25() -> None:
    """Every function and method of engine/ has a cyclomatic complexity of at most 25."""
    tangled = []
    for path in _sources():
        for block in cc_visit(path.read_text(encoding="utf-8")):
            for item in [block, *getattr(block, "methods", [])]:
                if item.complexity > MAX_COMPLEXITY:
                    tangled.append(f"{path.relative_to(ENGINE)}:{item.lineno} {item.fullname} "
                                   f"({item.complexity})")
    assert not tangled, tangled
