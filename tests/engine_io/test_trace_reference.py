"""Workload timing against the reference engine: driven by the reference's own terminal times, every
request is released exactly when the reference says it arrived, with the same prompt length."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from engine_io_support import drive, trace_traffic, traffic, write_trace

from kvreplay.engine.traces import TraceRequest, workload_from_traffic

pytestmark = pytest.mark.reference

RANK = {"block_size": 4, "num_gpu_blocks": 200, "max_num_seqs": 2, "max_num_batched_tokens": 64,
        "timing_model": {"type": "fixed", "prefill_ms": 10.0, "decode_ms": 2.0}}

ROWS: list[dict[str, Any]] = [
    {"timestamp": 1000, "output_length": 3, "hash_ids": [1, 2], "session_id": "A"},
    {"timestamp": 1000, "output_length": 2, "hash_ids": [5]},
    {"timestamp": 1010, "output_length": 4, "hash_ids": [6, 7], "session_id": "B"},
    {"timestamp": 1500, "output_length": 2, "hash_ids": [1, 3], "session_id": "A"},
    {"timestamp": 1200, "output_length": 1, "hash_ids": [7, 8], "input_length": 6},
    {"timestamp": 1300, "output_length": 5, "hash_ids": [6, 9], "session_id": "B", "delay": 3},
    {"timestamp": 1900, "output_length": 2, "hash_ids": [1, 4], "session_id": "A"},
    {"timestamp": 1005, "output_length": 2, "hash_ids": [11]},
]


def _reference_trace(path: Path, fmt: str, **kwargs: Any) -> list[dict[str, Any]]:
    replay = pytest.importorskip("dynamo.replay")
    report = replay.run_trace_replay([str(path)], extra_engine_args={"engine": RANK},
                                     num_workers=1, trace_format=fmt, trace_block_size=4,
                                     capture_per_request=True, **kwargs)
    return list(report.per_request)


def _compare(section: dict[str, Any], reference: list[dict[str, Any]],
             key: Any = lambda r: (r.session_id, r.turn_index)) -> None:
    by_key = {(p["session_id"], p["turn_index"]): p for p in reference}

    def latency(request: TraceRequest) -> float:
        return float(by_key[key(request)]["terminal_time_ms"]) - request.release_ms

    done = drive(workload_from_traffic(section, base_dir=".", block_size=4), latency=latency)
    mine = sorted((d.session_id, d.turn_index, d.release_ms, d.input_length) for d in done)
    theirs = sorted((p["session_id"], p["turn_index"], p["arrival_time_ms"], p["input_length"])
                    for p in reference)
    assert mine == theirs


@pytest.mark.parametrize("fmt", ["mooncake", "mooncake-delta"])
@pytest.mark.parametrize("speedup", [1.0, 2.5])
def test_trace_timestamps_match_the_reference(tmp_path: Path, fmt: str, speedup: float) -> None:
    """Sessions, explicit delays, ties and speedup: same arrivals and input lengths."""
    path = write_trace(tmp_path / "t.jsonl", ROWS)
    reference = _reference_trace(path, fmt, arrival_speedup_ratio=speedup)
    _compare(trace_traffic(path, fmt=fmt, speedup=speedup), reference)


@pytest.mark.parametrize("fmt", ["mooncake", "mooncake-delta"])
@pytest.mark.parametrize("concurrency", [1, 2])
def test_concurrency_matches_the_reference(tmp_path: Path, fmt: str, concurrency: int) -> None:
    """Closed loop over sessions: same dispatch times and input lengths."""
    path = write_trace(tmp_path / "t.jsonl", ROWS)
    reference = _reference_trace(path, fmt, replay_concurrency=concurrency)
    _compare(trace_traffic(path, fmt=fmt, load="concurrency", concurrency=concurrency),
             reference)


def test_synthetic_poisson_matches_the_reference() -> None:
    """Single synthetic requests at 25 req/s, seed 7: same arrivals (uuid = ordinal + 1)."""
    replay = pytest.importorskip("dynamo.replay")
    report = replay.run_synthetic_trace_replay(
        8, 3, 12, extra_engine_args={"engine": RANK}, num_workers=1, capture_per_request=True,
        request_rate=25.0, arrival_seed=7)
    reference = {int(p["uuid"].replace("-", ""), 16) - 1: p for p in report.per_request}
    section = traffic(source_type="synthetic", input_tokens=8, output_tokens=3,
                      cached_prefix_tokens=0, load_type="poisson", request_rate=25.0,
                      arrival_seed=7, stop_requests=12)
    done = drive(workload_from_traffic(section, base_dir="."), latency=lambda r: float(
        reference[r.ordinal]["terminal_time_ms"]) - r.release_ms)
    assert [(d.ordinal, d.release_ms) for d in sorted(done, key=lambda d: d.ordinal)] == [
        (ordinal, reference[ordinal]["arrival_time_ms"]) for ordinal in sorted(reference)]


@pytest.mark.parametrize("load", [{"request_rate": 40.0}, {"arrival_interval_ms": 30.0},
                                  {"replay_concurrency": 2}], ids=["poisson", "constant", "closed"])
def test_synthetic_session_starts_match_the_reference(load: dict[str, Any]) -> None:
    """Session starts and turn releases match; prompt lengths differ by design (see docs)."""
    replay = pytest.importorskip("dynamo.replay")
    report = replay.run_synthetic_trace_replay(
        8, 3, 5, extra_engine_args={"engine": RANK}, num_workers=1, capture_per_request=True,
        turns_per_session=3, inter_turn_delay_ms=4.0, **load)
    reference = list(report.per_request)
    kind = {"request_rate": "poisson", "arrival_interval_ms": "constant_rate",
            "replay_concurrency": "concurrency"}[next(iter(load))]
    section = traffic(source_type="synthetic-session", input_tokens=8, output_tokens=3,
                      turns_per_session=3, shared_prefix_ratio=0.0, num_prefix_groups=0,
                      inter_turn_delay_ms=4.0, load_type=kind, stop_sessions=5,
                      request_rate={"poisson": 40.0, "constant_rate": 1000.0 / 30.0}.get(kind),
                      concurrency=2 if kind == "concurrency" else None)
    by_key = {(p["session_id"], p["turn_index"]): p for p in reference}
    done = drive(workload_from_traffic(section, base_dir="."), latency=lambda r: float(
        by_key[(r.session_id, r.turn_index)]["terminal_time_ms"]) - r.release_ms)
    mine = sorted((d.session_id, d.turn_index, d.release_ms) for d in done)
    theirs = sorted((p["session_id"], p["turn_index"], p["arrival_time_ms"]) for p in reference)
    assert json.dumps(mine) == json.dumps(theirs)
