"""`kvreplay compare`: exit codes, gates named, bad reports refused without a traceback."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import kvreplay
from kvreplay.io.display import escape_inline

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "kv-router-mooncake.yaml"


@pytest.fixture(scope="module")
def reports() -> dict[str, dict[str, Any]]:
    """The KV-router example, and the same run with 6 ms decode passes instead of 5."""
    runs = {"base": kvreplay.run_spec(EXAMPLE).report, "slower": kvreplay.run_spec(
        EXAMPLE, overrides=["engine.workers.aggregated.timing.decode_ms=6"]).report}
    assert all(runs.values())
    return runs  # type: ignore[return-value]


@pytest.fixture
def report_files(tmp_path: Path, reports: dict[str, dict[str, Any]]) -> Callable[..., Path]:
    """Write a report (base or slower) as `kvreplay run -o` would, and give its path."""

    def write(name: str, which: str = "base") -> Path:
        path = tmp_path / name
        path.write_text(json.dumps(copy.deepcopy(reports[which]), indent=2, sort_keys=True),
                        encoding="utf-8")
        return path

    return write


@pytest.fixture
def compare_cli(cli: Callable[..., Any]) -> Callable[..., Any]:
    return lambda *args: cli("compare", *map(str, args))


def test_identical_reports_exit_0(report_files: Callable[..., Path],
                                  compare_cli: Callable[..., Any]) -> None:
    """The same report twice: exit 0, nothing changed, the gate passes."""
    base = report_files("base.json")
    ran = compare_cli(base, base, "--fail-on", "mean_ttft_ms > +5%")
    assert ran.code == 0, ran.err
    assert " 0 changed" in ran.out and "no request got slower" in ran.out
    assert "passed `mean_ttft_ms > +5%`" in ran.out


def test_slower_run_trips_the_gate_exit_1(report_files: Callable[..., Path],
                                          compare_cli: Callable[..., Any]) -> None:
    """A slower run: exit 1, the tripped gate named with base, new and threshold; a gate that
    holds is reported as passed."""
    ran = compare_cli(report_files("base.json"), report_files("new.json", "slower"),
                      "--fail-on", "mean_ttft_ms > +5%",
                      "--fail-on", "prefix_cache_reused_ratio < -0.01")
    assert ran.code == 1
    assert ("FAILED `mean_ttft_ms > +5%`: mean_ttft_ms base 65.115, new 70.69, change +8.56% "
            "(threshold > +5%)") in ran.out
    assert "passed `prefix_cache_reused_ratio < -0.01`" in ran.out


def test_json_output_to_a_file(report_files: Callable[..., Path],
                               compare_cli: Callable[..., Any], tmp_path: Path) -> None:
    """--format json -o: the file holds the document, stderr names the tripped gate."""
    out = tmp_path / "diff.json"
    ran = compare_cli(report_files("base.json"), report_files("new.json", "slower"),
                      "--format", "json", "-o", out, "--fail-on", "mean_e2e_latency_ms > 10%")
    assert ran.code == 1 and ran.out == ""
    assert "gate failed: mean_e2e_latency_ms > 10%" in ran.err
    doc = json.loads(out.read_text())
    assert doc["tripped_gates"] == 1 and doc["requests"]["matched"] == 200
    assert not list(tmp_path.glob(".kvreplay-*"))


def test_output_that_is_an_input_is_refused(report_files: Callable[..., Path],
                                             compare_cli: Callable[..., Any]) -> None:
    """-o naming one of the reports: exit 2, the report untouched."""
    base = report_files("base.json")
    before = base.read_bytes()
    ran = compare_cli(base, report_files("new.json"), "-o", base)
    assert ran.code == 2 and "it is the BASE report" in ran.err
    assert base.read_bytes() == before


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:500])


BAD: dict[str, tuple[Callable[[Path], None], str]] = {
    "truncated": (_truncate, "not valid JSON"),
    "not-utf8": (lambda p: p.write_bytes(b'{"summary": "\xff"}'), "not UTF-8 (byte 0xff"),
    "empty": (lambda p: p.write_text(""), "empty file"),
    "an-array": (lambda p: p.write_text("[]"), "a JSON array"),
    "no-meta": (lambda p: p.write_text('{"summary": {}, "per_request": []}'), "no `meta`"),
    "nan": (lambda p: p.write_text('{"summary": {"x": NaN}}'), "NaN"),
    "huge-number": (lambda p: p.write_text('{"summary": {"x": 1e999}}'), "out of the range"),
    "other-generator": (lambda p: p.write_text(
        '{"summary": {}, "per_request": [], "meta": {"generator": "x", "report_version": 1}}'),
        "meta.generator"),
    "newer-layout": (lambda p: p.write_text(
        '{"summary": {}, "per_request": [], "meta": {"generator": "kvreplay", '
        '"report_version": 2}}'), "report_version 2"),
    "row-without-uuid": (lambda p: p.write_text(
        '{"summary": {}, "per_request": [{}], "meta": {"generator": "kvreplay", '
        '"report_version": 1}}'), "per_request[0]"),
}


def _spoil_rows(change: Callable[[list[dict[str, Any]]], None]) -> Callable[[Path], None]:
    def spoil(path: Path) -> None:
        report = json.loads(path.read_text())
        change(report["per_request"])
        path.write_text(json.dumps(report))
    return spoil


BAD_ROWS: dict[str, tuple[Callable[[Path], None], str]] = {
    "duplicate-uuid": (_spoil_rows(lambda rows: rows.append(dict(rows[3]))),
                       "per_request[200].uuid '00000000-0000-0000-0000-000000000004' is also "
                       "per_request[3]'s"),
    "string-ttft": (_spoil_rows(lambda rows: rows[5].update(ttft_ms="2.0")),
                    'per_request[5].ttft_ms is a string ("2.0"), expected a number or null'),
    "boolean-e2e": (_spoil_rows(lambda rows: rows[0].update(e2e_latency_ms=True)),
                    "per_request[0].e2e_latency_ms is a boolean (true)"),
}


@pytest.mark.parametrize("case", sorted(BAD_ROWS))
def test_rows_that_would_leave_the_join_are_refused(case: str, compare_cli: Callable[..., Any],
                                                    report_files: Callable[..., Path]) -> None:
    """Duplicate uuids or a TTFT that is a string: exit 2 and the row named, not exit 0 with
    the row silently out of the join (either side)."""
    spoil, message = BAD_ROWS[case]
    bad = report_files("bad.json")
    spoil(bad)
    for pair in ((report_files("base.json"), bad), (bad, report_files("base.json"))):
        ran = compare_cli(*pair)
        assert ran.code == 2 and ran.out == ""
        assert f"bad.json: {message}" in ran.err


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_reports_exit_2_without_traceback(case: str, report_files: Callable[..., Path],
                                              compare_cli: Callable[..., Any]) -> None:
    """Malformed, truncated, non-UTF-8, wrong-shape or other-version reports: exit 2, one
    line naming the file and what is wrong."""
    spoil, message = BAD[case]
    bad = report_files("bad.json")
    spoil(bad)
    ran = compare_cli(report_files("base.json"), bad)
    assert ran.code == 2
    assert message in ran.err and "bad.json" in ran.err
    assert "Traceback" not in ran.err and ran.out == ""


def test_missing_report_exit_2(report_files: Callable[..., Path],
                               compare_cli: Callable[..., Any], tmp_path: Path) -> None:
    """A report that does not exist: exit 2 naming it."""
    ran = compare_cli(report_files("base.json"), tmp_path / "nope.json")
    assert ran.code == 2 and "cannot read" in ran.err and "nope.json" in ran.err


def test_unknown_gate_figure_is_a_usage_error(report_files: Callable[..., Path],
                                              compare_cli: Callable[..., Any]) -> None:
    """--fail-on with a misspelt figure: exit 2 and a did-you-mean, even if nothing changed."""
    base = report_files("base.json")
    ran = compare_cli(base, base, "--fail-on", "prefix_cache_reuse_ratio < -0.01")
    assert ran.code == 2
    assert "did you mean `prefix_cache_reused_ratio`" in ran.err


def test_full_width_gate_threshold_is_refused(report_files: Callable[..., Path],
                                              compare_cli: Callable[..., Any]) -> None:
    """`--fail-on "mean_ttft_ms > \\uff15"` (a full-width 5): exit 2 naming the character, not a
    gate read as `> 5`."""
    base = report_files("base.json")
    ran = compare_cli(base, base, "--fail-on", "mean_ttft_ms > \uff15")
    assert ran.code == 2 and ran.out == ""
    assert "cannot read the gate" in ran.err and "U+FF15 FULLWIDTH DIGIT FIVE" in ran.err


def test_a_delta_that_overflows_is_infinite_not_an_error(report_files: Callable[..., Path],
                                                          compare_cli: Callable[..., Any],
                                                          tmp_path: Path) -> None:
    """Summary figures of -1.7e308 and 1.7e308: the delta overflows a double, and the JSON says
    "+inf" (relative null; a gate's change too) instead of failing with an internal error."""
    base, new = report_files("base.json"), report_files("new.json")
    for path, value in ((base, -1.7e308), (new, 1.7e308)):
        report = json.loads(path.read_text())
        report["summary"]["mean_ttft_ms"] = value
        path.write_text(json.dumps(report))
    ran = compare_cli(base, new, "--format", "json", "--fail-on", "mean_ttft_ms > 1")
    assert ran.code == 1, ran.err
    doc = json.loads(ran.out)
    (figure,) = [f for f in doc["figures"] if f["name"] == "mean_ttft_ms"]
    assert (figure["delta"], figure["relative"]) == ("+inf", None)
    assert doc["gates"][0]["change"] == "+inf"


def test_github_format_annotates(report_files: Callable[..., Path],
                                 compare_cli: Callable[..., Any]) -> None:
    """--format github: the tripped gate as `::error::`, then the table for the log."""
    ran = compare_cli(report_files("base.json"), report_files("new.json", "slower"),
                      "--format", "github", "--fail-on", "mean_ttft_ms > +5%")
    assert ran.code == 1
    first = ran.out.splitlines()[0]
    assert first.startswith("::error title=kvreplay compare::FAILED `mean_ttft_ms > +5%25`")
    assert "per-request join" in ran.out


def runner_commands(log: str) -> list[str]:
    """The workflow commands the Actions runner would act on in `log`, as it reads them
    (actions/runner ActionCommandManager): `::name ...::` after leading space, `##[name` anywhere
    in a line, nothing but the resume token while commands are stopped."""
    acted, stopped = [], None
    for line in log.splitlines():
        found = re.match(r"::([^: ]+)", line.lstrip()) or re.search(r"##\[([^\] ]+)", line)
        if found is None:
            continue
        name = found.group(1)
        if stopped is not None:
            if name == stopped:
                stopped = None
            continue
        acted.append(name)
        if name == "stop-commands":
            stopped = line.lstrip().split("::")[2]
    return acted


HOSTILE_KEYS = ["x\n::error file=a.py,line=1::pwned", "y\n::add-mask::secret",
                "::stop-commands::z", "w\r::warning::w", "v##[error]v1", "\x1b]0;t\x07c\x1b[31m"]


def test_github_format_hostile_figure_names(report_files: Callable[..., Path],
                                            compare_cli: Callable[..., Any]) -> None:
    """Summary keys (and a request id) holding a newline and `::error file=...::`,
    `::add-mask::`, `::stop-commands::`, `::warning::`, `##[error]` or terminal escapes: the
    runner acts on the tripped gate's `::error` and the stop/resume pair only; the log shows
    every key escaped on its own line, with no control character."""
    base, new = report_files("base.json"), report_files("new.json", "slower")
    report = json.loads(new.read_text())
    report["summary"].update({key: i for i, key in enumerate(HOSTILE_KEYS)})
    report["per_request"][0]["request_id"] = "\n::error::row"
    new.write_text(json.dumps(report))
    ran = compare_cli(base, new, "--format", "github", "--fail-on", "mean_ttft_ms > +5%")
    assert ran.code == 1, ran.err
    acted = runner_commands(ran.out)
    assert acted == ["error", "warning", "stop-commands"], ran.out
    assert all(line.isprintable() for line in ran.out.splitlines())
    for key in HOSTILE_KEYS:
        assert escape_inline(key) in ran.out


def test_changed_only_lists_the_changed_figures(report_files: Callable[..., Path],
                                               compare_cli: Callable[..., Any]) -> None:
    """--changed-only: the table lists only figures that differ, the footer says how many were
    left out; in JSON the figures list holds the changed ones and says so."""
    base, new = report_files("base.json"), report_files("new.json", "slower")
    full = compare_cli(base, new)
    ran = compare_cli(base, new, "--changed-only")
    assert ran.code == 0, ran.err
    table = _figure_rows(ran.out)
    total, changed = (int(n) for n in re.search(r"(\d+) figures, (\d+) changed", ran.out).groups())
    assert len(table) == changed < len(_figure_rows(full.out)) == total
    assert f"({total - changed} unchanged not shown: --changed-only)" in ran.out
    assert "num_requests" not in ran.out and "mean_ttft_ms" in ran.out
    doc = json.loads(compare_cli(base, new, "--changed-only", "--format", "json").out)
    assert doc["changed_only"] is True and len(doc["figures"]) == changed
    assert all(f["changed"] for f in doc["figures"])


def _figure_rows(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("figure "))
    end = next(i for i, line in enumerate(lines) if re.match(r"\d+ figures, ", line))
    return lines[start + 1:end]


def test_columns_never_run_together(report_files: Callable[..., Path],
                                    compare_cli: Callable[..., Any]) -> None:
    """A delta of +133,891,259 with a relative change of +371,920,163.89 % (and figures of
    1e300): every cell of every row stays two spaces or more from the next."""
    base, new = report_files("base.json"), report_files("new.json")
    for path, figures in ((base, {"gpu_hours": 0.036, "duration_ms": 1e300}),
                          (new, {"gpu_hours": 133891259.036, "duration_ms": -1e300})):
        report = json.loads(path.read_text())
        report["summary"].update(figures)
        path.write_text(json.dumps(report))
    ran = compare_cli(base, new)
    assert ran.code == 0, ran.err
    assert "+133,891,259" in ran.out and "+3.72e+11%" in ran.out
    for line in _figure_rows(ran.out):
        cells = re.split(r" {2,}", line)
        assert len(cells) in (3, 5), line  # text figures have no delta or relative
        assert all(" " not in cell for cell in cells), line
    assert "+133,891,259+" not in ran.out
    assert re.search(r"^duration_ms +1e\+300 +-1e\+300 +-2e\+300 +-200\.00%$", ran.out, re.M)
    per_request = ran.out.splitlines()
    head = next(i for i, line in enumerate(per_request) if line.startswith("delta (ms)"))
    for line in per_request[head:head + 3]:
        assert len(re.split(r" {2,}", line)) == 11, line


def test_different_traces_are_a_clear_warning(report_files: Callable[..., Path],
                                              compare_cli: Callable[..., Any],
                                              tmp_path: Path) -> None:
    """Reports that recorded different traces: a warning naming both traces comes right after
    BASE and NEW (and on stderr when the table is not shown), a `::warning::` in GitHub output,
    `warnings` in JSON, and on the --html page; rows that differ in identity (no provenance) are
    warned about too."""
    base, new = report_files("base.json"), report_files("new.json")
    for path, trace, digest in ((base, "traces/mooncake-conversation-200.jsonl", "cd"),
                                (new, "traces/other.jsonl", "ab")):
        report = json.loads(path.read_text())
        report["meta"]["provenance"] = {"traces": [{"path": trace,
                                                    "digest": "sha256:" + digest * 32}]}
        path.write_text(json.dumps(report))
    ran = compare_cli(base, new)
    assert ran.code == 0, ran.err
    third = ran.out.splitlines()[2]
    assert third.startswith("warning: the two reports replayed different traces (BASE replayed "
                            "traces/mooncake-conversation-200.jsonl (sha256:cdcdcdcdcdcd), ")
    assert "NEW traces/other.jsonl (sha256:abababababab)" in third
    assert "their figures describe different workloads" in third
    as_json = compare_cli(base, new, "--format", "json")
    assert json.loads(as_json.out)["warnings"] == [third.removeprefix("warning: ")]
    assert as_json.err == f"kvreplay: {third}\n"
    github = compare_cli(base, new, "--format", "github")
    assert github.out.startswith("::warning title=kvreplay compare::the two reports replayed")
    page = tmp_path / "page.html"
    assert compare_cli(base, new, "--html", page).code == 0
    assert '<p class="warn">warning: the two reports replayed different traces' in page.read_text()
    del report["meta"]["provenance"]
    report["per_request"][7]["input_length"] += 1
    new.write_text(json.dumps(report))
    ran = compare_cli(base, new)
    assert ran.out.splitlines()[2].startswith(
        "warning: the two reports replayed different traces (request "
        "00000000-0000-0000-0000-000000000008 differs in `input_length`")


def _data_section(html: str) -> Any:
    found = re.search(r'<script type="application/json" id="kvreplay-data">(.*?)</script>',
                      html, re.S)
    assert found is not None
    return json.loads(found.group(1))


def test_html_is_a_comparison_page(cli: Callable[..., Any], report_files: Callable[..., Path],
                                   tmp_path: Path) -> None:
    """--html: both runs overlaid (the data section of `kvreplay report BASE NEW`), titled as a
    comparison, led by the gate verdict, the latency figures with their deltas and the
    per-request deltas; an output that is a report is refused."""
    base, new = report_files("base.json"), report_files("new.json", "slower")
    page, direct = tmp_path / "both.html", tmp_path / "direct.html"
    ran = cli("compare", str(base), str(new), "--html", str(page),
              "--fail-on", "mean_ttft_ms > +5%", "--fail-on", "prefix_cache_reused_ratio < -0.01")
    assert ran.code == 1, ran.err
    assert cli("report", str(base), str(new), "-o", str(direct)).code == 0
    html, report = page.read_text(), direct.read_text()
    assert _data_section(html) == _data_section(report)
    assert "<title>kvreplay comparison: base vs new</title>" in html
    assert "<h1>kvreplay comparison</h1>" in html and "BASE base against NEW new" in html
    assert '<div class="verdict failed"><h3>FAILED: 1 of 2 gate(s) tripped</h3>' in html
    assert ("<li class=\"failed\">FAILED `mean_ttft_ms &gt; +5%`: mean_ttft_ms base 65.115, new "
            "70.69, change +8.56% (threshold &gt; +5%)</li>") in html
    assert '<li class="passed">passed `prefix_cache_reused_ratio &lt; -0.01`' in html
    assert ("<tr><td>TTFT mean</td><td>65.115</td><td>70.69</td><td>+5.575</td>"
            "<td>+8.56%</td></tr>") in html
    assert "<th>per-request delta (ms)</th>" in html
    assert "<td>e2e_latency_ms</td><td>199</td>" in html
    assert html.index('class="verdict') < html.index("<h2>Summary</h2>")
    passed = tmp_path / "passed.html"
    assert cli("compare", str(base), str(base), "--html", str(passed)).code == 0
    assert "No gate: nothing was checked" in passed.read_text()
    assert cli("compare", str(base), str(new), "--html", str(base)).code == 2
