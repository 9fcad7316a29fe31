"""The `github` reporter: workflow commands the Actions runner parses back to the same values."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from syrupy.assertion import SnapshotAssertion

from kvreplay.formats import FileResult
from kvreplay.formats.github import annotation, render_github, unprocessed
from kvreplay.formats.paths import root_relative
from kvreplay.io.display import escape_inline
from kvreplay.schema.diagnostics import Diagnostic, Related, Span

_LINE = re.compile(r"^::(?P<command>[a-z]+)(?: (?P<properties>[^:]*))?::(?P<data>.*)$")
# The runner's (actions/runner ActionCommand) escape tables; it unescapes them in this order,
# `%25` last, so an escaped percent is never read as the start of another escape.
_DATA_ESCAPES = (("\r", "%0D"), ("\n", "%0A"), ("%", "%25"))
_PROPERTY_ESCAPES = (("\r", "%0D"), ("\n", "%0A"), (":", "%3A"), (",", "%2C"), ("%", "%25"))


# Any character that UTF-8 can encode (lone surrogates are covered by their own test).
_ENCODABLE = st.characters(codec="utf-8")


def parse_command(line: str) -> tuple[str, dict[str, str], str]:
    """A workflow command line as the runner reads it: (command, properties, message)."""
    match = _LINE.match(line)
    assert match is not None, line
    properties: dict[str, str] = {}
    for pair in (match["properties"] or "").split(","):
        if not pair:
            continue
        key, _, value = pair.partition("=")
        properties[key] = _unescape(value, _PROPERTY_ESCAPES)
    return match["command"], properties, _unescape(match["data"], _DATA_ESCAPES)


def _unescape(text: str, table: tuple[tuple[str, str], ...]) -> str:
    for plain, escaped in table:
        text = text.replace(escaped, plain)
    return text


def _parse_all(text: str) -> list[tuple[str, dict[str, str], str]]:
    return [parse_command(line) for line in text.splitlines()]


def test_snapshot(results: tuple[FileResult, ...], snapshot: SnapshotAssertion) -> None:
    """The workflow commands for the representative results are pinned."""
    assert render_github(results) == snapshot


def test_one_command_per_finding(results: tuple[FileResult, ...]) -> None:
    """Each finding is one line; severities map to error, warning and notice; title is the rule."""
    commands = _parse_all(render_github(results))
    findings = [d for r in results for d in r.diagnostics]
    assert len(commands) == len(findings)
    expected = {"error": "error", "warning": "warning", "note": "notice"}
    for (command, properties, message), d in zip(commands, findings, strict=True):
        assert command == expected[d.severity]
        assert properties["title"] == d.rule
        assert message.split("\n")[0] == d.message


def test_round_trip_awkward_text() -> None:
    """Commas, colons, percent signs and unicode survive in path, title and message; line
    breaks and other control characters in them arrive as visible escapes."""
    path = "dir, with: colons/100% ü日本\r\nx.yaml"
    message = "a,b: c%d %25 %0A\r\nnext ::error file=x::no 🚀\x1b[31m"
    d = Diagnostic("R:1,2%", "error", message, Span(path, None, 3, 5, 3, 9), hint="h: 1,2")
    command, properties, data = parse_command(annotation(d, "unused"))
    assert command == "error"
    assert properties == {
        "file": "dir, with: colons/100% ü日本\\r\\nx.yaml",
        "line": "3",
        "col": "5",
        "endLine": "3",
        "endColumn": "9",
        "title": "R:1,2%",
    }
    assert data == ("a,b: c%d %25 %0A\\r\\nnext ::error file=x::no 🚀\\x1b[31m"
                    "\nhint: h: 1,2")


@settings(max_examples=200, deadline=None)
@given(
    path=st.text(_ENCODABLE, min_size=1, max_size=30),
    rule=st.text(_ENCODABLE, min_size=1, max_size=10),
    message=st.text(_ENCODABLE, max_size=40),
    line=st.integers(min_value=1, max_value=10_000),
    column=st.integers(min_value=1, max_value=500),
)
def test_round_trip_any_text(path: str, rule: str, message: str, line: int, column: int) -> None:
    """Any rule and message parse back as the text format shows them (control characters as
    escapes), and the path as normalised, on a single printable line."""
    d = Diagnostic(rule, "warning", message, Span(path, None, line, column, line, column + 1))
    text = annotation(d, "unused")
    assert text.isprintable()
    assert parse_command(text) == (
        "warning",
        {
            "file": escape_inline(root_relative(path, None)[0]),
            "line": str(line),
            "col": str(column),
            "endLine": str(line),
            "endColumn": str(column + 1),
            "title": escape_inline(rule),
        },
        escape_inline(message),
    )


@pytest.mark.parametrize(
    ("span", "expected"),
    [
        (Span("f", None, 2, 3, 2, 7), {"line": "2", "col": "3", "endLine": "2", "endColumn": "7"}),
        (Span("f", None, 2, 3, 5, 7), {"line": "2", "endLine": "5"}),
        (Span("f", None, 2, 3, 5, 1), {"line": "2", "endLine": "4"}),
        (Span("f", None, 2, 3, 3, 1), {"line": "2", "col": "3", "endLine": "2"}),
        (Span("f", None, 2, 7, 2, 3), {"line": "2", "col": "7", "endLine": "2"}),
        (Span("f", None, 4, 1, 2, 1), {"line": "4", "col": "1"}),
        (Span("f", None, 2, 3), {"line": "2", "col": "3"}),
        (Span("f", None, 2), {"line": "2"}),
        (Span("f"), {}),
    ],
)
def test_positions_the_runner_accepts(span: Span, expected: dict[str, str]) -> None:
    """No columns on multi-line annotations, no endColumn before col, no endLine before line."""
    _, properties, _ = parse_command(annotation(Diagnostic("R", "error", "m", span), "f"))
    assert properties == {"file": "f", **expected, "title": "R"}


def test_hint_and_related_notes_follow_the_message() -> None:
    """The hint and related spans are further lines of the message."""
    d = Diagnostic(
        "R",
        "error",
        "m",
        Span("a.yaml", None, 1, 1),
        hint="do this",
        related=(Related("there", Span(None, None, 4, 2)), Related("far", Span("b.yaml"))),
    )
    _, _, message = parse_command(annotation(d, "a.yaml"))
    assert message == "m\nhint: do this\nnote: a.yaml:4:2: there\nnote: b.yaml: far"


def test_paths_relative_to_root() -> None:
    """With a root, absolute and cwd-relative paths become repository-relative."""
    results = [
        FileResult("/repo/configs/a.yaml", None, (Diagnostic("R", "error", "m"),)),
        FileResult("b.yaml", None, (Diagnostic("R", "error", "m"),)),
    ]
    commands = _parse_all(render_github(results, root="/repo", cwd="/repo/configs"))
    assert [properties["file"] for _, properties, _ in commands] == [
        "configs/a.yaml",
        "configs/b.yaml",
    ]


def test_undecodable_file_name_is_written_escaped() -> None:
    """A lone surrogate (undecodable file name byte) is written as a backslash escape."""
    text = annotation(Diagnostic("R", "error", "m", Span("x-\udcff.yaml")), "x")
    text.encode("utf-8")
    assert parse_command(text)[1]["file"] == "x-\\udcff.yaml"


@pytest.mark.parametrize("key", [
    "x\n::error file=a.py::pwned", "\r::add-mask::secret", "::stop-commands::t",
    "a\x1b]0;title\x07b\x1b[31mred", "\u202eevil", "##[warning]v1 syntax"])
def test_a_hostile_yaml_key_is_one_escaped_command(key: str) -> None:
    """A YAML key that holds a newline and `::error`, `::add-mask::`, `::stop-commands::`, an
    OSC or SGR sequence or a bidi override: one command line, printable, no ESC, BEL or LF."""
    d = Diagnostic("SCHEMA-UNKNOWN-KEY", "error", f"unknown key `{key}` at the top level",
                   Span(f"{key}.yaml", None, 1, 1, 1, 3), hint=f"did you mean `{key}`?")
    text = render_github([FileResult("c.yaml", None, (d,))])
    (line,) = text.splitlines()
    assert line.isprintable() and line.startswith("::error file=")
    _, properties, message = parse_command(line)
    assert properties["file"] == escape_inline(f"{key}.yaml")
    assert message == (f"unknown key `{escape_inline(key)}` at the top level\n"
                       f"hint: did you mean `{escape_inline(key)}`?")


def test_unprocessed_text_stops_commands_around_itself() -> None:
    """Plain log text sits between `::stop-commands::TOKEN` and `::TOKEN::`; TOKEN depends on
    the text (the same text, the same bytes) and is not in it."""
    text = "::error::not a command\n##[add-mask]x\n"
    out = unprocessed(text)
    first, *body, last = out.splitlines()
    token = first.removeprefix("::stop-commands::")
    assert first != token and last == f"::{token}::" and "\n".join(body) + "\n" == text
    assert token not in text and out == unprocessed(text) != unprocessed(text + " ")


def test_clean_run_is_empty() -> None:
    """No findings, no commands."""
    assert render_github([FileResult("a.yaml", "a: 1\n", ())]) == ""
