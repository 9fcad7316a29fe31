"""`kvreplay report REPORT... -o OUT` and `kvreplay run ... --html OUT`: one offline page,
the same bytes either way, and bad reports refused with exit 2 and one line."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
MAIN_EXAMPLE = REPO / "examples" / "kv-router-mooncake.yaml"
TRACE = REPO / "examples" / "traces" / "mooncake-conversation-200.jsonl"
G2_EXAMPLE = REPO / "examples" / "g2-restore-mooncake.yaml"


def data_of(html: str) -> Any:
    match = re.search(r'<script type="application/json" id="kvreplay-data">(.*?)</script>',
                      html, re.S)
    assert match is not None
    return json.loads(match.group(1))


def test_run_html_equals_report_of_the_same_run(cli: Callable[..., Any], tmp_path: Path) -> None:
    """`run -o R --html H` and `report R` give the same page, byte for byte."""
    report, page = tmp_path / "r.json", tmp_path / "r.html"
    ran = cli("run", str(MAIN_EXAMPLE), "-o", str(report), "--html", str(page), "-q")
    assert ran.code == 0, ran.err
    again = tmp_path / "again.html"
    ran = cli("report", str(report), "--label", "kv-router-mooncake", "-o", str(again))
    assert (ran.code, ran.out, ran.err) == (0, f"HTML report written to {again}\n", "")
    assert page.read_bytes() == again.read_bytes()
    (run,) = data_of(page.read_text())["runs"]
    assert run["label"] == "kv-router-mooncake" and run["timeline"]["arrived"][-1] == 200


def test_run_html_alone_keeps_the_rows_it_needs(cli: Callable[..., Any], tmp_path: Path) -> None:
    """--html without -o still draws the per-request charts."""
    page = tmp_path / "only.html"
    ran = cli("run", str(MAIN_EXAMPLE), "--html", str(page), "-q")
    assert ran.code == 0, ran.err
    (run,) = data_of(page.read_text())["runs"]
    assert run["workers"] and run["cdf"]["ttft_ms"]["source"] == "requests"


def test_run_html_of_a_spec_without_rows(cli: Callable[..., Any], tmp_path: Path) -> None:
    """A summary-only spec: the -o report lists no rows, the page still plots them; a
    summary-only report given to `kvreplay report` gets a page that says what is absent."""
    spec = tmp_path / "spec.json"
    assert cli("compile", str(MAIN_EXAMPLE), "-o", str(spec)).code == 0
    document = json.loads(spec.read_text())
    document["spec"]["record_per_request"] = False
    spec.write_text(json.dumps(document))
    page, written = tmp_path / "full.html", tmp_path / "small.json"
    ran = cli("run", str(spec), "--trace", str(TRACE), "--html", str(page), "-o", str(written),
              "-q")
    assert ran.code == 0, ran.err
    assert json.loads(written.read_text())["per_request"] == []
    assert "per-request rows: absent" not in page.read_text()
    bare = tmp_path / "bare.html"
    assert cli("report", str(written), "-o", str(bare)).code == 0
    html = bare.read_text()
    assert "per-request rows: absent" in html
    assert data_of(html)["runs"][0]["cdf"]["ttft_ms"]["source"] == "summary"


def test_run_html_cannot_be_the_report_file(cli: Callable[..., Any], tmp_path: Path) -> None:
    """-o and --html naming one file is refused before the run."""
    same = tmp_path / "same"
    ran = cli("run", str(MAIN_EXAMPLE), "-o", str(same), "--html", str(same), "-q")
    assert ran.code == 2 and "refusing to write" in ran.err and not same.exists()


def _report_file(cli: Callable[..., Any], tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    assert cli("run", str(MAIN_EXAMPLE), "-o", str(path), "-q").code == 0
    return path


def test_report_to_stdout_and_default_labels(cli: Callable[..., Any], tmp_path: Path) -> None:
    """Without -o the page goes to stdout; labels default to file names, repeats numbered."""
    first = _report_file(cli, tmp_path, "run.json")
    (tmp_path / "b").mkdir()
    second = tmp_path / "b" / "run.json"
    second.write_bytes(first.read_bytes())
    ran = cli("report", str(first), str(second))
    assert ran.code == 0 and ran.out.startswith("<!DOCTYPE html>")
    assert [r["label"] for r in data_of(ran.out)["runs"]] == ["run", "run#2"]


def test_bad_reports_exit_2_with_one_line(cli: Callable[..., Any], tmp_path: Path) -> None:
    """Unreadable, not JSON, NaN, not a report, a wrong field: exit 2, the file named."""
    good = _report_file(cli, tmp_path, "good.json")
    report = json.loads(good.read_text())
    report["per_request"][3]["routing_history"][0]["logical_worker_id"] = "w0"
    cases = {
        "missing.json": None,
        "broken.json": '{"summary": {}',
        "nan.json": '{"summary": {"duration_ms": NaN}}',
        "list.json": "[1, 2]",
        "field.json": json.dumps(report),
    }
    expected = {
        "missing.json": "cannot read {path}: No such file or directory",
        "broken.json": "{path}:1:15: not valid JSON (Expecting ',' delimiter); a truncated or "
                       "hand-edited report?",
        "nan.json": "{path}: not valid JSON (NaN is not a number a report may hold)",
        "list.json": "{path}: not a kvreplay report (a JSON array, expected an object with "
                     "summary, per_request, meta)",
        "field.json": "{path}: not a kvreplay report: per_request[3].routing_history[0]."
                      "logical_worker_id: expected an integer, found a string",
    }
    for name, text in cases.items():
        path = tmp_path / name
        if text is not None:
            path.write_text(text)
        out = tmp_path / "out.html"
        ran = cli("report", str(good), str(path), "-o", str(out))
        assert ran.code == 2, name
        assert ran.err == f"kvreplay: {expected[name].format(path=path)}\n"
        assert not out.exists()


def test_reports_no_replay_writes_are_located_errors(cli: Callable[..., Any],
                                                      tmp_path: Path) -> None:
    """A denormal `g2_timeline.bin_ms`, a 1e308 time span or an integer past 64 bits, in
    `report` and in `compare --html`: exit 2 and the field named, never an internal error."""
    good = tmp_path / "good.json"
    assert cli("run", str(G2_EXAMPLE), "-o", str(good), "-q").code == 0
    report = json.loads(good.read_text())

    def spoiled(name: str, change: Callable[[dict[str, Any]], None]) -> Path:
        copy = json.loads(json.dumps(report))
        change(copy)
        path = tmp_path / name
        path.write_text(json.dumps(copy, indent=1))
        return path

    cases = {
        spoiled("bins.json", lambda r: r["summary"]["g2_timeline"].update(bin_ms=5e-324)):
            "summary.g2_timeline.bin_ms: 4.94066e-324 ms is not a bin width a replay writes",
        spoiled("span.json", lambda r: r["per_request"][-1].update(terminal_time_ms=1e308)):
            "per_request[3].terminal_time_ms: 1e+308 ms is past the engine's horizon of 2**62 ns",
        spoiled("int.json", lambda r: r["summary"].update(total_input_tokens=10**30)):
            "1000000000000000000000000000000 is past the 64-bit integers a report holds",
    }
    out = tmp_path / "o.html"
    for path, message in cases.items():
        for command in ("report", "-o"), ("compare", "--html"):
            ran = cli(command[0], str(good), str(path), command[1], str(out))
            assert ran.code == 2 and ran.out == "", (command, ran.err)
            assert ran.err.startswith(f"kvreplay: {path}") and message in ran.err, ran.err
            assert not out.exists()


def test_report_refuses_misuse(cli: Callable[..., Any], tmp_path: Path) -> None:
    """More labels than reports, or the output being an input: exit 2, nothing written."""
    good = _report_file(cli, tmp_path, "good.json")
    before = good.read_bytes()
    ran = cli("report", str(good), "--label", "a", "--label", "b")
    assert ran.code == 2 and "2 --label for 1 report(s)" in ran.err
    ran = cli("report", str(good), "-o", str(good))
    assert ran.code == 2 and "refusing to write" in ran.err
    assert good.read_bytes() == before
