"""Sweep fixtures: a smaller cut of the slice for the failure tests, the 12-point sweep run
once on local processes (over 2,000 and 300 rows), and one local Ray instance per session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sweep_support import SLICE, run_cli, write_sweep


@pytest.fixture(scope="session")
def small_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first 300 rows of the slice: the failure tests need many short points."""
    lines = SLICE.read_text(encoding="utf-8").splitlines(keepends=True)[:300]
    path = tmp_path_factory.mktemp("small") / "mooncake-300.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    return path


def ray_module() -> Any:
    return pytest.importorskip("ray")


@pytest.fixture(scope="session")
def local_ray() -> Iterator[Any]:
    """`ray.init(num_cpus=2)` once for every Ray test; the sweep reuses the running instance."""
    ray = ray_module()
    if not ray.is_initialized():
        import logging

        ray.init(address="local", num_cpus=2, include_dashboard=False,
                 logging_level=logging.ERROR, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def full_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The 12-point sweep (and its skipped point) over the 2,000-row slice, on 2 local
    processes: (sweep file, results folder)."""
    folder = tmp_path_factory.mktemp("full")
    sweep = write_sweep(folder, SLICE)
    out = folder / "results"
    assert run_cli("sweep", str(sweep), "-o", str(out), "-j", "2", "--no-progress", "-q") == 0
    return sweep, out


@pytest.fixture(scope="session")
def small_run(tmp_path_factory: pytest.TempPathFactory, small_trace: Path) -> tuple[Path, Path]:
    """The same sweep over the 300-row cut, undisturbed: the reference of the failure tests."""
    folder = tmp_path_factory.mktemp("small-run")
    sweep = write_sweep(folder, small_trace)
    out = folder / "results"
    assert run_cli("sweep", str(sweep), "-o", str(out), "-j", "2", "--no-progress", "-q") == 0
    return sweep, out
