"""The `concise` reporter: exactly one `file:line:col: severity RULE message` line per finding."""

from __future__ import annotations

from syrupy.assertion import SnapshotAssertion

from kvreplay.formats import FileResult
from kvreplay.formats.concise import render_concise
from kvreplay.schema.diagnostics import Diagnostic, Span


def test_snapshot(results: tuple[FileResult, ...], snapshot: SnapshotAssertion) -> None:
    """The concise rendering of the representative results is pinned."""
    assert render_concise(results) == snapshot


def test_one_line_per_finding(results: tuple[FileResult, ...]) -> None:
    """The output has as many lines as findings, in the order given."""
    lines = render_concise(results).splitlines()
    findings = [d for r in results for d in r.diagnostics]
    assert len(lines) == len(findings)
    for line, d in zip(lines, findings, strict=True):
        assert line.endswith(f"{d.severity} {d.rule} {d.message}")


def test_missing_parts_are_left_out() -> None:
    """No column, no line or no file drop their parts and separators cleanly."""
    spans = [
        Span("a.yaml", None, 3, 5),
        Span("a.yaml", None, 3),
        Span("a.yaml"),
        Span(None),
    ]
    results = [FileResult("", None, tuple(Diagnostic("R", "error", "m", s) for s in spans))]
    assert render_concise(results).splitlines() == [
        "a.yaml:3:5: error R m",
        "a.yaml:3: error R m",
        "a.yaml: error R m",
        "error R m",
    ]


def test_file_defaults_to_the_result_path() -> None:
    """A finding without its own file is reported under the checked file's path."""
    result = FileResult("b.yaml", None, (Diagnostic("R", "error", "m", Span(None, "$", 1, 2)),))
    assert render_concise([result]) == "b.yaml:1:2: error R m\n"


def test_newlines_and_controls_stay_on_one_line() -> None:
    """Line breaks and escape sequences in a message or path are shown escaped."""
    d = Diagnostic("R", "error", "two\nlines \x1b[2J", Span("we\nird.yaml", None, 1, 1))
    assert (
        render_concise([FileResult("x", None, (d,))])
        == "we\\nird.yaml:1:1: error R two\\nlines \\x1b[2J\n"
    )


def test_severity_is_shown() -> None:
    """A warning reads as a warning, not as an error (the pre-commit hook's default format)."""
    d = Diagnostic("LINT-UNUSED-SUPPRESSION", "warning", "m", Span("a.yaml", None, 2, 3))
    assert render_concise([FileResult("a.yaml", None, (d,))]) == \
        "a.yaml:2:3: warning LINT-UNUSED-SUPPRESSION m\n"


def test_clean_run_is_empty() -> None:
    """No findings, no output."""
    assert render_concise([FileResult("a.yaml", "a: 1\n", ())]) == ""
