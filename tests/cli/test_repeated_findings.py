"""One cause, one message (issue 22 item 6): a finding repeated down a file is printed once with
its count and first and last lines in every format, and a trace's likely fix is named (the block
size its hash ids were written at, the format that reads it)."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jsonschema.validators import validator_for

from kvreplay.formats import FileResult, render
from kvreplay.schema.diagnostics import Diagnostic, Span, collapse_repeats

REPO = Path(__file__).resolve().parents[2]
ROUTER = str(REPO / "examples" / "kv-router-mooncake.yaml")
TRACE = REPO / "examples" / "traces" / "mooncake-conversation-200.jsonl"
SARIF_SCHEMA = REPO / "tests" / "cases" / "sarif" / "sarif-schema-2.1.0.json"


def _row(line: int, tokens: int, rule: str = "TRACE-CAPACITY",
         field: str = "input_length") -> Diagnostic:
    return Diagnostic(rule, "error", f"`{field}` {tokens} exceeds the {tokens // 30} tokens",
                      Span(file="t.jsonl", path=f"$.{field}", line=line, column=34),
                      hint="set the block size")


def _terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The captured stderr looks like a terminal (text with hints), without colour (called in
    the test: the capture's stream is only in place then)."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setenv("NO_COLOR", "1")


def test_repeats_of_one_cause_fold_into_the_first() -> None:
    """Three rows with the same words (only figures differ) are one finding counting three,
    spanning their first and last lines; a different field or rule stays apart."""
    found = [_row(1, 6758), _row(2, 7322), _row(9, 120633), _row(3, 5, field="hash_ids"),
             _row(4, 5, rule="TRACE-VALUE")]
    folded = collapse_repeats(found)
    assert [(d.rule, d.span.path, d.count) for d in folded] == [
        ("TRACE-CAPACITY", "$.input_length", 3), ("TRACE-CAPACITY", "$.hash_ids", 1),
        ("TRACE-VALUE", "$.input_length", 1)]
    first = folded[0]
    assert first.span.line == 1 and first.last is not None and first.last.line == 9
    assert first.message == ("`input_length` 6758 exceeds the 225 tokens (3 times in this file, "
                             "lines 1 to 9)")
    assert collapse_repeats([_row(1, 6758)]) == [_row(1, 6758)]


def test_every_format_shows_the_count_and_the_lines() -> None:
    """text, concise, github: the message names the count and lines once; json adds `count`
    and `last`; SARIF `occurrenceCount` (and stays valid); totals count every repeat."""
    results = [FileResult("t.jsonl", None, tuple(collapse_repeats(
        [_row(n, 6000 + n) for n in range(1, 201)])))]
    suffix = "(200 times in this file, lines 1 to 200)"
    for name in ("text", "concise", "github"):
        out = render(name, results)
        assert out.count(suffix) == 1 and out.count("TRACE-CAPACITY") == 1, name
    assert "200 errors, 0 warnings in 1 file" in render("text", results)
    document = json.loads(render("json", results))
    (finding,) = document["files"][0]["diagnostics"]
    assert (finding["count"], finding["line"], finding["last"]["line"]) == (200, 1, 200)
    assert document["summary"]["errors"] == 200
    log = json.loads(render("sarif", results))
    schema = json.loads(SARIF_SCHEMA.read_text())
    validator_for(schema)(schema).validate(log)
    (result,) = log["runs"][0]["results"]
    assert result["occurrenceCount"] == 200


def test_a_wrong_block_size_is_one_finding_with_the_likely_fix(
        cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The Mooncake slice at block size 16: one TRACE-CAPACITY finding for its 200 rows, and
    the hint derived from the rows: their hash ids cover 512 tokens each."""
    _terminal(monkeypatch)
    ran = cli("run", ROUTER, "--no-progress", "--set", "traffic.source.block_size=16")
    assert ran.code == 2
    assert ran.err.count("TRACE-CAPACITY") == 1
    assert "(200 times in this file, lines 1 to 200)" in ran.err
    assert ("hint: the hash ids of these rows cover 512 tokens each (512 fits every one): set "
            "`traffic.source.block_size: 512`") in ran.err
    assert "200 errors" in ran.err


def test_the_block_size_range_is_derived_from_the_rows(
        cli: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows that fit any size from 10 to 14 (no power of two among them) get the smallest one
    and the range; rows that no one size fits say so."""
    _terminal(monkeypatch)
    (tmp_path / "traces").mkdir()
    config = tmp_path / "c.yaml"
    config.write_text((REPO / "examples" / "kv-router-mooncake.yaml").read_text().replace(
        "traces/mooncake-conversation-200.jsonl", "traces/t.jsonl"))
    rows = [{"timestamp": 0, "input_length": 30, "output_length": 1, "hash_ids": [1, 2, 3]},
            {"timestamp": 1, "input_length": 20, "output_length": 1, "hash_ids": [4, 5]}]
    (tmp_path / "traces" / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ran = cli("run", str(config), "--no-progress", "--set", "traffic.source.block_size=4")
    assert ("the hash ids of these rows cover 10 tokens each (any size from 10 to 14 fits every "
            "one): set `traffic.source.block_size: 10`") in " ".join(ran.err.split())
    rows[1] = {"timestamp": 1, "input_length": 40, "output_length": 1, "hash_ids": [4, 5]}
    (tmp_path / "traces" / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ran = cli("run", str(config), "--no-progress", "--set", "traffic.source.block_size=4")
    assert "no one block size fits these rows" in ran.err


def test_a_weka_play_given_to_a_mooncake_config_names_its_format(
        cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Instead of every field the Mooncake reader misses, one TRACE-FORMAT error that says the
    file is a Weka play and which setting reads it."""
    _terminal(monkeypatch)
    ran = cli("run", str(REPO / "examples" / "g2-restore-mooncake.yaml"), "--no-progress",
              "--set", "traffic.source.paths=[traces/weka-g2-restore.jsonl]")
    assert ran.code == 2
    assert "TRACE-MISSING" not in ran.err.split("TRACE-FORMAT", 1)[0]
    assert ran.err.count("error TRACE-FORMAT this file looks like a Weka / AgentX play") == 1
    assert "hint: set `traffic.source.format: weka`" in ran.err
    assert "1 error, 0 warnings" in ran.err


def test_a_mooncake_trace_given_to_a_weka_config_names_its_format(
        cli: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The other way round, on a native spec: the hint names the spec's own key."""
    _terminal(monkeypatch)
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    spec = tmp_path / "examples" / "spec.json"
    assert cli("compile", str(tmp_path / "examples" / "agentx-g2-local.yaml"), "-o",
               str(spec)).code == 0
    ran = cli("run", str(spec), "--no-progress",
              "--trace", str(tmp_path / "examples" / "traces" / "g2-restore-mooncake.jsonl"))
    assert ran.code == 2
    assert "this file looks like a Mooncake trace" in ran.err
    assert "hint: set `traffic.trace_format: mooncake`" in ran.err


def test_piped_output_folds_the_rows_into_one_line(cli: Callable[..., Any]) -> None:
    """Piped (concise), the 200 rows are one line too."""
    ran = cli("run", ROUTER, "--no-progress", "--set", "traffic.source.block_size=16")
    lines = [x for x in ran.err.splitlines() if "TRACE-CAPACITY" in x]
    assert lines == [f"{TRACE}:1:34: error TRACE-CAPACITY `input_length` 6758 exceeds the 224 "
                     "tokens that 14 hash id(s) cover at trace_block_size 16 (200 times in this "
                     "file, lines 1 to 200)"]
