"""`kvreplay run`: the README's main job, the canonical report, refusals, Ctrl-C, bad traces."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from cli_support import default_signals, synthetic_config

REPO = Path(__file__).resolve().parents[2]
MAIN_EXAMPLE = REPO / "examples" / "kv-router-mooncake.yaml"


def test_readme_main_command_runs(cli_process: Callable[..., Any]) -> None:
    """`kvreplay run examples/kv-router-mooncake.yaml` replays 200 requests and prints a table."""
    ran = cli_process("run", str(MAIN_EXAMPLE))
    assert ran.code == 0, ran.err
    assert "200 completed of 200" in ran.out
    assert "time to first token" in ran.out


def test_the_run_summary_names_rejected_requests_and_why(cli: Callable[..., Any]) -> None:
    """200 blocks of 512 tokens cannot hold two of the example's prompts: the summary says
    they were rejected and why, beside the completed count."""
    ran = cli("run", str(MAIN_EXAMPLE), "--set",
              "engine.workers.aggregated.kv_cache.capacity.blocks=200")
    assert ran.code == 0, ran.err
    assert ("198 completed of 200; 2 rejected: prompt larger than the KV cache (max 102,400 "
            "tokens)") in ran.out


def test_report_file_is_canonical_and_valid(cli: Callable[..., Any], tmp_path: Path) -> None:
    """-o writes the canonical report, which validates against `kvreplay schema report`."""
    out = tmp_path / "report.json"
    ran = cli("run", str(MAIN_EXAMPLE), "-o", str(out), "--format", "json")
    assert ran.code == 0
    report = json.loads(out.read_text())
    assert set(report) == {"summary", "per_request", "meta"}
    assert json.loads(ran.out) == report["summary"]
    schema = json.loads((REPO / "schema" / "report.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(report)
    text = out.read_text()
    assert text == json.dumps(report, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    assert len(report["per_request"]) == 200
    assert report["summary"]["completed_requests"] == 200


def test_a_run_reads_its_config_once(cli: Callable[..., Any], tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """One `kvreplay run`: the native document is emitted once, the refusals are judged once,
    and the engine reads no document (it takes the compiled Spec)."""
    import kvreplay.compiler.emit as emit
    import kvreplay.engine.api as api
    import kvreplay.engine.config as config

    calls: Counter[str] = Counter()

    def count(module: Any, name: str) -> None:
        original = getattr(module, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)

    for module, name in ((emit, "to_native"), (api, "refusals"), (config, "_read")):
        count(module, name)
    ran = cli("run", str(MAIN_EXAMPLE), "-o", str(tmp_path / "report.json"))
    assert ran.code == 0, ran.err
    assert calls == {"to_native": 1, "refusals": 1}


def _run_report(seed: str, tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / f"report-{seed}.json"
    subprocess.run([sys.executable, "-m", "kvreplay", "run", str(MAIN_EXAMPLE), "-o", str(out),
                    "--quiet"], check=True, env={**os.environ, "PYTHONHASHSEED": seed},
                   timeout=300)
    report: dict[str, Any] = json.loads(out.read_text())
    return report


def test_reports_identical_across_hash_seeds(tmp_path: Path) -> None:
    """Two runs under different PYTHONHASHSEED give identical summary and per-request bytes."""
    first, second = _run_report("0", tmp_path), _run_report("123", tmp_path)
    for part in ("summary", "per_request"):
        assert json.dumps(first[part], sort_keys=True) == json.dumps(second[part], sort_keys=True)
    assert first["meta"]["kvreplay_version"] == second["meta"]["kvreplay_version"]


def test_engine_refuses_what_it_cannot_run_naming_the_capability(cli: Callable[..., Any],
                                                                 tmp_path: Path) -> None:
    """A valid spec the engine cannot execute (n-gram speculation): exit 1, the capability
    named, no report."""
    out = tmp_path / "report.json"
    ran = cli("run", str(REPO / "examples" / "kv-router-mooncake.yaml"), "-o", str(out),
              "--set", "engine.workers.aggregated.speculation="
              "{kind: ngram, num_speculative_tokens: 2, acceptance_rates: [0.5]}")
    assert ran.code == 1, ran.err
    assert "speculative decoding (ngram)" in ran.err
    assert not out.exists()


def test_ctrl_c_stops_cleanly_without_a_partial_file(tmp_path: Path) -> None:
    """SIGINT during a long replay: exit 130, a one-line message, and no report file."""
    config = synthetic_config(tmp_path, 10_000_000)
    out = tmp_path / "report.json"
    proc = subprocess.Popen([sys.executable, "-m", "kvreplay", "run", str(config), "-o", str(out),
                             "--stepwise"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=default_signals)
    time.sleep(2.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert not out.exists()
    assert not list(tmp_path.glob(".kvreplay-*"))


def test_missing_trace_override_is_an_input_error(cli: Callable[..., Any],
                                                  tmp_path: Path) -> None:
    """--trace pointing nowhere: exit 2 with a TRACE-PATH diagnostic."""
    ran = cli("run", str(MAIN_EXAMPLE), "--trace", str(tmp_path / "nope.jsonl"))
    assert ran.code == 2
    assert "TRACE-PATH" in ran.err


def test_malformed_trace_rows_are_reported_with_lines(cli: Callable[..., Any],
                                                      tmp_path: Path) -> None:
    """Bad rows: every one reported with file:line and the field, before anything runs; a trace
    that cannot be read is an input error (exit 2)."""
    trace = tmp_path / "bad.jsonl"
    trace.write_text(
        '{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1]}\n'
        '{"timestamp": 1, "input_length": "ten", "output_length": 2, "hash_ids": [1]}\n'
        'not json\n'
        '{"timestamp": 2, "input_length": 10, "hash_ids": [1]}\n')
    ran = cli("run", str(MAIN_EXAMPLE), "--trace", str(trace))
    assert ran.code == 2
    for line in (2, 3, 4):
        assert f"bad.jsonl:{line}:" in ran.err
    assert "input_length" in ran.err and "output_length" in ran.err


def test_g2_run_prints_the_host_tier_and_writes_a_valid_report(cli: Callable[..., Any],
                                                                tmp_path: Path) -> None:
    """A shared-G2 P/D example: the table has the host-tier lines; the report validates."""
    out = tmp_path / "report.json"
    ran = cli("run", str(REPO / "examples" / "g2-shared-pd-mooncake.yaml"), "-o", str(out))
    assert ran.code == 0, ran.err
    assert "host tier (G2)        cluster_shared, 1 pool(s): 0.2222 of input tokens" in ran.out
    assert "6 blocks stored (6.0 MB), 2 restored (2.0 MB)" in ran.out
    assert "shared pool           6 of 8 blocks used (6 resident)" in ran.out
    report = json.loads(out.read_text())
    schema = json.loads((REPO / "schema" / "report.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(report)


def test_native_spec_with_a_mismatched_shared_pool_gets_the_compile_diagnostic(
        cli: Callable[..., Any], tmp_path: Path) -> None:
    """A hand-written native spec whose shared-pool roles disagree on capacity: `run` reports
    POOL-CAPACITY at the file's line (as `compile` does), exit 1, no traceback, no report."""
    compiled = cli("compile", str(REPO / "examples" / "g2-shared-pd-mooncake.yaml"))
    document = json.loads(compiled.out)
    document["spec"]["engine"]["decode"]["rank"]["native_host_offload"]["num_host_blocks"] = 16
    document["traffic"]["trace_paths"] = [
        str(REPO / "examples" / "traces" / "g2-restore-mooncake.jsonl")]
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(document, indent=2))
    out = tmp_path / "report.json"
    ran = cli("run", str(spec), "-o", str(out))
    assert ran.code == 1
    assert "POOL-CAPACITY" in ran.err and "8 vs 16" in ran.err and "Traceback" not in ran.err
    assert f"{spec}:" in ran.err
    assert not out.exists()


def test_malformed_play_exits_2_with_its_location_and_no_report(cli: Callable[..., Any],
                                                                tmp_path: Path) -> None:
    """An agentic trace with a malformed play: file, line and play id on stderr, exit 2, no
    report and no lifecycle file."""
    good = (REPO / "examples" / "traces" / "weka-g2-restore.jsonl").read_text().strip()
    bad = good.replace('"hash_id_scope":"local"', '"hash_id_scope":"global"')
    trace = tmp_path / "plays.jsonl"
    trace.write_text(good + "\n" + bad + "\n")
    out, lifecycle = tmp_path / "report.json", tmp_path / "lifecycle.jsonl"
    ran = cli("run", str(REPO / "examples" / "agentx-g2-local.yaml"), "--trace", str(trace),
              "-o", str(out), "--lifecycle", str(lifecycle))
    assert ran.code == 2
    assert f"{trace}:2:" in ran.err and "play 'g2-parent-resume'" in ran.err
    assert "hash_id_scope" in ran.err and "Traceback" not in ran.err
    assert not out.exists() and not lifecycle.exists()
    assert not list(tmp_path.glob(".kvreplay-*"))


def test_lifecycle_transcript_is_written_for_agentic_runs(cli: Callable[..., Any],
                                                          tmp_path: Path) -> None:
    """--lifecycle writes the JSONL transcript whose count and digest the report gives; it is
    refused for traffic that is not agentic."""
    import blake3

    out, lifecycle = tmp_path / "report.json", tmp_path / "lifecycle.jsonl"
    ran = cli("run", str(REPO / "examples" / "agentx-g2-local.yaml"), "-o", str(out),
              "--lifecycle", str(lifecycle))
    assert ran.code == 0, ran.err
    summary = json.loads(out.read_text())["summary"]
    text = lifecycle.read_text()
    assert len(text.splitlines()) == summary["agentic_lifecycle_event_count"] == 13
    digest = blake3.blake3(b"aisimulate-agentic-lifecycle-v1\0" + text.encode()).hexdigest()
    assert digest == summary["agentic_lifecycle_digest"]
    refused = cli("run", str(MAIN_EXAMPLE), "--lifecycle", str(tmp_path / "x.jsonl"))
    assert refused.code == 1 and "--lifecycle needs an agentic trace" in refused.err
    assert not (tmp_path / "x.jsonl").exists()


def test_trace_convert_writes_the_v2_graph(cli: Callable[..., Any], tmp_path: Path) -> None:
    """`kvreplay trace convert` lowers Weka plays to v2 (stdout or -o); replaying the v2 file
    gives the same report as the Weka file; a malformed play exits 2."""
    source = REPO / "examples" / "traces" / "weka-g2-restore.jsonl"
    printed = cli("trace", "convert", str(source))
    assert printed.code == 0
    header, *rows = printed.out.splitlines()
    assert json.loads(header)["schema"] == "dynamo.agentic_mooncake" and len(rows) == 4
    v2 = tmp_path / "g2-v2.jsonl"
    assert cli("trace", "convert", str(source), "-o", str(v2)).code == 0
    assert v2.read_text() == printed.out
    weka_report, v2_report = tmp_path / "a.json", tmp_path / "b.json"
    config = REPO / "examples" / "agentx-g2-local.yaml"
    assert cli("run", str(config), "-o", str(weka_report), "-q").code == 0
    assert cli("run", str(config), "-o", str(v2_report), "-q", "--set",
               "traffic.source.format=agentic_mooncake", "--set",
               "traffic.source.nested_timestamp_basis=null", "--trace", str(v2)).code == 0
    a, b = json.loads(weka_report.read_text()), json.loads(v2_report.read_text())
    a["summary"].pop("weka_nested_timestamp_basis")
    assert a["summary"] == b["summary"] and a["per_request"] == b["per_request"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(source.read_text().replace('"in":9', '"in":0', 1))
    refused = cli("trace", "convert", str(bad))
    assert refused.code == 2 and "zero-length request" in refused.err and refused.out == ""


def test_a_latency_without_samples_is_a_dash_not_zero(cli: Callable[..., Any]) -> None:
    """No request has two output tokens: TPOT and ITL show `-` with a note saying why, not
    0.00 (the report keeps its 0.0 with num_tpot_samples 0); TTFT keeps its figures."""
    ran = cli("run", str(REPO / "examples" / "g2-restore-mooncake.yaml"), "--no-progress")
    assert ran.code == 0
    rows = {line[:22].strip(): line[22:].split() for line in ran.out.splitlines()}
    assert rows["time per output token"] == ["-"] * 5 == rows["inter-token latency"]
    assert rows["time to first token"] == ["2.50", "2.00", "4.00", "4.00", "4.00"]
    assert ("note: no sample for TPOT and ITL (-): no completed request has two output tokens"
            in ran.out)
    kept = cli("run", str(REPO / "examples" / "kv-router-mooncake.yaml"), "--no-progress")
    assert "no sample" not in kept.out and "-" not in "".join(
        line[22:] for line in kept.out.splitlines() if line.startswith("time per output"))


def test_latency_columns_stay_apart_at_100_seconds_and_more(cli: Callable[..., Any],
                                                             tmp_path: Path) -> None:
    """A TTFT of 100,000 ms or more widens every latency column (two spaces apart at least):
    it ran into the next column ("122,117.85120,421.35"); the usual widths are unchanged."""
    from kvreplay.cli.cmd_run import summary_table

    out = tmp_path / "r.json"
    assert cli("run", str(REPO / "examples" / "kv-router-mooncake.yaml"), "--no-progress",
               "-o", str(out)).code == 0
    report = json.loads(out.read_text())
    usual = summary_table(report, None)
    assert "time to first token        65.11     45.00" in usual
    for stat in ("mean", "median", "p90", "p99", "max"):
        report["summary"][f"{stat}_ttft_ms"] *= 10_000
    text = summary_table(report, None)
    row = next(line for line in text.splitlines() if line.startswith("time to first token"))
    cells = row[22:].split()
    assert len(cells) == 5 and all(cell.count(".") == 1 for cell in cells)
    assert "  " in row[22:].strip() and row[22:].strip().count("  ") >= 4


def test_mtp_run_prints_the_speculation_line_and_writes_a_valid_report(
        cli: Callable[..., Any], tmp_path: Path) -> None:
    """The MTP example: a speculation line (tokens per step, drafts accepted, acceptance per
    draft position) under the volumes; the report, with its speculation figures, validates."""
    out = tmp_path / "report.json"
    ran = cli("run", str(REPO / "examples" / "mtp-mooncake.yaml"), "--no-progress", "-o", str(out))
    assert ran.code == 0, ran.err
    report = json.loads(out.read_text())
    spec = report["summary"]["speculation"]
    rates = ", ".join(f"{p['acceptance_rate']:.2f}" for p in spec["acceptance_by_position"])
    assert (f"speculation           mtp: {spec['tokens_per_step']:.3f} tokens per step, "
            f"{spec['draft_acceptance_rate']:.1%} of {spec['draft_tokens']:,} drafts accepted; "
            f"acceptance by position {rates}") in ran.out
    schema = json.loads((REPO / "schema" / "report.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(report)


def test_an_agentic_run_reads_and_lowers_its_plays_once(cli: Callable[..., Any], tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """One `kvreplay run` of Weka plays: the corpus is read once, each play lowered once, the
    graph digested once."""
    import kvreplay.engine.traces.agentic.graph as graph
    import kvreplay.engine.traces.agentic.weka as weka

    calls: Counter[str] = Counter()
    for module, name in ((weka, "read_weka"), (weka, "lower_play"), (graph, "graph_digest")):
        original = getattr(module, name)

        def counted(*args: Any, _name: str = name, _original: Any = original,
                    **kwargs: Any) -> Any:
            calls[_name] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
    out = tmp_path / "report.json"
    ran = cli("run", str(REPO / "examples" / "agentx-g2-local.yaml"), "-o", str(out))
    assert ran.code == 0, ran.err
    plays = json.loads(out.read_text())["summary"]["total_trajectories"]
    assert plays > 0
    assert calls == {"read_weka": 1, "lower_play": plays, "graph_digest": 1}
