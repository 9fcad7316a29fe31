"""Shared test fixtures: repository paths, the shared traces, and the reference engine switch."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

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


class JsonSnapshot(SingleFileSnapshotExtension):
    """Snapshots stored as exact .json text (compiled specs, canonical reports)."""

    _write_mode = WriteMode.TEXT
    file_extension = "json"


@pytest.fixture
def json_snapshot(snapshot):  # type: ignore[no-untyped-def]
    return snapshot.use_extension(JsonSnapshot)


@pytest.fixture(scope="session")
def conversation_2000(conversation_trace: Path, tmp_path_factory: pytest.TempPathFactory,
                      ) -> tuple[list[dict[str, Any]], Path]:
    """The first 2,000 rows of the conversation trace, parsed and as a JSONL file."""
    rows = []
    with conversation_trace.open() as f:
        for line in f:
            if len(rows) == 2000:
                break
            rows.append(json.loads(line))
    path = tmp_path_factory.mktemp("trace") / "conversation_2000.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return rows, path
