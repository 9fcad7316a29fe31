"""A 100,000-row trace is checked and replayed with only a handful of requests alive: the peak
number of live TraceRequest objects and of pending releases stays at those in flight; the
checked rows the check keeps (up to a bound) are not read again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from engine_io_support import trace_traffic

from kvreplay.engine.traces import MooncakeWorkload, TraceRequest, workload_from_traffic
from kvreplay.engine.traces import mooncake_workload as module

ROWS = 100_000


class _Counted(TraceRequest):
    """TraceRequest that counts its live instances."""

    live = 0
    peak = 0
    made = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _Counted.live += 1
        _Counted.made += 1
        _Counted.peak = max(_Counted.peak, _Counted.live)

    def __del__(self) -> None:
        _Counted.live -= 1


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> type[_Counted]:
    _Counted.live = _Counted.peak = _Counted.made = 0
    monkeypatch.setattr(module, "TraceRequest", _Counted)
    return _Counted


def _write(path: Path, rows: int, sessions: bool) -> Path:
    with open(path, "w", encoding="utf-8") as out:
        for i in range(rows):
            row: dict[str, Any] = {"timestamp": i // 4, "output_length": 2, "hash_ids": [i % 5, i]}
            if sessions and i % 10 < 4:
                row["session_id"] = f"s{i // 10}"  # four-turn sessions among single rows
            out.write(json.dumps(row) + "\n")
    return path


def _replay(workload: MooncakeWorkload, latency: float) -> int:
    """Release everything due, end each request `latency` later; returns requests seen."""
    in_flight: list[tuple[float, TraceRequest]] = []
    seen = 0
    while not workload.exhausted():
        release = workload.next_release_ms()
        end = in_flight[0][0] if in_flight else None
        if end is not None and (release is None or end <= release):
            now, request = in_flight.pop(0)
            workload.on_terminal(request, now)
            continue
        assert release is not None
        for request in workload.release(release):
            in_flight.append((release + latency, request))
            seen += 1
        in_flight.sort(key=lambda item: item[0])
    return seen


@pytest.mark.parametrize("sessions", [False, True], ids=["single-turn", "sessions"])
def test_large_trace_streams_with_bounded_live_requests(tmp_path: Path, counted: type[_Counted],
                                                        sessions: bool) -> None:
    """Checking creates no request; replaying keeps only the requests in flight alive."""
    path = _write(tmp_path / "big.jsonl", ROWS, sessions)
    workload = workload_from_traffic(trace_traffic(path, block_size=512), base_dir=".")
    assert isinstance(workload, MooncakeWorkload)
    assert counted.made <= 8  # only the first due rows, read ahead
    assert _replay(workload, latency=0.5) == ROWS
    assert counted.made == ROWS
    assert counted.peak <= 16
    assert workload.peak_pending <= 8
    assert workload.peak_open <= 8


def test_decreasing_timestamps_stream_in_time_order(tmp_path: Path,
                                                    counted: type[_Counted]) -> None:
    """A file sorted backwards is replayed in time order, still without holding its rows."""
    rows = 2_000
    path = tmp_path / "backwards.jsonl"
    path.write_text("".join(json.dumps({"timestamp": rows - i, "output_length": 1,
                                        "hash_ids": [i]}) + "\n" for i in range(rows)))
    workload = workload_from_traffic(trace_traffic(path), base_dir=".")
    assert isinstance(workload, MooncakeWorkload)
    order: list[int] = []
    while not workload.exhausted():
        now = workload.next_release_ms()
        assert now is not None
        for request in workload.release(now):
            order.append(request.ordinal)
            workload.on_terminal(request, now)
    assert order == list(range(rows - 1, -1, -1))
    assert counted.peak <= 4


def _released(path: Path) -> list[tuple[int, float, Any, int]]:
    """Every request of a replay (ordinal, release time, prompt, output), with token_order
    read first as a G2 replay does."""
    workload = workload_from_traffic(trace_traffic(path, block_size=4), base_dir=".")
    assert isinstance(workload, MooncakeWorkload)
    assert len(list(workload.token_order())) == workload.total_requests
    out = []
    while not workload.exhausted():
        now = workload.next_release_ms()
        assert now is not None
        for request in workload.release(now):
            out.append((request.ordinal, request.release_ms, request.prompt,
                        request.output_length))
            workload.on_terminal(request, now + 1.0)
    return out


@pytest.mark.parametrize("budget", [None, 0, 25], ids=["kept", "re-read", "partly-kept"])
def test_rows_the_check_kept_are_not_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                budget: int | None) -> None:
    """The replay takes the rows the check kept (no second decode); past the kept bound it
    re-reads the rest by offset, releasing the same requests either way."""
    from kvreplay.engine.traces import mooncake_scan

    path = _write(tmp_path / "t.jsonl", 40, sessions=True)
    expected = _released(path)
    decoded: list[int] = []
    real = module.decode_object

    def counting(raw: bytes, **kwargs: Any) -> Any:
        decoded.append(1)
        return real(raw, **kwargs)

    monkeypatch.setattr(module, "decode_object", counting)
    if budget is not None:
        monkeypatch.setattr(mooncake_scan, "KEPT_HASH_IDS", budget)
    assert _released(path) == expected
    kept = 40 if budget is None else budget // 3  # each row costs its 2 hash ids + 1
    assert len(decoded) == 2 * (40 - kept)  # token_order and the release, each once a row
