"""kvreplay.csv_cells: any text survives a CSV reader as one field of one record, formulas
behind a `'`."""

from __future__ import annotations

import csv

from hypothesis import given, settings
from hypothesis import strategies as st

from kvreplay.csv_cells import FORMULA_START, cell, line


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.one_of(st.none(), st.text(), st.integers(), st.floats(allow_nan=False,
                                                                         allow_infinity=False)),
                min_size=1, max_size=6))
def test_a_record_reads_back_field_for_field(cells: list[str | int | float | None]) -> None:
    """One record whatever the text holds (CR, LF, quotes, commas); text back as it was, or with
    a `'` before a formula's first character; numbers and nulls as Python prints them."""
    (record,) = list(csv.reader([line(cells)]))
    expected = ["" if c is None else str(c) if not isinstance(c, str) else
                "'" + c if c[:1] in FORMULA_START else c for c in cells]
    assert record == expected


def test_numbers_are_not_formulas() -> None:
    """`-1.5` the number is written bare; `-1.5` the text is neutralized and quoted."""
    assert (cell(-1.5), cell("-1.5"), cell(-3)) == ("-1.5", "\"'-1.5\"", "-3")
