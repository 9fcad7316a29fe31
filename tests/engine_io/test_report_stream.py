"""Streamed reports: records leave memory as they end, the written text stays canonical.

The CLI runs with a record sink (`replay(stream=True)`): the summary is accumulated record by
record and rows are spilled to a temporary file. Its report must equal, byte for byte, the one
built from every record at the end (the API's path), for every example.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvreplay
from kvreplay.engine import report_stream
from kvreplay.engine.canonical_json import canonical_json
from kvreplay.engine.report import dumps_report
from kvreplay.engine.report_stream import SpilledRows, report_chunks, write_report
from kvreplay.replay import replay

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))
WALL = ("wall_time_ms", "processed_tokens_per_s", "processed_output_tokens_per_s")


def _without_wall(report: dict[str, Any]) -> dict[str, Any]:
    return {**report, "meta": {k: v for k, v in report["meta"].items() if k not in WALL}}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_streamed_report_equals_the_whole_report(path: Path) -> None:
    """Same summary, rows and meta (wall-clock figures aside) through the sink as at the end."""
    compiled = kvreplay.compile_config(path)
    base = str(path.parent)
    whole = replay(compiled, base_dir=base)
    streamed = replay(compiled, base_dir=base, stream=True)
    assert whole.report is not None and streamed.report is not None
    rows = streamed.report["per_request"]
    assert isinstance(rows, SpilledRows) or (rows == [] and not compiled.spec.record_per_request)
    text = "".join(report_chunks(_without_wall(streamed.report)))
    if isinstance(rows, SpilledRows):
        rows.close()
    assert text == dumps_report(_without_wall(whole.report))


def test_rows_spilled_out_of_order_are_written_in_uuid_order() -> None:
    """Rows reach the spill in terminal order; the report lists them by ordinal."""
    rows = SpilledRows()
    for ordinal in (3, 0, 2, 1):
        rows.add(ordinal, {"uuid": str(ordinal), "value": [ordinal, 0.5]})
    report = {"summary": {"n": 4}, "per_request": rows, "meta": {"k": None}}
    text = "".join(report_chunks(report))
    rows.close()
    expected = {"summary": {"n": 4}, "meta": {"k": None},
                "per_request": [{"uuid": str(i), "value": [i, 0.5]} for i in range(4)]}
    assert text == dumps_report(expected)
    assert json.loads(text) == expected


@settings(max_examples=100, deadline=None)
@given(st.permutations(range(40)),
       st.lists(st.text(st.characters(exclude_categories=[]), max_size=30), min_size=40,
                max_size=40),
       st.sampled_from([1, 4, 64]))
def test_rows_read_back_through_small_windows(order: list[int], labels: list[str],
                                              held: int) -> None:
    """Rows of any length and content (multi-byte characters, lone surrogates) in any order,
    held back, spilled, read back through windows and written in pieces far smaller than they
    are (the file in uuid order, or not when a row comes later than the rows held back): the
    canonical list, in uuid order; rows added after a read land after the others."""
    with mock.patch.multiple(report_stream, _HELD=held, _BATCH=2, _BUFFER=50, _WINDOW=64,
                             _BEHIND=16, _PIECE=100):
        rows = SpilledRows()
        for ordinal in order[:30]:
            rows.add(ordinal, {"uuid": str(ordinal), "label": labels[ordinal]})
        first = [json.loads(text)["uuid"] for text in rows.texts()]
        for ordinal in order[30:]:
            rows.add(ordinal, {"uuid": str(ordinal), "label": labels[ordinal]})
        text = "".join(report_chunks({"per_request": rows}))
        rows.close()
    assert first == [str(o) for o in sorted(order[:30])]
    expected = [{"uuid": str(i), "label": labels[i]} for i in range(40)]
    assert text == dumps_report({"per_request": expected})


def _spilled(labels: list[str]) -> SpilledRows:
    rows = SpilledRows()
    for ordinal in reversed(range(len(labels))):
        rows.add(ordinal, {"uuid": str(ordinal), "label": labels[ordinal]})
    return rows


def test_rows_written_as_bytes_are_the_text_encoded() -> None:
    """`write_report` with a binary writer: the spill file's bytes go out as they are, the
    same bytes as the text encoded in UTF-8."""
    labels = ["plain", "é\u2028\U0001f600", "quote\" back\\", "\x00"]
    report = {"summary": {"n": 4}, "per_request": _spilled(labels)}
    text, data = io.StringIO(), io.BytesIO()
    write_report(report, text)

    class Both:
        def write(self, chunk: str) -> None:
            data.write(chunk.encode("utf-8"))

    shares: list[float] = []
    write_report(report, Both(), data.write, shares.append)
    report["per_request"].close()
    expected = dumps_report({"summary": {"n": 4},
                             "per_request": [{"uuid": str(i), "label": label}
                                             for i, label in enumerate(labels)]})
    assert text.getvalue() == expected
    assert data.getvalue() == expected.encode("utf-8")
    assert shares and shares[-1] == pytest.approx(1.0, abs=0.01)


def test_a_lone_surrogate_is_refused_as_bytes_as_it_is_as_text() -> None:
    """A row holding a lone surrogate (a JSON trace may spell one) cannot be written as UTF-8:
    the binary writer raises what the text file raises."""
    report = {"per_request": _spilled(["ok", "\ud800"])}
    with pytest.raises(UnicodeEncodeError):
        write_report(report, io.TextIOWrapper(io.BytesIO(), encoding="utf-8"))
    with pytest.raises(UnicodeEncodeError):
        write_report(report, io.StringIO(), io.BytesIO().write)
    assert "\ud800" in "".join(report_chunks(report))  # the text itself holds it
    report["per_request"].close()


def test_an_empty_spill_writes_an_empty_list() -> None:
    """No terminal request: `"per_request": []`, as the whole-report writer prints it."""
    rows = SpilledRows()
    text = "".join(report_chunks({"per_request": rows, "summary": {}}))
    rows.close()
    assert text == dumps_report({"per_request": [], "summary": {}})


def test_the_spill_file_has_no_name(tmp_path: Path) -> None:
    """Rows live in an anonymous temporary file: nothing is left in the folder, even if the
    process dies before closing it."""
    rows = SpilledRows(str(tmp_path))
    rows.add(0, {"uuid": "0"})
    assert os.listdir(tmp_path) == []
    rows.close()


def test_cli_report_equals_the_api_report(tmp_path: Path) -> None:
    """`kvreplay run -o` (streamed) writes the report `run_spec` returns (meta wall aside, and
    the provenance only the command line knows)."""
    from kvreplay.cli.main import main

    path = next(p for p in EXAMPLES if p.stem == "g2-restore-mooncake")
    out = tmp_path / "report.json"
    assert main(["run", str(path), "-o", str(out), "--quiet"]) == 0
    written = json.loads(out.read_text(encoding="utf-8"))
    assert written["meta"].pop("provenance")["config"]["path"] == str(path)
    api = kvreplay.run_spec(path).report
    assert api is not None
    assert _without_wall(written) == json.loads(dumps_report(_without_wall(api)))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_the_row_encoder_prints_what_json_dumps_prints(value: Any) -> None:
    """Any JSON value (any float, unicode, surrogates, nesting): the same text as the
    standard encoder with the report's options."""
    expected = json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
    assert canonical_json(value) == expected
    assert canonical_json(value, "    ") == expected.replace("\n", "\n    ")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), [1.0, {"a": -float("inf")}]])
def test_the_row_encoder_refuses_non_finite_numbers(bad: Any) -> None:
    """NaN and infinities are refused, as allow_nan=False does."""
    with pytest.raises(ValueError, match="not JSON compliant"):
        canonical_json(bad)
