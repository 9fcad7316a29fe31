"""Reports to compare: the KV-router example, and the same run with slower decode passes."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
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


@pytest.fixture
def report_files(tmp_path: Path, base_report: dict[str, Any],
                 slower_report: dict[str, Any]) -> Callable[..., Path]:
    """Write a report (a copy of base or slower, changed by `edit`) and give its path."""

    def write(name: str, which: str = "base",
              edit: Callable[[dict[str, Any]], None] | None = None) -> Path:
        report = copy.deepcopy(base_report if which == "base" else slower_report)
        if edit is not None:
            edit(report)
        path = tmp_path / name
        path.write_text(json.dumps(report, indent=2, sort_keys=True), encoding="utf-8")
        return path

    return write


@attrs.frozen
class Ran:
    code: int
    out: str
    err: str


@pytest.fixture
def compare_cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Ran]:
    """`kvreplay compare ARGS...` in this process."""
    from kvreplay.cli.main import main

    def run(*args: str | Path) -> Ran:
        try:
            code = main(["compare", *map(str, args)])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
        captured = capsys.readouterr()
        return Ran(code, captured.out, captured.err)

    return run
