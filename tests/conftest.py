"""Shared test fixtures: repository paths, the shared traces, and the reference engine switch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# The reference engine logs every request at INFO unless told otherwise.
os.environ.setdefault("DYN_LOG", "error")

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
SHARED = REPO.parent / "shared"


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def shared() -> Path:
    """The workplace's ../shared folder (specs, traces); tests that need it skip without it."""
    if not (SHARED / "traces").is_dir():
        pytest.skip("../shared is not available")
    return SHARED


@pytest.fixture(scope="session")
def conversation_trace(shared: Path) -> Path:
    return shared / "traces" / "mooncake" / "conversation_trace.jsonl"


@pytest.fixture(scope="session")
def synthetic_trace(shared: Path) -> Path:
    return shared / "traces" / "mooncake" / "synthetic_trace.jsonl"
