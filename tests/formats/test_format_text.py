"""The `text` reporter: header, code frame, hint, related notes, summary, colour only on request."""

from __future__ import annotations

import re
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st
from syrupy.assertion import SnapshotAssertion

from kvreplay.formats import FileResult
from kvreplay.formats.text import LEAD_CELLS, MAX_LINE_CELLS, TAB_WIDTH, render_text
from kvreplay.schema.diagnostics import Diagnostic, Related, Severity, Span


def _one(source: str | None, diagnostic: Diagnostic, path: str = "f.yaml") -> list[str]:
    return render_text([FileResult(path, source, (diagnostic,))]).splitlines()


def _carets(rows: list[str], marker: str = "^") -> tuple[int, int]:
    """(first underlined cell after the gutter, underline length) of the first marker row."""
    row = next(r for r in rows if r.lstrip(" ").startswith("|") and marker in r)
    body = row.split("| ", 1)[1]
    return len(body) - len(body.lstrip(" ")), body.count(marker)


def test_snapshot_plain(results: tuple[FileResult, ...], snapshot: SnapshotAssertion) -> None:
    """The plain rendering of the representative results is pinned."""
    assert render_text(results) == snapshot


def test_snapshot_color(results: tuple[FileResult, ...], snapshot: SnapshotAssertion) -> None:
    """The coloured rendering is pinned, and only differs from the plain one by ANSI SGR codes."""
    colored = render_text(results, color=True)
    assert colored.replace("\x1b", "\\e") == snapshot  # the snapshot file stays plain text
    assert re.sub(r"\x1b\[[0-9;]*m", "", colored) == render_text(results)


def test_no_escape_codes_without_color(results: tuple[FileResult, ...]) -> None:
    """Without colour the output holds no ESC byte, even when source and message hold one."""
    diagnostic = Diagnostic("X", "error", "bad \x1b[31mvalue", Span("f.yaml", None, 1, 4, 1, 9))
    text = render_text([*results, FileResult("f.yaml", "a: \x1b[31mx\n", (diagnostic,))])
    assert "\x1b" not in text
    assert "bad \\x1b[31mvalue" in text
    assert " 1 | a: \\x1b[31mx" in text


def test_escaped_source_keeps_the_underline_under_the_span() -> None:
    """An ESC (and a bidi override) before the span print as `\\x1b` / `\\u202e`, as wide as
    they show: the underline still starts under the span's first character."""
    source = "a: \x1b[31m\u202ex: bad\n"
    d = Diagnostic("R", "error", "m", Span("f.yaml", "$.a", 1, 13, 1, 16))
    rows = _one(source, d)
    assert rows[1] == " 1 | a: \\x1b[31m\\u202ex: bad"
    assert _carets(rows) == (rows[1].index("bad") - len(" 1 | "), 3)


def test_header_frame_hint_order() -> None:
    """Header, numbered context and span lines, the underline, then the hint, in that order."""
    source = "a: 1\nb: 22\nc: 3\n"
    rows = _one(
        source, Diagnostic("R", "error", "msg", Span("f.yaml", "$.b", 2, 4, 2, 6), hint="h")
    )
    assert rows == [
        "f.yaml:2:4: error R msg",
        " 1 | a: 1",
        " 2 | b: 22",
        "   |    ^^",
        " 3 | c: 3",
        "  hint: h",
        "",
        "1 error, 0 warnings in 1 file",
    ]


def test_tabs_expand_and_underline_follows() -> None:
    """A tab expands to the next tab stop and the underline sits under the expanded text."""
    source = "k:\tvalue\n"
    rows = _one(source, Diagnostic("R", "error", "m", Span("f.yaml", None, 1, 4, 1, 9)))
    assert rows[1] == " 1 | k:" + " " * (TAB_WIDTH - 2) + "value"
    assert _carets(rows) == (TAB_WIDTH, len("value"))


def test_wide_and_combining_characters_align() -> None:
    """Wide (East Asian) characters take two cells, combining marks none."""
    wide = "日本"
    source = f"k: {wide}e\u0301x\n"
    assert all(unicodedata.east_asian_width(c) == "W" for c in wide)
    start = source.index("x") + 1
    rows = _one(source, Diagnostic("R", "error", "m", Span("f.yaml", None, 1, 4, 1, start + 1)))
    lead, length = _carets(rows)
    assert lead == len("k: ")
    assert length == 2 * len(wide) + 1 + 0 + 1  # 日本, e, the combining acute, x


def test_multi_line_span_underlines_each_line_from_its_indent() -> None:
    """Each line of a multi-line span is underlined from its first non-blank character."""
    source = "a:\n  b: 1\n  c: 2\nd: 3\n"
    span = Span("f.yaml", "$.a", 2, 3, 4, 1)  # a block mapping ends where the next key starts
    rows = _one(source, Diagnostic("R", "error", "m", span))
    assert rows[1:7] == [
        " 1 | a:",
        " 2 |   b: 1",
        "   |   ^^^^",
        " 3 |   c: 2",
        "   |   ^^^^",
        " 4 | d: 3",
    ]


def test_long_span_is_elided() -> None:
    """A span over many lines shows its first and last two lines around an ellipsis."""
    source = "root:\n" + "".join(f"  k{i}: {i}\n" for i in range(1, 21))
    rows = _one(source, Diagnostic("R", "error", "m", Span("f.yaml", "$.root", 2, 3, 22, 1)))
    numbered = [r.split("|")[0].strip() for r in rows if "|" in r]
    assert [n for n in numbered if n] == ["1", "2", "3", "20", "21"]
    assert "    | ..." in rows


def test_a_long_line_is_cut_around_the_span() -> None:
    """A line wider than MAX_LINE_CELLS (a 40,000-character one-line file) shows that many cells:
    from its start when the span starts early in it (cut at the end), else from LEAD_CELLS
    before the span (cut on both sides, or at the start only near its end), each cut marked
    `...`; the underline stays under the span, clipped to what is shown."""
    line = "".join(chr(ord("a") + i % 26) for i in range(40_000))
    for column, cut_start, cut_end in ((5, False, True), (20_001, True, True),
                                       (39_996, True, False)):
        rows = _one(line + "\n", Diagnostic("R", "error", "m",
                                            Span("f.yaml", None, 1, column, 1, column + 3)))
        shown = rows[1].removeprefix(" 1 | ")
        body = shown.removeprefix("..." if cut_start else "").removesuffix(
            "..." if cut_end else "")
        assert shown.startswith("...") == cut_start and shown.endswith("...") == cut_end
        assert len(body) == MAX_LINE_CELLS and body in line
        lead, length = _carets(rows)
        assert shown[lead:lead + length] == line[column - 1:column + 2]
        if cut_start and cut_end:
            assert lead == len("...") + LEAD_CELLS
    long_span = _one(line + "\n", Diagnostic("R", "error", "m", Span("f.yaml", None, 1, 1, 1,
                                                                     40_001)))
    assert _carets(long_span) == (0, MAX_LINE_CELLS)


def test_a_cut_line_keeps_wide_characters_and_escapes_whole() -> None:
    """Cutting a long line never splits a wide character or an escape, and the underline stays
    under the span; a context line is cut around the same column (a shorter one shows its
    end), a short one is kept whole."""
    source = "k: 1\n" + "日本\x1b" * 5000 + "bad" + "x" * 500 + "\n" + "y" * 10_000 + "\n"
    column = 3 * 5000 + 1
    rows = _one(source, Diagnostic("R", "error", "m", Span("f.yaml", None, 2, column, 2,
                                                          column + 3)))
    assert rows[1] == " 1 | k: 1"
    shown = rows[2].removeprefix(" 2 | ")
    assert re.fullmatch(r"\.\.\.(日|本|\\x1b)+bad x+\.\.\.".replace(" ", ""), shown), shown
    lead, length = _carets(rows)
    before = shown[:shown.index("bad")]
    assert length == 3
    assert lead == sum(2 if unicodedata.east_asian_width(c) == "W" else 1 for c in before)
    assert LEAD_CELLS - 4 < lead - len("...") <= LEAD_CELLS
    assert rows[4] == " 3 | ..." + "y" * MAX_LINE_CELLS


def test_position_past_the_end_of_a_line_or_file() -> None:
    """A span at the end of a line or of the file still gets one caret, past the text."""
    source = "a: [1,\n"
    rows = _one(source, Diagnostic("YAML-SYNTAX", "error", "m", Span("f.yaml", "$", 2, 1, 2, 2)))
    assert rows[1:4] == [" 1 | a: [1,", " 2 |", "   | ^"]
    rows = _one(source, Diagnostic("R", "error", "m", Span("f.yaml", None, 1, 7, 1, 7)))
    assert _carets(rows) == (6, 1)


def test_without_position_or_source_there_is_no_frame() -> None:
    """File errors and unreadable files print a header (and hint) only."""
    d = Diagnostic("FILE-UNREADABLE", "error", "cannot read", Span("x.yaml"), hint="check it")
    assert _one(None, d, "x.yaml")[:2] == [
        "x.yaml: error FILE-UNREADABLE cannot read",
        "  hint: check it",
    ]
    d = Diagnostic("R", "warning", "m", Span("x.yaml", None, 99, 1, 99, 2))
    assert _one("a: 1\n", d, "x.yaml")[:2] == ["x.yaml:99:1: warning R m", ""]


def test_path_shown_when_there_is_no_frame() -> None:
    """A finding with a JSON path but no line says where it is with `at PATH`."""
    d = Diagnostic("SCHEMA-REQUIRED", "error", "missing", Span("s.json", "/topology"))
    assert _one("{}\n", d, "s.json")[1] == "  at /topology"


def test_related_note_in_same_and_other_file() -> None:
    """Related spans print as `file:line:col: note: ...`, framed when their source is at hand."""
    source = "a: 1\nb: 2\n"
    d = Diagnostic(
        "R",
        "error",
        "m",
        Span("f.yaml", None, 2, 4, 2, 5),
        related=(
            Related("first", Span(None, None, 1, 4, 1, 5)),
            Related("elsewhere", Span("g.yaml", None, 3, 1, 3, 2)),
        ),
    )
    rows = _one(source, d)
    assert rows[4:] == [
        "f.yaml:1:4: note: first",
        " 1 | a: 1",
        "   |    -",
        "g.yaml:3:1: note: elsewhere",
        "",
        "1 error, 0 warnings in 1 file",
    ]


def test_summary_counts_and_plurals() -> None:
    """The summary counts errors and warnings over every file checked, notes when present."""

    def d(severity: Severity) -> Diagnostic:
        return Diagnostic("R", severity, "m")

    assert render_text([]) == "0 errors, 0 warnings in 0 files\n"
    results = [FileResult("a", None, (d("error"), d("warning"))), FileResult("b", None, ())]
    assert render_text(results).splitlines()[-1] == "1 error, 1 warning in 2 files"
    results = [FileResult("a", None, (d("note"), d("warning"), d("warning")))]
    assert render_text(results).splitlines()[-1] == "0 errors, 2 warnings, 1 note in 1 file"


def test_deterministic(results: tuple[FileResult, ...]) -> None:
    """Rendering the same results twice gives the same text."""
    assert render_text(results, color=True) == render_text(results, color=True)


_positions = st.one_of(st.none(), st.integers(min_value=1, max_value=8))


@settings(max_examples=200, deadline=None)
@given(
    source=st.one_of(st.none(), st.text(max_size=80)),
    message=st.text(max_size=20),
    line=_positions,
    column=_positions,
    end_line=_positions,
    end_column=_positions,
    color=st.booleans(),
)
def test_any_input_renders_safely(
    source: str | None,
    message: str,
    line: int | None,
    column: int | None,
    end_line: int | None,
    end_column: int | None,
    color: bool,
) -> None:
    """Any source and span renders without error, and no raw control character gets out."""
    span = Span("f.yaml", None, line, column, end_line, end_column)
    d = Diagnostic("R", "error", message, span, hint=message)
    text = render_text([FileResult("f.yaml", source, (d,))], color=color)
    allowed = {"\n", "\x1b"} if color else {"\n"}
    # Spaces of any kind (no-break, ideographic) are harmless on a terminal and kept as they are.
    assert all(ch.isprintable() or ch in allowed or unicodedata.category(ch) == "Zs" for ch in text)
