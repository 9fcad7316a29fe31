"""`kvreplay run` at the edges of time and text: a clean refusal (exit 1 or 2), never an
internal error, and no report when the replay cannot be trusted."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kvreplay.engine.simtime import HORIZON_MS, ClockOverflow, limit_to_ns, ms_to_ns

REPO = Path(__file__).resolve().parents[2]
CONFIG = str(REPO / "examples" / "g2-restore-mooncake.yaml")
G2 = "engine.workers.aggregated.kv_cache.host_offload"
SYNTHETIC_POISSON = ("traffic={source: {type: synthetic}, load: {type: poisson, "
                     "requests_per_second: 1e-300}, stop: {requests: 3}}")


@pytest.mark.parametrize("override", [
    "traffic.load.speedup=1e-300",
    "traffic.load.speedup=1e-200",  # finite, yet every arrival would collapse onto one float
    "engine.workers.aggregated.timing.speedup_ratio=1e-300",
    f"{G2}.d2h_bandwidth_gbps=1e-300",
    f"{G2}.h2d_bandwidth_gbps=5e-324",
    SYNTHETIC_POISSON,
])
def test_time_past_the_horizon_fails_the_replay(cli: Callable[..., Any], tmp_path: Path,
                                                override: str) -> None:
    """Exit 1 with one line naming the horizon; no report is written."""
    report = tmp_path / "report.json"
    ran = cli("run", CONFIG, "-q", "--set", override, "-o", str(report))
    assert ran.code == 1 and "internal error" not in ran.err
    assert "replay failed: simulated time would reach" in ran.err and "2**62 ns" in ran.err
    assert not report.exists()


@pytest.mark.parametrize("last_ms", ["999999999999999", "1e15", "4700000000000"])
def test_a_trace_spanning_past_the_horizon_fails_the_replay(cli: Callable[..., Any],
                                                            tmp_path: Path,
                                                            last_ms: str) -> None:
    """Arrivals 1e15 ms apart (the reader's bound) exit 1 naming the horizon, never an
    internal error from the engine's 64-bit token gaps (found by the Mooncake row fuzz)."""
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 4, "output_length": 2, "hash_ids": [1]}\n'
                     f'{{"timestamp": {last_ms}, "input_length": 4, "output_length": 2, '
                     '"hash_ids": [1]}\n', encoding="utf-8")
    report = tmp_path / "report.json"
    ran = cli("run", CONFIG, "-q", "--trace", str(trace), "-o", str(report))
    assert ran.code == 1 and "internal error" not in ran.err, ran.err
    assert "simulated time would reach" in ran.err and "2**62 ns" in ran.err
    assert not report.exists()


def test_a_trace_spanning_a_century_runs(cli: Callable[..., Any], tmp_path: Path) -> None:
    """Arrivals 100 years apart stay inside the horizon: a report, the last arrival exact."""
    trace = tmp_path / "trace.jsonl"
    last = 100 * 365 * 86_400_000
    trace.write_text('{"timestamp": 0, "input_length": 4, "output_length": 2, "hash_ids": [1]}\n'
                     f'{{"timestamp": {last}, "input_length": 4, "output_length": 2, '
                     '"hash_ids": [1]}\n', encoding="utf-8")
    report = tmp_path / "report.json"
    ran = cli("run", CONFIG, "-q", "--trace", str(trace), "-o", str(report))
    assert ran.code == 0, ran.err
    rows = json.loads(report.read_text("utf-8"))["per_request"]
    assert [r["arrival_time_ms"] for r in rows] == [0.0, float(last)]


def test_limits_past_the_horizon_are_never_reached(cli: Callable[..., Any],
                                                   tmp_path: Path) -> None:
    """A time cap of 1e15 seconds is no failure: the run ends long before it."""
    ran = cli("run", CONFIG, "-q", "--set", "traffic.stop.max_virtual_time_seconds=1e15",
              "-o", str(tmp_path / "report.json"))
    assert ran.code == 0, ran.err


def test_the_clock_conversions_refuse_non_finite_and_huge_times() -> None:
    """ms_to_ns raises the engine's own error (the CLI maps it to exit 1); limits saturate."""
    for ms in (float("inf"), float("nan"), HORIZON_MS * 2, -HORIZON_MS * 2):
        with pytest.raises(ClockOverflow):
            ms_to_ns(ms)
    assert ms_to_ns(HORIZON_MS) == limit_to_ns(1e300)


def test_a_surrogate_id_refuses_the_run_and_writes_no_report(cli: Callable[..., Any],
                                                             tmp_path: Path) -> None:
    """A lone surrogate in a request_id is TRACE-VALUE at its row: exit 2, no report."""
    row = '{{"timestamp": {t}, "output_length": 1, "hash_ids": [1], "request_id": "{rid}"}}\n'
    trace = tmp_path / "t.jsonl"
    trace.write_text(row.format(t=0, rid="ok") + row.format(t=1, rid="\\ud800"))
    report = tmp_path / "report.json"
    ran = cli("run", CONFIG, "--trace", str(trace), "-o", str(report))
    assert ran.code == 2 and f"{trace}:2:" in ran.err and "TRACE-VALUE" in ran.err
    assert not report.exists()


def test_billions_of_gpu_blocks_with_private_g2_run(cli: Callable[..., Any],
                                                     tmp_path: Path) -> None:
    """A schema-valid capacity of 3e9 blocks is no MemoryError: free capacity is implicit."""
    ran = cli("run", CONFIG, "-q", "--set",
              "engine.workers.aggregated.kv_cache.capacity.blocks=3175008305",
              "-o", str(tmp_path / "report.json"))
    assert ran.code == 0, ran.err
