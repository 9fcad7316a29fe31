"""Sweep test helpers: the 2,000-row Mooncake slice, a 12-point sweep file over an inline base
config, running the CLI in this process and comparing results folders."""

from __future__ import annotations

import os
from pathlib import Path

import attrs
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


def run_cli(*args: str) -> int:
    """`kvreplay ARGS...` in this process (output goes to pytest's capture)."""
    from kvreplay.cli.main import main

    return main(list(args))



@attrs.frozen
class Ran:
    code: int
    out: str
    err: str


def invoke(capsys: pytest.CaptureFixture[str], *args: str) -> Ran:
    """`kvreplay ARGS...` in this process, with its exit code and captured output."""
    try:
        code = run_cli(*args)
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code if isinstance(exc.code, int) else 2
    captured = capsys.readouterr()
    return Ran(code, captured.out, captured.err)


OUTPUTS = ("results.csv", "results.jsonl", "results.parquet", "best.json", "sweep.json")


def same_outputs(a: Path, b: Path) -> None:
    """Two results folders hold the same bytes: tables, best point, manifest, every report."""
    for name in OUTPUTS:
        if (a / name).exists() or (b / name).exists():
            assert (a / name).read_bytes() == (b / name).read_bytes(), name
    reports_a = sorted(p.name for p in (a / "reports").iterdir())
    assert reports_a == sorted(p.name for p in (b / "reports").iterdir())
    for name in reports_a:
        assert (a / "reports" / name).read_bytes() == (b / "reports" / name).read_bytes(), name
