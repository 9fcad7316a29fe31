"""Sweep fixtures: the 2,000-row Mooncake slice, a smaller cut of it for the failure tests, a
12-point sweep file over an inline base config, and one local Ray instance per session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kvreplay.compiler.documents import load_text
from kvreplay.sweep.model import SweepPlan
from kvreplay.sweep.plan import plan_sweep

DATA = Path(__file__).resolve().parents[1] / "data" / "sweep"
SLICE = DATA / "mooncake-conversation-2000.jsonl"

# 3 x 2 x 2 grid points, then one the support matrix refuses (G2-BACKEND).
SWEEP = """\
kind: sweep
base:
  engine:
    model: meta-llama/Llama-3.1-8B-Instruct
    workers:
      aggregated:
        kv_cache: {{block_size: 512, capacity: {{type: fixed, blocks: 1000}}}}
        timing: {{type: fixed, prefill_ms: 20, decode_ms: 5}}
  traffic:
    source: {{type: trace, format: mooncake, block_size: 512, paths: [unused.jsonl]}}
    load: {{type: trace_timestamps}}
traces: [{trace}]
grid:
  engine.workers.aggregated.parallelism.replicas: [1, 2, 4]
  engine.workers.aggregated.kv_cache.capacity.blocks: [200, 1000]
  router.policy: [round_robin, kv_router]
points:
  - engine.backend: sglang
    engine.workers.aggregated.kv_cache.host_offload: {{num_host_blocks: 4000}}
sla:
  p90_ttft_ms: {{max: 200}}
"""


def write_sweep(folder: Path, trace: Path, text: str = SWEEP) -> Path:
    """A sweep file in `folder` over `trace` (written relative to it)."""
    path = folder / "sweep.yaml"
    path.write_text(text.format(trace=os.path.relpath(trace, folder)), encoding="utf-8")
    return path


def plan_of(path: Path) -> SweepPlan:
    from kvreplay.api import matrix_rules

    kind, loaded = load_text(path.read_text(encoding="utf-8"), str(path))
    assert kind == "yaml"
    return plan_sweep(loaded, rules=matrix_rules())


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

        ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.ERROR,
                 log_to_driver=False)
    yield ray
    ray.shutdown()


def run_cli(*args: str) -> int:
    """`kvreplay ARGS...` in this process (output goes to pytest's capture)."""
    from kvreplay.cli.main import main

    return main(list(args))


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


OUTPUTS = ("results.csv", "results.jsonl", "results.parquet", "best.json")


def same_outputs(a: Path, b: Path) -> None:
    """Two results folders hold the same bytes: tables, best point and every report."""
    for name in OUTPUTS:
        if (a / name).exists() or (b / name).exists():
            assert (a / name).read_bytes() == (b / name).read_bytes(), name
    reports_a = sorted(p.name for p in (a / "reports").iterdir())
    assert reports_a == sorted(p.name for p in (b / "reports").iterdir())
    for name in reports_a:
        assert (a / "reports" / name).read_bytes() == (b / "reports" / name).read_bytes(), name
