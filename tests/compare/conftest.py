"""Reports to compare: the KV-router example, and the same run with slower decode passes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import kvreplay

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "kv-router-mooncake.yaml"
SLOWER = "engine.workers.aggregated.timing.decode_ms=6"


def _report(*overrides: str) -> dict[str, Any]:
    outcome = kvreplay.run_spec(EXAMPLE, overrides=list(overrides))
    assert outcome.report is not None, outcome
    report = json.loads(json.dumps(outcome.report))  # what a report file holds
    report["meta"]["wall_time_ms"] = 1.0  # the wall clock is the one figure that moves
    return report  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def base_report() -> dict[str, Any]:
    return _report()


@pytest.fixture(scope="session")
def slower_report() -> dict[str, Any]:
    return _report(SLOWER)


