"""Mooncake and mooncake-delta replay semantics (release times, sessions, prompts, stop limits).

Expected times marked "reference" were read from the reference engine on the same rows
(fixed timing, prefill 10 ms, decode 2 ms: a lone request with n output tokens ends
10 + 2 (n - 1) ms after release, which is also the toy loop's latency here).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from engine_io_support import drive, trace_traffic, write_trace

from kvreplay.engine.traces import MooncakeWorkload, TraceRequest, workload_from_traffic
from kvreplay.engine.traces.values import GENERATED_OUTPUT_BASE, OUTPUT_TOKEN_BASE


def _row(ts: float | None, out: int, hashes: list[int], **extra: object) -> dict[str, object]:
    row: dict[str, object] = {"output_length": out, "hash_ids": hashes, **extra}
    if ts is not None:
        row["timestamp"] = ts
    return row


def _load(path: Path, **keys: Any) -> MooncakeWorkload:
    workload = workload_from_traffic(trace_traffic(path, **keys), base_dir=".")
    assert isinstance(workload, MooncakeWorkload)
    return workload


@pytest.fixture
def session_trace(tmp_path: Path) -> Path:
    """Session A (two turns, 500 ms apart in the trace) around two single-turn rows."""
    return write_trace(tmp_path / "t.jsonl", [
        _row(1000, 3, [1, 2], session_id="A"),
        _row(1000, 2, [5]),
        _row(1500, 2, [1, 3], session_id="A"),
        _row(1200, 1, [7, 8], input_length=6),
    ])


def test_single_turn_rows_release_at_normalized_timestamps(tmp_path: Path) -> None:
    """The earliest timestamp becomes 0 ms; equal times keep file order; no session ids."""
    path = write_trace(tmp_path / "t.jsonl", [_row(1000, 1, [1]), _row(1000, 1, [2]),
                                             _row(1200, 1, [3]), _row(1500, 1, [4])])
    done = drive(_load(path))
    assert [(d.ordinal, d.release_ms, d.session_id, d.turn_index) for d in done] == [
        (0, 0.0, None, None), (1, 0.0, None, None), (2, 200.0, None, None),
        (3, 500.0, None, None)]


def test_speedup_divides_recorded_gaps(tmp_path: Path) -> None:
    """speedup 2 halves every gap from the earliest timestamp."""
    path = write_trace(tmp_path / "t.jsonl", [_row(1000, 1, [1]), _row(1200, 1, [3]),
                                             _row(1500, 1, [4])])
    assert [d.release_ms for d in drive(_load(path, speedup=2.0))] == [0.0, 100.0, 250.0]


def test_next_turn_follows_previous_completion_plus_recorded_gap(session_trace: Path) -> None:
    """Reference: A's second turn arrives at 514 = A's first turn ending at 14 + 500."""
    done = drive(_load(session_trace))
    assert [(d.session_id, d.turn_index, d.release_ms, d.terminal_ms) for d in done] == [
        ("A", 0, 0.0, 14.0), ("request_2", 0, 0.0, 12.0), ("request_4", 0, 200.0, 210.0),
        ("A", 1, 514.0, 526.0)]


def test_speedup_divides_turn_gaps_too(session_trace: Path) -> None:
    """With speedup 2 the 500 ms turn gap becomes 250 ms after the first turn ends."""
    done = drive(_load(session_trace, speedup=2.0))
    assert [(d.session_id, d.release_ms) for d in done][-1] == ("A", 14.0 + 250.0)


def test_explicit_delay_overrides_the_timestamp_gap(tmp_path: Path) -> None:
    """Reference: a second turn with delay 7 arrives 7 ms after the first ends (12 + 7 = 19)."""
    path = write_trace(tmp_path / "t.jsonl", [_row(100, 2, [1, 2], session_id="s"),
                                             _row(5000, 2, [1, 2], session_id="s", delay=7)])
    assert [d.release_ms for d in drive(_load(path))] == [0.0, 19.0]


def test_equal_release_times_go_by_session_order(tmp_path: Path) -> None:
    """A follow-up and a first turn due together are released in first-appearance order."""
    later = write_trace(tmp_path / "later.jsonl", [
        _row(0, 1, [1], session_id="A"), _row(90, 1, [2], session_id="A"), _row(100, 1, [3])])
    earlier = write_trace(tmp_path / "earlier.jsonl", [
        _row(100, 1, [3]), _row(0, 1, [1], session_id="A"), _row(90, 1, [2], session_id="A")])
    assert [(d.ordinal, d.release_ms) for d in drive(_load(later))] == [
        (0, 0.0), (1, 100.0), (2, 100.0)]
    assert [(d.ordinal, d.release_ms) for d in drive(_load(earlier))] == [
        (1, 0.0), (0, 100.0), (2, 100.0)]


def test_decreasing_timestamps_are_replayed_in_time_order(tmp_path: Path) -> None:
    """Rows out of time order are released by time, ties by file order (the reference's heap)."""
    path = write_trace(tmp_path / "t.jsonl", [_row(300, 1, [1]), _row(100, 1, [2]),
                                             _row(200, 1, [3]), _row(100, 1, [4])])
    workload = _load(path)
    assert workload._index.first_order is not None
    assert [(d.ordinal, d.release_ms) for d in drive(workload)] == [
        (1, 0.0), (3, 0.0), (2, 100.0), (0, 200.0)]


def test_prompt_runs_cover_input_length_in_trace_blocks(tmp_path: Path) -> None:
    """input_length defaults to len(hash_ids) * block; the prompt is cut at input_length."""
    path = write_trace(tmp_path / "t.jsonl", [_row(0, 1, [7, 9]),
                                             _row(0, 1, [7, 9], input_length=6)])
    done = drive(_load(path, block_size=4))
    assert [(d.input_length, d.prompt) for d in done] == [
        (8, ((7, 4), (9, 4))), (6, ((7, 4), (9, 2)))]


def test_concurrency_runs_sessions_depth_first(session_trace: Path) -> None:
    """Reference: with one slot, A's second turn (514) runs before the next sessions (526, 538)."""
    done = drive(_load(session_trace, load="concurrency", concurrency=1))
    assert [(d.session_id, d.turn_index, d.release_ms) for d in done] == [
        ("A", 0, 0.0), ("A", 1, 514.0), ("request_2", 0, 526.0), ("request_4", 0, 538.0)]


def test_concurrency_reports_session_ids_for_single_turn_rows(tmp_path: Path) -> None:
    """Reference: closed-loop rows are sessions `request_<line>` (blank lines count as lines)."""
    path = write_trace(tmp_path / "t.jsonl", [_row(1000, 3, [1, 2]), "", _row(1000, 2, [5]),
                                             _row(1200, 1, [7, 8])])
    done = drive(_load(path, load="concurrency", concurrency=2))
    assert [(d.session_id, d.turn_index, d.release_ms) for d in done] == [
        ("request_1", 0, 0.0), ("request_3", 0, 0.0), ("request_4", 0, 12.0)]


def test_concurrency_needs_no_timestamps(tmp_path: Path) -> None:
    """Closed-loop replay accepts rows without timestamps."""
    path = write_trace(tmp_path / "t.jsonl", [_row(None, 1, [1]), _row(None, 1, [2])])
    assert [d.release_ms for d in drive(_load(path, load="concurrency", concurrency=1))] == [
        0.0, 10.0]


def test_stop_requests_keeps_the_first_rows(session_trace: Path) -> None:
    """stop_requests 2 replays the first two rows: A's first turn and request_2 only."""
    workload = _load(session_trace, stop_requests=2)
    assert workload.total_requests == 2
    done = drive(workload)
    assert [(d.ordinal, d.session_id) for d in done] == [(0, None), (1, None)]


def test_stop_sessions_keeps_the_first_sessions(session_trace: Path) -> None:
    """stop_sessions 1 replays every turn of the first session only."""
    done = drive(_load(session_trace, stop_sessions=1))
    assert [(d.ordinal, d.session_id, d.turn_index) for d in done] == [(0, "A", 0), (2, "A", 1)]


def test_request_id_and_ordinals(tmp_path: Path) -> None:
    """A row's ordinal is its line number - 1; request_id is the row's, or empty."""
    path = write_trace(tmp_path / "t.jsonl", ["", _row(0, 1, [1], request_id="r-x"), "  ",
                                             _row(5, 1, [2])])
    assert [(d.ordinal, d.request_id) for d in drive(_load(path))] == [(1, "r-x"), (3, "")]


@pytest.fixture
def delta_trace(tmp_path: Path) -> Path:
    return write_trace(tmp_path / "d.jsonl", [
        _row(0, 4, [1, 2], session_id="s"),
        _row(100, 2, [3], session_id="s"),
        _row(150, 2, [9], session_id="s", input_length=3),
        _row(10, 1, [1]),
    ])


def test_delta_prompt_accumulates_turns_and_outputs(delta_trace: Path) -> None:
    """Reference input lengths 8, 16 (8 + 4 output + 4), 21 (16 + 2 output + 3)."""
    done = [d for d in drive(_load(delta_trace, fmt="mooncake-delta")) if d.session_id == "s"]
    assert [d.input_length for d in done] == [8, 16, 21]
    first, second, third = (d.prompt for d in done)
    assert first == ((1, 4), (2, 4))
    assert second == (*first, (GENERATED_OUTPUT_BASE + 0, 4), (3, 4))
    assert third == (*second, (GENERATED_OUTPUT_BASE + 1, 2), (9, 3))


def test_full_prompt_mooncake_does_not_accumulate(delta_trace: Path) -> None:
    """Reference: plain mooncake replays each turn's own prompt (lengths 8, 4, 3)."""
    done = [d for d in drive(_load(delta_trace)) if d.session_id == "s"]
    assert [d.input_length for d in done] == [8, 4, 3]


def test_delta_uses_explicit_output_token_ids(tmp_path: Path) -> None:
    """Planned output ids become the next turn's tokens, equal neighbours merged into runs."""
    path = write_trace(tmp_path / "d.jsonl", [
        _row(0, 3, [1], session_id="s", output_token_ids=[5, 5, 6]),
        _row(10, 1, [2], session_id="s")])
    done = drive(_load(path, fmt="mooncake-delta"))
    assert done[1].prompt == ((1, 4), (OUTPUT_TOKEN_BASE + 5, 2), (OUTPUT_TOKEN_BASE + 6, 1),
                              (2, 4))


def test_delta_appends_only_produced_output(delta_trace: Path) -> None:
    """A turn that produced 1 of its 4 tokens adds 1 output token to the next prompt."""
    def outcome(request: TraceRequest) -> tuple[str, int | None]:
        return ("completed", 1) if request.ordinal == 0 else ("completed", None)

    done = drive(_load(delta_trace, fmt="mooncake-delta"), outcome=outcome)
    assert [d.input_length for d in done if d.session_id == "s"] == [8, 13, 18]


def test_rejected_turn_continues_the_session_without_output(delta_trace: Path) -> None:
    """A rejected turn still releases the next turn; its output is not appended."""
    def outcome(request: TraceRequest) -> tuple[str, int | None]:
        return ("rejected", 0) if request.ordinal == 0 else ("completed", None)

    done = drive(_load(delta_trace, fmt="mooncake-delta"), outcome=outcome)
    assert [d.input_length for d in done if d.session_id == "s"] == [8, 12, 17]


def test_canceled_turn_ends_its_session(delta_trace: Path) -> None:
    """After a canceled turn the session's later rows are never released."""
    def outcome(request: TraceRequest) -> tuple[str, int | None]:
        return ("canceled", 0) if request.ordinal == 0 else ("completed", None)

    done = drive(_load(delta_trace, fmt="mooncake-delta"), outcome=outcome)
    assert [d.ordinal for d in done] == [0, 3]


def test_on_terminal_refuses_an_unreleased_request(session_trace: Path) -> None:
    """Reporting the end of a request the workload never released is an error."""
    workload = _load(session_trace)
    stranger = TraceRequest(99, "", 0.0, 1, 1, ((1, 1),))
    with pytest.raises(ValueError, match="not released"):
        workload.on_terminal(stranger, 0.0)
