"""Divergences the differential tester found, kept with the reference's figures.

Each case in `cases/` holds a scenario and the reference engine's per-request figures and
summary for it (recorded with ai-dynamo 1.6.1); kvreplay must reproduce them exactly, with or
without the reference installed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import harness
import pytest

CASES = sorted((Path(__file__).parent / "cases").glob("*.json"))


def load(path: Path) -> dict[str, Any]:
    case: dict[str, Any] = json.loads(path.read_text())
    return case


def test_there_are_regression_cases() -> None:
    """The folder holds the divergences fixed so far (at least three)."""
    assert len(CASES) >= 3


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_kvreplay_reproduces_the_reference(path: Path) -> None:
    """kvreplay's figures equal the recorded reference figures, request by request."""
    case = load(path)
    mine = harness.run_kvreplay(case["scenario"])
    assert harness.compare(case["reference"], mine) == [], case["why"]
