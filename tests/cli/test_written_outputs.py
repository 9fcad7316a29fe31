"""Say what was written (issue 22 item 8): every file `run` writes is named after its summary,
`report -o` names its page, `report` does not print a page to a terminal, and plain
`kvreplay lint` in the checkout is clean (the project's fixtures are excluded)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
AGENTIC = str(REPO / "examples" / "agentx-g2-local.yaml")


def test_run_names_every_file_it_wrote(cli: Callable[..., Any], tmp_path: Path) -> None:
    """-o, --export, --lifecycle and --html each get their line after the summary."""
    out = {name: tmp_path / name for name in ("r.json", "rows.csv", "life.jsonl", "r.html")}
    ran = cli("run", AGENTIC, "--no-progress", "-o", str(out["r.json"]), "--export",
              str(out["rows.csv"]), "--lifecycle", str(out["life.jsonl"]), "--html",
              str(out["r.html"]))
    assert ran.code == 0, ran.err
    assert ran.out.splitlines()[-4:] == [
        f"report written to {out['r.json']}", f"per-request rows exported to {out['rows.csv']}",
        f"lifecycle transcript written to {out['life.jsonl']}",
        f"HTML report written to {out['r.html']}"]
    assert all(path.stat().st_size > 0 for path in out.values())


def test_report_names_the_page_it_wrote(cli: Callable[..., Any], tmp_path: Path) -> None:
    """`report R -o OUT` says where the page is (and -q keeps quiet)."""
    report, page = tmp_path / "r.json", tmp_path / "r.html"
    assert cli("run", AGENTIC, "--no-progress", "-q", "-o", str(report)).code == 0
    ran = cli("report", str(report), "-o", str(page))
    assert (ran.code, ran.out) == (0, f"HTML report written to {page}\n")
    assert page.read_text().startswith("<!DOCTYPE html>")
    assert cli("report", str(report), "-o", str(page), "-q").out == ""


def test_report_does_not_print_a_page_to_a_terminal(cli: Callable[..., Any], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Without -o on a terminal: exit 2, nothing printed, the message gives the command that
    writes the page; piped, the page goes to stdout as before."""
    report = tmp_path / "r.json"
    assert cli("run", AGENTIC, "--no-progress", "-q", "-o", str(report)).code == 0
    piped = cli("report", str(report))
    assert piped.code == 0 and piped.out.startswith("<!DOCTYPE html>")
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    ran = cli("report", str(report))
    assert (ran.code, ran.out) == (2, "")
    assert ran.err == ("kvreplay: the HTML page is not printed to a terminal: write it to a file "
                       f"with -o (`kvreplay report {report} -o r.html`), or redirect stdout\n")


def test_plain_lint_in_the_checkout_is_clean(cli: Callable[..., Any],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """`kvreplay lint` at the repository root checks the examples and skips the failing-on-
    purpose fixtures that the project's kvreplay.toml excludes."""
    monkeypatch.chdir(REPO)
    ran = cli("lint", "--format", "concise", "--verbose")
    assert (ran.code, ran.out) == (0, "")
    assert "examples/g2-restore-mooncake.yaml" not in ran.err  # linted, not skipped
    assert "excluded by the settings" in ran.err
    walked = cli("lint", "--format", "concise", "--isolated", "rules/cases", "tests/cases")
    assert walked.code == 2 and walked.out  # the fixtures fail (some unreadable) on purpose
