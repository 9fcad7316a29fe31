"""Rows printed straight from the record (`row_text`) are the rows `per_request_row` +
`canonical_json` print, byte for byte, for every shape and every value a record can hold; a value
the fast path cannot print goes through the reference printer, which prints it or raises its
usual error."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kvreplay.engine import row_text as printer
from kvreplay.engine.records import Admission, RequestRecord, RoutingDecision
from kvreplay.engine.report import ReportError, per_request_row
from kvreplay.engine.row_text import ROW_INDENT, mapping_text, row_text

# Floats whose text is easy to get wrong: exponents, the shortest repr, signed zero, big values.
_TRICKY = st.sampled_from([0.0, -0.0, 1e-07, 1e16, 1.5e300, 5e-324, 0.1, 2.5, 3539594.0,
                           123456789012345680.0, 9999999999999998.0, -1e15, -7.0, 2.0**53,
                           2.2250738585072014e-308, 1e-5, 1e-4])
finite = _TRICKY | st.floats(allow_nan=False, allow_infinity=False)
number = finite | st.integers(min_value=-(2**70), max_value=2**70) | st.sampled_from(
    [10**16 - 1, -(10**16 - 1), 10**16, 2**63 - 1, 2**63, -(2**63), -1])
text = st.text() | st.sampled_from(["", "agg", "a\u2028b", "quote\" back\\slash", "\x00\x1f",
                                    "\ud800 lone", "é\U0001f600", "del\x7f", "~ !#$%&'()*"])
# What a field holding something else would hold: the reference prints it or raises.
odd = st.sampled_from([True, False, float("nan"), float("inf"), -float("inf"), [1, 2],
                       {"k": 1}, (3,), "7"])
maybe_number = st.none() | number
small = st.integers(min_value=0, max_value=9)


def _admission(draw: st.DrawFn, weird: bool) -> Admission:
    g1 = draw(st.none() | small)
    return Admission(
        admission_ordinal=draw(small), pool=draw(text), pool_admission_ordinal=draw(small),
        at_ms=draw(finite | odd if weird else finite), reused_input_tokens=draw(small),
        g1_reused_input_tokens=g1, host_reused_input_tokens=draw(st.none() | small),
        is_readmission=draw(st.booleans() | odd if weird else st.booleans()))


def _route(draw: st.DrawFn, weird: bool) -> RoutingDecision:
    return RoutingDecision(
        pool=draw(text), logical_worker_id=draw(small), scheduler_id=draw(small),
        dp_rank=draw(small | odd if weird else small), outcome=draw(text),
        queue_entered_at_ms=draw(st.none() | finite), queue_wait_ms=draw(finite),
        reported_overlap_tokens=draw(small), selected_overlap_blocks=draw(st.none() | small),
        best_available_overlap_blocks=draw(st.none() | small))


@st.composite
def records(draw: st.DrawFn, weird: bool = False) -> RequestRecord:
    """A terminal record of any shape; `weird`: some fields hold a value of another type."""
    value = (maybe_number | odd) if weird else maybe_number
    r = RequestRecord(
        ordinal=draw(st.integers(min_value=0, max_value=2**70) | st.sampled_from(
            [0, 2**48 - 2, 2**48 - 1, 2**48])),
        request_id=draw(text), arrival_time_ms=draw(number),
        input_length=draw(small | odd if weird else st.integers(min_value=0, max_value=2**70)),
        requested_output_length=draw(small),
        session_id=draw(st.none() | text), turn_index=draw(st.none() | small))
    r.output_length = draw(st.integers(min_value=0, max_value=4))
    r.first_admit_ms = draw(value)
    r.first_token_ms, r.second_token_ms, r.last_token_ms = (draw(value), draw(maybe_number),
                                                            draw(maybe_number))
    r.terminal_time_ms = draw(number)
    r.terminal_status = draw(st.sampled_from(["completed", "rejected", "canceled"]) | text)
    r.reused_input_tokens = draw(small)
    r.readmission_count = draw(small)
    r.dispatched_at_ms = draw(maybe_number)
    for name in ("prefill_admit_ms", "source_held_ms", "destination_reserved_ms",
                 "destination_activated_ms", "decode_admit_ms", "source_released_ms"):
        setattr(r, name, draw(value))
    r.decode_reused_input_tokens = draw(st.none() | small)
    if draw(st.booleans()):  # a host tier
        r.first_admission_g1_reused_input_tokens = draw(small)
        r.first_admission_host_reused_input_tokens = draw(st.none() | small)
    if draw(st.booleans()):  # agentic
        r.play_id = draw(st.none() | text)
        r.agentic = draw(st.dictionaries(text, text, max_size=3))
        r.agentic_phase = draw(st.none() | st.sampled_from(["warmup", "measure"]))
    if draw(st.booleans()):  # decoded on an MTP rank
        r.speculative_steps = draw(small | odd if weird else small)
        r.draft_tokens, r.accepted_draft_tokens = draw(small), draw(small)
    r.admission_history = [_admission(draw, weird)
                           for _ in range(draw(st.integers(min_value=0, max_value=3)))]
    r.routing_history = [_route(draw, weird)
                         for _ in range(draw(st.integers(min_value=0, max_value=3)))]
    return r


def _outcome(print_row: Any) -> tuple[str, str]:
    try:
        return "printed", print_row()
    except Exception as exc:  # the same error, type and message, from both printers
        return type(exc).__name__, str(exc)


@settings(max_examples=400, deadline=None)
@given(records())
def test_a_row_prints_as_the_reference_prints_it(record: RequestRecord) -> None:
    """Any shape (host tier, agentic, warmup phase, 0-3 admissions and routing decisions), any
    number, any string: the reference's text to the byte, and the JSON of the row."""
    try:
        reference = mapping_text(per_request_row(record))
    except ReportError:  # extreme times whose difference overflows to inf: refused by both
        assert _outcome(lambda: row_text(record))[0] == "ReportError"
        return
    text = row_text(record)
    assert text == reference
    expected = json.dumps(per_request_row(record), sort_keys=True, indent=2, ensure_ascii=False)
    assert text == ROW_INDENT + expected.replace("\n", "\n" + ROW_INDENT)


@settings(max_examples=400, deadline=None)
@given(records(weird=True))
def test_a_value_of_another_type_prints_or_fails_as_the_reference(record: RequestRecord) -> None:
    """Booleans, strings or containers where numbers belong, NaN and infinities: the same text,
    or the same error, as the reference printer."""
    assert _outcome(lambda: row_text(record)) == _outcome(
        lambda: mapping_text(per_request_row(record)))


@settings(max_examples=200, deadline=None)
@given(records())
def test_ordinary_rows_take_the_fast_path(record: RequestRecord) -> None:
    """A record of the engine's types never needs the reference printer (else the fast path
    would be a slow path in disguise)."""
    def refuse(_: RequestRecord) -> dict[str, Any]:
        raise AssertionError("the reference printer was used")

    try:
        expected = mapping_text(per_request_row(record))
    except ReportError:  # extreme times whose difference overflows to inf: not an ordinary row
        assume(False)
    with mock.patch.object(printer, "per_request_row", refuse):
        assert row_text(record) == expected
        assert printer.python_row_text(record) == expected


def test_a_non_finite_number_is_refused_naming_the_request() -> None:
    """NaN in a row: the ReportError the report always raised, with the request's uuid."""
    r = RequestRecord(ordinal=4, request_id="r", arrival_time_ms=0.0, input_length=1,
                      requested_output_length=1)
    r.terminal_status, r.terminal_time_ms, r.first_admit_ms = "completed", 3.0, float("nan")
    with pytest.raises(ReportError, match=r"00000000-0000-0000-0000-000000000005.*not JSON"):
        row_text(r)


compiled = pytest.mark.skipif(printer.compiled_row is None,
                              reason="the compiled row printer is not built (no C compiler at "
                                     "install, or KVREPLAY_PURE_PYTHON set)")


@compiled
@settings(max_examples=600, deadline=None)
@given(records() | records(weird=True))
def test_the_compiled_printer_prints_what_python_prints_or_passes(record: RequestRecord) -> None:
    """engine/_rowtext.c either prints a row exactly as the Python printers do, or hands it
    to them (None), for any shape, value and type (an MTP row has no compiled plan: row_text
    never hands it to the compiled printer)."""
    assert printer.compiled_row is not None
    assume(record.speculative_steps is None)
    text = printer.compiled_row(record)
    if text is not None:
        assert printer.python_row_text(record) == text


# What the engine's records hold: exact types, ASCII names, no value beyond the fast printers'
# ranges (ints below 1e16, spans that stay finite, uuids below 2**48).
_plain_text = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_:./ ")
_plain_float = st.floats(min_value=-1e300, max_value=1e300) | _TRICKY
_plain_int = st.integers(min_value=-(10**16 - 1), max_value=10**16 - 1)


@st.composite
def plain_records(draw: st.DrawFn) -> RequestRecord:
    """A record as the engine makes them, of any shape."""
    r = draw(records())
    r.ordinal = draw(st.integers(min_value=0, max_value=2**48 - 2))
    r.request_id, r.terminal_status = draw(_plain_text), draw(_plain_text)
    r.session_id = draw(st.none() | _plain_text)
    r.arrival_time_ms, r.terminal_time_ms = draw(_plain_float), draw(_plain_float)
    r.input_length = draw(_plain_int)
    for name in ("first_token_ms", "second_token_ms", "last_token_ms", "first_admit_ms",
                 "dispatched_at_ms", "prefill_admit_ms", "source_held_ms",
                 "destination_reserved_ms", "destination_activated_ms", "decode_admit_ms",
                 "source_released_ms"):
        setattr(r, name, draw(st.none() | _plain_float))
    if r.first_token_ms is None:  # no second token before the first (ttst is left to Python)
        r.second_token_ms = None
    for entry in r.admission_history:
        entry.at_ms = draw(_plain_float)
    if r.agentic is not None:
        r.play_id = draw(st.none() | _plain_text)
        r.agentic = draw(st.dictionaries(_plain_text, _plain_text, max_size=3))
    for entry in [*r.admission_history, *r.routing_history]:
        entry.pool = draw(_plain_text)
    for decision in r.routing_history:
        decision.outcome = draw(_plain_text)
    r.speculative_steps = None  # MTP rows are printed in Python (no compiled plan)
    return r


@compiled
@settings(max_examples=400, deadline=None)
@given(plain_records())
def test_the_engines_records_take_the_compiled_printer(record: RequestRecord) -> None:
    """Every shape of an ordinary record is printed in C (else the compiled printer would be a
    slow path in disguise), to the reference's bytes."""
    assert printer.compiled_row is not None
    expected = mapping_text(per_request_row(record))
    assert printer.compiled_row(record) == expected


@settings(max_examples=300, deadline=None)
@given(records() | records(weird=True))
def test_the_python_printers_alone_print_the_reference_text(record: RequestRecord) -> None:
    """Without the compiled printer (no C compiler at install, KVREPLAY_PURE_PYTHON=1), a row
    is still the reference's text, or its error."""
    assert _outcome(lambda: printer.python_row_text(record)) == _outcome(
        lambda: mapping_text(per_request_row(record)))


def test_the_compiled_printer_is_built_where_it_must_be() -> None:
    """CI (KVREPLAY_REQUIRE_COMPILED=1 in .ci/run) has a C compiler: the extension is built
    and in use there, so the tests above ran."""
    if not os.environ.get("KVREPLAY_REQUIRE_COMPILED"):
        pytest.skip("KVREPLAY_REQUIRE_COMPILED is not set")
    assert printer.compiled_row is not None


def test_pure_python_is_chosen_by_the_environment() -> None:
    """KVREPLAY_PURE_PYTHON=1 leaves the compiled printer out, and the rows the same."""
    script = ("from kvreplay.engine import row_text; print(row_text.compiled_row is None)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "KVREPLAY_PURE_PYTHON": "1"}, check=True)
    assert done.stdout.strip() == "True"


@compiled
def test_a_malformed_plan_is_refused_and_the_printer_restored() -> None:
    """configure() checks its plans (a bad op, non-ASCII text, a missing name) and says so;
    configured again it prints rows as before."""
    from kvreplay.engine import _rowtext

    record = RequestRecord(ordinal=4, request_id="r", arrival_time_ms=0.0, input_length=1,
                           requested_output_length=1)
    record.terminal_status, record.terminal_time_ms = "completed", 3.0
    good = printer.compiled_plan(printer._ROUTE, frozenset(), "", "")
    bad_op = (((b"{", 99, "pool", None),), b"}")
    not_ascii = (((b"{\xc3\xa9", 0, "pool", None),), b"}")
    no_name = (((b"{", 0, None, None),), b"}")
    layout = (b"[", b",", b"]")
    names = ("agentic", "agentic_phase", "first_admission_g1_reused_input_tokens",
             "g1_reused_input_tokens", "output_length")
    try:
        for plan, error in ((bad_op, ValueError), (not_ascii, ValueError), (no_name, ValueError)):
            with pytest.raises(error):
                _rowtext.configure((good,) * 8, good, good, plan, layout, repr, names)
            with pytest.raises(RuntimeError, match="before configure"):
                _rowtext.row(record)
    finally:
        assert printer._configure_compiled() is not None
    assert row_text(record) == mapping_text(per_request_row(record))


@compiled
@settings(max_examples=20, deadline=None)
@given(plain_records(), st.integers(min_value=20, max_value=60))
def test_a_long_history_prints_past_the_first_buffer(record: RequestRecord, copies: int) -> None:
    """A row of many admissions and routing decisions (past the printer's 8 kB first buffer,
    as a request readmitted again and again makes) prints in C to the reference's bytes."""
    assert printer.compiled_row is not None
    record.admission_history = (record.admission_history or [Admission(
        admission_ordinal=0, pool="agg", pool_admission_ordinal=0, at_ms=1.0,
        reused_input_tokens=0, g1_reused_input_tokens=None, host_reused_input_tokens=None,
        is_readmission=False)]) * copies
    record.routing_history = (record.routing_history or [RoutingDecision(
        pool="agg", logical_worker_id=0, scheduler_id=0, dp_rank=0, outcome="queued",
        queue_entered_at_ms=None, queue_wait_ms=0.0, reported_overlap_tokens=0,
        selected_overlap_blocks=None, best_available_overlap_blocks=None)]) * copies
    text = printer.compiled_row(record)
    assert text is not None and len(text) > 8192
    assert text == mapping_text(per_request_row(record))


def test_every_field_has_a_compiled_op() -> None:
    """Each field of every row shape and history entry is one the compiled printer knows how
    to read (a new derived field must say how, or the plan refuses to build), and the plans'
    fixed text is the Python printers' (ASCII, pieces + tail = the skeleton)."""
    for index in range(8):
        steps, tail = printer.compiled_plan(printer._ROW, printer._shape_flags(index),
                                            ROW_INDENT, ROW_INDENT)
        keys = [piece.decode("ascii").rsplit('"', 2)[-2] for piece, *_ in steps]
        assert keys == sorted(keys) and tail.endswith(b"}")
        assert ("agentic" in keys) == bool(index & 4)
        assert ("first_admission_g1_reused_input_tokens" in keys) == bool(index & 1)
    with pytest.raises(AssertionError, match="cannot print x"):
        printer.compiled_plan((("x", "r.a + 1", "int", None),), frozenset(), "", "")


def test_the_ops_are_numbered_as_the_c_file_numbers_them() -> None:
    """row_text.py names the compiled printer's ops by their place in engine/_rowtext.c's
    enum: the two lists agree."""
    source = (Path(printer.__file__).parent / "_rowtext.c").read_text(encoding="utf-8")
    enum = source[source.index("enum {"):source.index("OP_COUNT_OF_OPS")]
    assert [name.lower() for name in re.findall(r"\bOP_(\w+),", enum)] == list(printer._OPS)


@compiled
@pytest.mark.parametrize("tokens", [-(2**63), -5, 0, 1, 2, 2**53, 2**53 + 1, 2**53 + 2,
                                    2**63 - 1, 2**64])
def test_the_per_token_latency_at_extreme_token_counts(tokens: int) -> None:
    """itl_ms divides by output_length - 1: the compiled printer prints Python's quotient while
    the count is exact as a double, and hands larger ones back (never a different text)."""
    assert printer.compiled_row is not None
    r = RequestRecord(ordinal=3, request_id="r", arrival_time_ms=0.0, input_length=1,
                      requested_output_length=1)
    r.terminal_status, r.terminal_time_ms, r.output_length = "completed", 9.0, tokens
    r.first_token_ms, r.last_token_ms = 1.0, 7.0
    text = printer.compiled_row(r)
    assert (text is not None) == (tokens <= 2**53 + 1)
    assert row_text(r) == printer.python_row_text(r) == mapping_text(per_request_row(r))
