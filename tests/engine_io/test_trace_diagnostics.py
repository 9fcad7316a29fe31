"""Malformed traces and traffic sections: every row is checked before the run, and each problem is
one pinned diagnostic (rule, line, column, field path, message); nothing raises a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from engine_io_support import trace_traffic, traffic, write_trace
from hypothesis import given, settings
from hypothesis import strategies as st

from kvreplay.engine.traces import WorkloadError, check_traffic, workload_from_traffic
from kvreplay.engine.traces.mooncake_scan import MAX_LISTED_ERRORS
from kvreplay.schema.diagnostics import Diagnostic

OK = '{"timestamp": 0, "output_length": 1, "hash_ids": [1]}'

# name: (rows, [(rule, line, column, end_column, path, message)])
CASES: dict[str, tuple[list[Any], list[tuple[Any, ...]]]] = {
    "syntax": (['{"timestamp": 0, "hash_ids": [1'], [
        ("TRACE-JSON", 1, 32, None, None, "invalid JSON: Expecting ',' delimiter")]),
    "not an object": (["[1, 2]"], [
        ("TRACE-JSON", 1, 1, None, None, "expected a JSON object, found array")]),
    "NaN literal": (['{"timestamp": NaN, "output_length": 1, "hash_ids": [1]}'], [
        ("TRACE-JSON", 1, 15, None, None,
         "invalid JSON: `NaN` is not a JSON number (NaN and Infinity are not allowed)")]),
    "overflowing number": (['{"timestamp": 1e400, "output_length": 1, "hash_ids": [1]}'], [
        ("TRACE-VALUE", 1, 15, 20, "$.timestamp",
         "`timestamp` must be a finite number in -1e+15..1e+15, found 1e400")]),
    "duplicate key": (['{"output_length": 1, "hash_ids": [1], "output_length": 2}'], [
        ("TRACE-JSON", 1, 39, None, None, "invalid JSON: duplicate key `output_length`")]),
    "string length": (['{"timestamp": 0, "input_length": "8", "output_length": 1, '
                       '"hash_ids": [1, 2]}'], [
        ("TRACE-FIELD", 1, 34, 37, "$.input_length",
         '`input_length` must be an integer, found string "8"')]),
    "float length": (['{"timestamp": 0, "input_length": 8.0, "output_length": 1, '
                      '"hash_ids": [1, 2]}'], [
        ("TRACE-FIELD", 1, 34, 37, "$.input_length",
         "`input_length` must be an integer, found number 8.0")]),
    "boolean length": (['{"timestamp": 0, "output_length": true, "hash_ids": [1]}'], [
        ("TRACE-FIELD", 1, 35, 39, "$.output_length",
         "`output_length` must be an integer, found boolean true")]),
    "negative length": (['{"timestamp": 0, "output_length": -3, "hash_ids": [1]}'], [
        ("TRACE-VALUE", 1, 35, 37, "$.output_length",
         "`output_length` must be an integer in 0..10000000, found -3")]),
    "huge length": (['{"timestamp": 0, "input_length": 1000000000000, "output_length": 1, '
                     '"hash_ids": [1]}'], [
        ("TRACE-VALUE", 1, 34, 47, "$.input_length",
         "`input_length` must be an integer in 1..10000000, found 1000000000000")]),
    "missing output_length": (['{"timestamp": 0, "hash_ids": [1]}'], [
        ("TRACE-MISSING", 1, 1, None, "$", "required field `output_length` is missing")]),
    "missing hash_ids": (['{"timestamp": 0, "output_length": 1}'], [
        ("TRACE-MISSING", 1, 1, None, "$", "required field `hash_ids` is missing")]),
    "empty hash_ids": (['{"timestamp": 0, "output_length": 1, "hash_ids": []}'], [
        ("TRACE-VALUE", 1, 50, 52, "$.hash_ids",
         "`hash_ids` must hold at least one hash id, found an empty array")]),
    "negative hash id": (['{"timestamp": 0, "output_length": 1, "hash_ids": [1, -2, 3]}'], [
        ("TRACE-VALUE", 1, 54, 56, "$.hash_ids[1]",
         "`hash_ids[1]` must be in 0..18446744073709551615, found -2")]),
    "hash id beyond u64": (['{"timestamp": 0, "output_length": 1, '
                            '"hash_ids": [18446744073709551616]}'], [
        ("TRACE-VALUE", 1, 51, 71, "$.hash_ids[0]",
         "`hash_ids[0]` must be in 0..18446744073709551615, found 18446744073709551616")]),
    "string hash id": (['{"timestamp": 0, "output_length": 1, "hash_ids": [1, "x"]}'], [
        ("TRACE-FIELD", 1, 54, 57, "$.hash_ids[1]",
         '`hash_ids[1]` must be an integer (hash ids), found string "x"')]),
    "input beyond hash capacity": (['{"timestamp": 0, "input_length": 9, "output_length": 1, '
                                    '"hash_ids": [1, 2]}'], [
        ("TRACE-CAPACITY", 1, 34, 35, "$.input_length",
         "`input_length` 9 exceeds the 8 tokens that 2 hash id(s) cover at trace_block_size 4")]),
    "non-UTF-8 bytes": ([b'{"timestamp": 0, "output_length": 1, "hash_ids": [1], '
                         b'"session_id": "\xc3\x28"}'], [
        ("TRACE-ENCODING", 1, 70, None, None, "invalid UTF-8 byte(s) c3")]),
    "byte-order mark": ([b"\xef\xbb\xbf" + OK.encode()], [
        ("TRACE-ENCODING", 1, 1, None, None, "the file starts with a UTF-8 byte-order mark")]),
    "delay on a first turn": (['{"timestamp": 0, "output_length": 1, "hash_ids": [1], '
                               '"session_id": "s", "delay": 5}'], [
        ("TRACE-SESSION", 1, 83, 84, "$.delay",
         "`delay` must be 0 (or absent) on the first turn of session 's', found 5")]),
    "negative delay": ([
        '{"timestamp": 0, "output_length": 1, "hash_ids": [1], "session_id": "s"}',
        '{"timestamp": 1, "output_length": 1, "hash_ids": [1], "session_id": "s", "delay": -1}'], [
        ("TRACE-VALUE", 2, 83, 85, "$.delay",
         "`delay` must be a finite number in 0..1e+15, found -1")]),
    "session going back in time": ([
        '{"timestamp": 100, "output_length": 1, "hash_ids": [1], "session_id": "s"}',
        '{"timestamp": 50, "output_length": 1, "hash_ids": [1], "session_id": "s"}'], [
        ("TRACE-ORDER", 2, 15, 17, "$.timestamp",
         "`timestamp` 50 is earlier than the previous turn's 100 in session 's' (gap -50 ms)")]),
    "first turn without timestamp": (['{"output_length": 1, "hash_ids": [1]}'], [
        ("TRACE-MISSING", 1, 1, None, "$", "required field `timestamp` is missing: the first "
         "turn of a session needs one with trace_timestamps load")]),
    "gap not inferable": ([
        '{"output_length": 1, "hash_ids": [1], "session_id": "s", "timestamp": null}',
        '{"timestamp": 50, "output_length": 1, "hash_ids": [1], "session_id": "s"}'], [
        ("TRACE-MISSING", 1, 1, None, "$", "required field `timestamp` is missing: the first "
         "turn of a session needs one with trace_timestamps load"),
        ("TRACE-ORDER", 2, 15, 17, "$.timestamp", "cannot infer the gap before this turn of "
         "session 's': no earlier turn of the session has a `timestamp`")]),
    "output_token_ids length": (['{"timestamp": 0, "output_length": 2, "hash_ids": [1], '
                                 '"output_token_ids": [5]}'], [
        ("TRACE-VALUE", 1, 75, 78, "$.output_token_ids",
         "`output_token_ids` must hold output_length = 2 token ids, found 1")]),
    "only blank lines": (["", "   ", "\t"], [
        ("TRACE-EMPTY", None, None, None, None, "the trace holds no request (no non-blank line)")]),
    "every problem of a row": (['{"timestamp": "x", "input_length": -1, "output_length": 1.5, '
                                '"hash_ids": [1], "session_id": 3}'], [
        ("TRACE-FIELD", 1, 15, 18, "$.timestamp", '`timestamp` must be a number, found string "x"'),
        ("TRACE-VALUE", 1, 36, 38, "$.input_length",
         "`input_length` must be an integer in 1..10000000, found -1"),
        ("TRACE-FIELD", 1, 57, 60, "$.output_length",
         "`output_length` must be an integer, found number 1.5"),
        ("TRACE-FIELD", 1, 93, 94, "$.session_id",
         "`session_id` must be a string, found integer 3")]),
    "later row": ([OK, "", OK, "{oops}"], [
        ("TRACE-JSON", 4, 2, None, None,
         "invalid JSON: Expecting property name enclosed in double quotes")]),
}


def _project(found: list[Diagnostic]) -> list[tuple[Any, ...]]:
    return [(d.rule, d.line, d.column, d.end_column, d.path, d.message) for d in found]


@pytest.mark.parametrize("name", list(CASES))
def test_malformed_rows_give_pinned_diagnostics(name: str, tmp_path: Path) -> None:
    """Each malformed-row category yields exactly its diagnostics, located in the file."""
    rows, expected = CASES[name]
    path = write_trace(tmp_path / "bad.jsonl", rows)
    found = check_traffic(trace_traffic(path), base_dir=".")
    assert _project(found) == expected
    assert all(d.file == str(path) for d in found)
    with pytest.raises(WorkloadError) as refused:
        workload_from_traffic(trace_traffic(path), base_dir=".")
    assert refused.value.diagnostics == found


def test_session_order_error_points_at_the_previous_turn(tmp_path: Path) -> None:
    """A backwards session timestamp relates to the previous turn's line."""
    path = write_trace(tmp_path / "t.jsonl", list(CASES["session going back in time"][0]))
    (found,) = check_traffic(trace_traffic(path), base_dir=".")
    assert [(r.message, r.span.line) for r in found.related] == [
        ("previous turn of this session", 1)]


def test_concurrency_load_accepts_rows_without_timestamps(tmp_path: Path) -> None:
    """Timestamps are only required for trace_timestamps load."""
    path = write_trace(tmp_path / "t.jsonl", ['{"output_length": 1, "hash_ids": [1]}'])
    assert check_traffic(trace_traffic(path, load="concurrency", concurrency=2), base_dir=".") == []


def test_unknown_fields_warn_once_and_do_not_refuse(tmp_path: Path) -> None:
    """A field the reader ignores is one warning (first line only); the workload still builds."""
    row = '{"timestamp": 0, "output_length": 1, "hash_ids": [1], "text": "hi"}'
    path = write_trace(tmp_path / "t.jsonl", [row, row])
    workload = workload_from_traffic(trace_traffic(path), base_dir=".")
    assert [(d.rule, d.severity, d.line, d.column, d.path) for d in workload.diagnostics] == [
        ("TRACE-UNKNOWN-FIELD", "warning", 1, 63, "$.text")]


def test_blank_lines_and_crlf_are_fine(tmp_path: Path) -> None:
    """Blank lines are skipped and CRLF line ends parse."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\r\n" + OK.encode() + b"\r\n\r\n" + OK.encode() + b"\r\n")
    assert check_traffic(trace_traffic(path), base_dir=".") == []


def test_errors_beyond_the_listing_cap_are_counted(tmp_path: Path) -> None:
    """Every row is checked; past the cap one TRACE-TRUNCATED note counts the rest."""
    path = write_trace(tmp_path / "t.jsonl", ["{"] * (MAX_LISTED_ERRORS + 25))
    found = check_traffic(trace_traffic(path), base_dir=".")
    assert sum(d.rule == "TRACE-JSON" for d in found) == MAX_LISTED_ERRORS
    (note,) = [d for d in found if d.rule == "TRACE-TRUNCATED"]
    assert (note.severity, note.message) == (
        "note", "25 more error(s) in this trace are not listed")


def test_missing_file_and_directory(tmp_path: Path) -> None:
    """A missing path or a directory is TRACE-PATH, naming the path."""
    missing = check_traffic(trace_traffic(tmp_path / "nope.jsonl"), base_dir=".")
    folder = check_traffic(trace_traffic(tmp_path), base_dir=".")
    assert _project(missing) == [("TRACE-PATH", None, None, None, None,
                                  f"trace file not found: {tmp_path / 'nope.jsonl'}")]
    assert _project(folder) == [("TRACE-PATH", None, None, None, None,
                                 f"trace path is not a regular file: {tmp_path} "
                                 "(it is a directory)")]


def test_trace_paths_resolve_against_base_dir_unless_given(tmp_path: Path) -> None:
    """Spec paths are relative to base_dir; an explicit trace_paths list is used as given."""
    write_trace(tmp_path / "t.jsonl", [OK])
    section = trace_traffic("t.jsonl")
    assert check_traffic(section, base_dir=str(tmp_path)) == []
    assert [d.rule for d in check_traffic(section, base_dir=".")] == ["TRACE-PATH"]
    assert check_traffic(section, base_dir=".", trace_paths=[str(tmp_path / "t.jsonl")]) == []


TRAFFIC_CASES: dict[str, tuple[dict[str, Any], list[tuple[str, str, str]]]] = {
    "unknown source": (traffic(source_type="replay"), [
        ("WORKLOAD-SOURCE", "$.traffic.source_type",
         "`source_type` must be trace, synthetic or synthetic-session, found 'replay'")]),
    "unknown format": (traffic(source_type="trace", trace_format="sharegpt",
                               trace_paths=["a.json"], load_type="trace_timestamps"), [
        ("TRACE-FORMAT", "$.traffic.trace_format", "trace format 'sharegpt' is not read by the "
         "bundled workload readers (they read mooncake, mooncake-delta, weka, "
         "agentic_mooncake, dynamo, applied_compute_agentic)")]),
    "agentic with concurrency": (traffic(source_type="trace", trace_format="weka",
                                         trace_paths=["a.json"], load_type="concurrency"), [
        ("WORKLOAD-LOAD", "$.traffic.load_type", "agentic traces replay their own dependency "
         "timing: load_type must be trace_timestamps, found 'concurrency'")]),
    "two paths": (traffic(source_type="trace", trace_format="mooncake", trace_block_size=4,
                          trace_paths=["a", "b"], load_type="trace_timestamps"), [
        ("TRACE-PATH", "$.traffic.trace_paths",
         "mooncake traffic needs exactly one trace path, found 2")]),
    "poisson trace": (traffic(source_type="trace", trace_format="mooncake", trace_paths=["a"],
                              trace_block_size=4, load_type="poisson"), [
        ("WORKLOAD-LOAD", "$.traffic.load_type",
         "trace traffic needs load_type trace_timestamps or concurrency, found 'poisson'")]),
    "no trace block size": (traffic(source_type="trace", trace_format="mooncake",
                                    trace_paths=["a"], load_type="trace_timestamps"), [
        ("WORKLOAD-VALUE", "$.traffic.trace_block_size",
         "`trace_block_size` is required for mooncake traces (tokens per hash id)")]),
    "no stop": (traffic(source_type="synthetic", input_tokens=8, output_tokens=2,
                        load_type="concurrency", concurrency=2), [
        ("WORKLOAD-STOP", "$.traffic.stop_requests",
         "`stop_requests` is required for synthetic traffic")]),
    "no rate": (traffic(source_type="synthetic", input_tokens=8, output_tokens=2,
                        load_type="poisson", stop_requests=3), [
        ("WORKLOAD-LOAD", "$.traffic.request_rate",
         "`request_rate` is required with poisson load")]),
    "zero rate": (traffic(source_type="synthetic", input_tokens=8, output_tokens=2,
                          load_type="constant_rate", request_rate=0.0, stop_requests=3), [
        ("WORKLOAD-VALUE", "$.traffic.request_rate",
         "`request_rate` must be a finite number in (0, 1e+09], found 0.0")]),
    "prefix beyond prompt": (traffic(source_type="synthetic", input_tokens=8, output_tokens=2,
                                     cached_prefix_tokens=9, load_type="concurrency",
                                     concurrency=1, stop_requests=3), [
        ("WORKLOAD-VALUE", "$.traffic.cached_prefix_tokens",
         "`cached_prefix_tokens` 9 exceeds input_tokens 8")]),
    "ratio without groups": (traffic(source_type="synthetic-session", input_tokens=8,
                                     output_tokens=2, turns_per_session=2,
                                     shared_prefix_ratio=0.5, num_prefix_groups=0,
                                     load_type="concurrency", concurrency=1, stop_sessions=2), [
        ("WORKLOAD-VALUE", "$.traffic.num_prefix_groups",
         "`num_prefix_groups` must be positive when shared_prefix_ratio is positive")]),
    "trace load for synthetic": (traffic(source_type="synthetic", input_tokens=8,
                                         output_tokens=2, load_type="trace_timestamps",
                                         stop_requests=3), [
        ("WORKLOAD-LOAD", "$.traffic.load_type", "synthetic traffic needs load_type concurrency, "
         "constant_rate or poisson, found 'trace_timestamps'")]),
}


@pytest.mark.parametrize("name", list(TRAFFIC_CASES))
def test_invalid_traffic_sections_are_refused(name: str) -> None:
    """Traffic-level problems are WORKLOAD-*/TRACE-* errors located by JSON path."""
    section, expected = TRAFFIC_CASES[name]
    found = check_traffic(section, base_dir=".", source_file="spec.json")
    assert [(d.rule, d.path, d.message) for d in found] == expected
    assert all(d.file == "spec.json" and d.severity == "error" for d in found)


def test_ignored_keys_warn(tmp_path: Path) -> None:
    """speedup with concurrency load is a WORKLOAD-IGNORED warning, not an error."""
    path = write_trace(tmp_path / "t.jsonl", [OK])
    found = check_traffic(trace_traffic(path, load="concurrency", concurrency=1, speedup=2.0),
                          base_dir=".")
    assert [(d.rule, d.severity, d.path) for d in found] == [
        ("WORKLOAD-IGNORED", "warning", "$.traffic.speedup")]


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=4),
    max_leaves=12)
_rows = st.dictionaries(
    st.sampled_from(["timestamp", "input_length", "output_length", "hash_ids", "session_id",
                     "delay", "request_id", "output_token_ids", "priority", "x"]),
    _json_values, max_size=8)


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(st.one_of(st.binary(max_size=40), _rows.map(
    lambda row: json.dumps(row, allow_nan=True).encode())), min_size=1, max_size=5))
def test_arbitrary_lines_never_raise(lines: list[bytes], tmp_path_factory: Any) -> None:
    """Whatever the bytes, checking returns diagnostics (or none) and never raises."""
    path = tmp_path_factory.mktemp("fuzz") / "t.jsonl"
    path.write_bytes(b"\n".join(line.replace(b"\n", b" ") for line in lines) + b"\n")
    found = check_traffic(trace_traffic(path), base_dir=".")
    assert all(isinstance(d, Diagnostic) for d in found)
