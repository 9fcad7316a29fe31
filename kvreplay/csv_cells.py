"""CSV that a spreadsheet opens safely: RFC 4180 quoting and OWASP formula neutralization.

Both CSV outputs (`run --export rows.csv` and a sweep's `results.csv`) write their rows here.
Text comes from traces and sweep files, so a cell may hold anything:

- quoting (RFC 4180, section 2.6-2.7): a text cell holding `"`, `,`, CR or LF is enclosed in
  double quotes, its `"` doubled, so a `request_id` with a CR stays in its row; `;` and tab are
  quoted too, for readers that split on them;
- formulas (OWASP, "CSV Injection"): a text cell that begins with `=`, `+`, `-`, `@`, tab, CR or
  NUL would be evaluated by a spreadsheet (`=HYPERLINK(...)`); it gets a leading `'`, which
  spreadsheets take as "this is text", and is quoted. Numbers are written as numbers: `-1.5` is
  a value, not a formula.

Lines end with LF (as before; RFC 4180 readers, Python's csv and spreadsheets accept it).
Exact text round trips go through the JSONL or Parquet outputs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

Cell = str | int | float | None

FORMULA_START = frozenset("=+-@\t\r\0")
_QUOTED = re.compile(r'[",;\t\r\n]')


def cell(value: Cell) -> str:
    """One field: empty for None, a number as Python prints it, text quoted and neutralized."""
    if value is None:
        return ""
    if not isinstance(value, str):
        return str(value)
    if value and value[0] in FORMULA_START:
        return '"\'' + value.replace('"', '""') + '"'
    if _QUOTED.search(value):
        return '"' + value.replace('"', '""') + '"'
    return value


def line(cells: Iterable[Cell]) -> str:
    """One record: the fields joined by commas, ending with LF (a lone empty field is `""`, or
    the record would read as a blank line)."""
    text = ",".join(map(cell, cells))
    return (text or '""') + "\n"
