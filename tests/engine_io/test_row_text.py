"""Rows printed straight from the record (`row_text`) are the rows `per_request_row` +
`canonical_json` print, byte for byte, for every shape and every value a record can hold; a value
the fast path cannot print goes through the reference printer, which prints it or raises its
usual error."""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kvreplay.engine import row_text as printer
from kvreplay.engine.records import Admission, RequestRecord, RoutingDecision
from kvreplay.engine.report import ReportError, per_request_row
from kvreplay.engine.row_text import ROW_INDENT, mapping_text, row_text

# Floats whose text is easy to get wrong: exponents, the shortest repr, signed zero, big values.
_TRICKY = st.sampled_from([0.0, -0.0, 1e-07, 1e16, 1.5e300, 5e-324, 0.1, 2.5, 3539594.0,
                           123456789012345680.0])
finite = _TRICKY | st.floats(allow_nan=False, allow_infinity=False)
number = finite | st.integers(min_value=-(2**70), max_value=2**70)
text = st.text() | st.sampled_from(["", "agg", "a\u2028b", "quote\" back\\slash", "\x00\x1f",
                                    "\ud800 lone", "é\U0001f600"])
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
    text = row_text(record)
    assert text == mapping_text(per_request_row(record))
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

    expected = mapping_text(per_request_row(record))
    with mock.patch.object(printer, "per_request_row", refuse):
        assert row_text(record) == expected


def test_a_non_finite_number_is_refused_naming_the_request() -> None:
    """NaN in a row: the ReportError the report always raised, with the request's uuid."""
    r = RequestRecord(ordinal=4, request_id="r", arrival_time_ms=0.0, input_length=1,
                      requested_output_length=1)
    r.terminal_status, r.terminal_time_ms, r.first_admit_ms = "completed", 3.0, float("nan")
    with pytest.raises(ReportError, match=r"00000000-0000-0000-0000-000000000005.*not JSON"):
        row_text(r)
