"""Shared test fixtures: repository paths, the vendored Mooncake trace slices, and the reference
engine switch."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

# The reference engine logs every request at INFO unless told otherwise.
os.environ.setdefault("DYN_LOG", "error")

REPO = Path(__file__).resolve().parent.parent
# Leading rows of the Mooncake FAST'25 traces (Apache-2.0), see tests/cases/mooncake/README.md.
MOONCAKE = REPO / "tests" / "cases" / "mooncake"


def unpack_slice(name: str, factory: pytest.TempPathFactory) -> Path:
    """The vendored slice `name` (.jsonl.gz) as a plain JSONL file, for readers that take paths."""
    path = factory.mktemp("mooncake") / f"{name}.jsonl"
    with gzip.open(MOONCAKE / f"{name}.jsonl.gz", "rb") as packed, path.open("wb") as plain:
        shutil.copyfileobj(packed, plain)
    return path


@pytest.fixture(scope="session")
def conversation_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first 2,000 rows of the Mooncake conversation trace."""
    return unpack_slice("conversation_trace-head2000", tmp_path_factory)


@pytest.fixture(scope="session")
def synthetic_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first 1,000 rows of the Mooncake synthetic trace."""
    return unpack_slice("synthetic_trace-head1000", tmp_path_factory)


class JsonSnapshot(SingleFileSnapshotExtension):
    """Snapshots stored as exact .json text (compiled specs, canonical reports)."""

    _write_mode = WriteMode.TEXT
    file_extension = "json"


@pytest.fixture
def json_snapshot(snapshot):  # type: ignore[no-untyped-def]
    return snapshot.use_extension(JsonSnapshot)


@pytest.fixture(scope="session")
def conversation_2000(conversation_trace: Path) -> tuple[list[dict[str, Any]], Path]:
    """The first 2,000 rows of the conversation trace, parsed and as a JSONL file."""
    with conversation_trace.open() as f:
        rows = [json.loads(line) for line in f]
    assert len(rows) == 2000
    return rows, conversation_trace
