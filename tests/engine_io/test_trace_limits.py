"""Mooncake row values at the edges: integers past a float and lone surrogates are located
TRACE-VALUE findings before the run, never a crash in it or in writing its report."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_io_support import trace_traffic, write_trace

from kvreplay.engine.traces import check_traffic

HEAD = '{"output_length": 1, "hash_ids": [1], '
BIG = "1" + "0" * 400


@pytest.mark.parametrize(("fields", "value", "path", "message"), [
    ('"timestamp": ' + BIG, BIG, "$.timestamp", "`timestamp` must be a finite number in "
     "-1e+15..1e+15, found 1000000000000000...00000000 (401 characters)"),
    ('"timestamp": -' + "9" * 4000, "-" + "9" * 4000, "$.timestamp", "`timestamp` must be a "
     "finite number in -1e+15..1e+15, found -999999999999999...99999999 (4,001 characters)"),
    ('"timestamp": 0, "session_id": "s", "delay": ' + BIG, BIG, "$.delay",
     "`delay` must be a finite number in 0..1e+15, found 1000000000000000...00000000 "
     "(401 characters)"),
    ('"timestamp": 0, "session_id": "a\\ud800b"', '"a\\ud800b"', "$.session_id",
     "`session_id` holds a lone UTF-16 surrogate (\\ud800), which is not valid text"),
    ('"timestamp": 0, "request_id": "\\udfff"', '"\\udfff"', "$.request_id",
     "`request_id` holds a lone UTF-16 surrogate (\\udfff), which is not valid text"),
    ('"timestamp": 0, "policy_class": "\\udc80"', '"\\udc80"', "$.policy_class",
     "`policy_class` holds a lone UTF-16 surrogate (\\udc80), which is not valid text"),
])
def test_out_of_range_and_invalid_text_are_located(tmp_path: Path, fields: str, value: str,
                                                   path: str, message: str) -> None:
    """The value's line, columns and JSON path, with a short message (long numbers abridged)."""
    row = HEAD + fields + "}"
    trace = write_trace(tmp_path / "t.jsonl", ['{"timestamp": 0, "output_length": 1, '
                                               '"hash_ids": [1], "session_id": "s"}', row])
    (found,) = check_traffic(trace_traffic(trace), base_dir=".")
    column = row.rindex(value) + 1
    assert (found.rule, found.line, found.column, found.end_column, found.path, found.message) \
        == ("TRACE-VALUE", 2, column, column + len(value), path, message)


def test_a_number_past_the_integer_text_limit_is_located(tmp_path: Path) -> None:
    """5,000 digits (past Python's int-string conversion limit): TRACE-JSON at the number,
    saying what is wrong without Python's own advice about sys.set_int_max_str_digits."""
    row = '{"timestamp": 0, "output_length": 1, "hash_ids": [1], "input_length": ' \
        + "9" * 5000 + "}"
    trace = write_trace(tmp_path / "t.jsonl", [row])
    (found,) = check_traffic(trace_traffic(trace), base_dir=".")
    assert (found.rule, found.line, found.column, found.message) == (
        "TRACE-JSON", 1, row.index("9999") + 1,
        "a number of 5,000 digits is beyond any value a trace field can hold")
