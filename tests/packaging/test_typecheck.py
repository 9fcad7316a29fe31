"""The library type-checks under mypy --strict (house rule: full type hints, checked in CI)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_mypy_strict_is_clean() -> None:
    """tools/typecheck.py (mypy --strict over the installed package layout) reports no error."""
    pytest.importorskip("mypy")
    done = subprocess.run([sys.executable, str(REPO / "tools" / "typecheck.py")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:]
