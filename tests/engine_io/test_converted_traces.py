"""The converted trace formats: Dynamo request traces and Applied Compute agentic sessions.

Figures marked (ref) are the reference's (ai-dynamo 1.6.1, `trace_format="dynamo"` /
`"applied_compute_agentic"`) on the same files; tests/differential (kinds `dynamo`,
`applied-compute`) compares random ones against it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvreplay.engine import run_native
from kvreplay.engine.report import report_from_run
from kvreplay.engine.traces import WorkloadError, workload_from_traffic
from kvreplay.engine.traces.applied_compute import read_applied_compute
from kvreplay.engine.traces.dynamo_trace import read_dynamo

SCHEMA = "dynamo.request.trace.v1"
RANK = {"backend": "vllm", "block_size": 16, "num_gpu_blocks": 100,
        "timing_model": {"type": "fixed", "prefill_ms": 20.0, "decode_ms": 5.0}}


def record(rid: str, start: int, total: float, length: int, out: int, hashes: list[int],
           session: str | None = None, parent: str | None = None, bs: int = 16) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "schema": SCHEMA, "event_type": "request_end", "event_time_unix_ms": start + int(total),
        "request": {"request_id": rid, "model": "m", "output_tokens": out,
                    "request_received_ms": start, "total_time_ms": total,
                    "replay": {"trace_block_size": bs, "input_length": length,
                               "input_sequence_hashes": hashes}}}
    if session is not None:
        rec["agent_context"] = {"session_id": session}
        if parent is not None:
            rec["agent_context"]["parent_session_id"] = parent
    return rec


def write(path: Path, rows: list[Any]) -> str:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return str(path)


def replay(tmp: Path, traffic: dict[str, Any], model: str = "m") -> dict[str, Any]:
    doc = {"spec": {"version": 1, "model": model,
                    "topology": {"kind": "aggregated", "workers": {"initial_workers": 1}},
                    "engine": {"dp_size": 1, "rank": {**RANK, "worker_type": "aggregated"}},
                    "adapters": {"placement": {"provider": "round_robin", "config": None},
                                 "scaling": {"provider": "none", "config": None}},
                    "max_sim_time_ms": None, "record_per_request": True, "sla": None},
           "traffic": {"source_type": "trace", "load_type": "trace_timestamps", **traffic}}
    workload = workload_from_traffic(doc["traffic"], base_dir=str(tmp), block_size=16,
                                     model=model)
    return report_from_run(run_native(doc, workload=workload))


def rows_of(report: dict[str, Any], *keys: str) -> list[tuple[Any, ...]]:
    return sorted((tuple(r[k] for k in keys) for r in report["per_request"]),
                  key=lambda row: tuple((v is None, v if v is not None else 0) for v in row))


def test_a_standard_dynamo_trace_over_two_files(tmp_path: Path) -> None:
    """Requests of every file in (start, end, id) order, at their start times; skipped records
    and `{"event": ...}` wrappers read (ref: arrivals 0, 100, 100, 400; 32 tokens reused)."""
    first = write(tmp_path / "a.jsonl", [
        record("b", 1000100, 50.0, 40, 3, [11, 12, 13]),
        record("a", 1000000, 30.0, 32, 2, [11, 12]),
        {"schema": SCHEMA, "event_type": "request_payload", "event_time_unix_ms": 5},
        {"event": record("c", 1000100, 20.0, 20, 1, [21, 22])}])
    second = write(tmp_path / "b.jsonl", [record("d", 1000400, 10.4, 16, 2, [11])])
    report = replay(tmp_path, {"trace_format": "dynamo", "trace_paths": [first, second]})
    assert rows_of(report, "arrival_time_ms", "request_id", "input_length",
                   "reused_input_tokens") == [(0.0, "a", 32, 0), (100.0, "b", 40, 32),
                                              (100.0, "c", 20, 0), (400.0, "d", 16, 0)]
    assert report["summary"]["prefix_cache_reused_ratio"] == pytest.approx(0.2962962962962963)


def test_an_agentic_dynamo_trace_is_a_graph(tmp_path: Path) -> None:
    """Requests with agent_context: sessions in sequence, connected requests one play named
    after its first root (ref: the graph digest, plays `dynamo-play:mm` and `:zz`)."""
    path = write(tmp_path / "t.jsonl", [
        record("zz", 1000000, 30.0, 32, 2, [11, 12], "s1"),
        record("aa", 1000100, 50.0, 40, 3, [11, 12, 13], "s1"),
        record("mm", 1000050, 20.0, 20, 1, [21, 22], "s2"),
        record("bb", 1000080, 20.0, 20, 1, [21, 22], "s2")])
    report = replay(tmp_path, {"trace_format": "dynamo", "trace_paths": [path]}, model="x")
    graph = report["summary"]["agentic_graph"]
    assert graph["graph_digest"] == (
        "0234d1dad36b30de93b9ba1f40a89a9fa5d43e59d910d992d2aa30116440094a")
    assert graph["source"] == {"format": SCHEMA, "digest": "requests:4;tools:0"}
    assert rows_of(report, "request_id", "play_id", "arrival_time_ms") == [
        ("aa", "dynamo-play:zz", 95.0), ("bb", "dynamo-play:mm", 80.0),
        ("mm", "dynamo-play:mm", 50.0), ("zz", "dynamo-play:zz", 0.0)]


def test_a_child_session_is_spawned_and_joined(tmp_path: Path) -> None:
    """A child session (parent_session_id) is spawned by the last parent request started by
    then and joined by the first one started after it ended (ref digest)."""
    path = write(tmp_path / "t.jsonl", [
        record("a", 1000000, 30.0, 32, 2, [11, 12], "s1"),
        record("b", 1000100, 50.0, 40, 3, [11, 12, 13], "s1"),
        record("c", 1000050, 20.0, 20, 1, [21, 22], "s2", "s1")])
    trace, found = read_dynamo([(path, path)])
    assert found == [] and trace is not None and trace.graph is not None
    assert trace.graph.digest() == (
        "d4ff39a7cea7858d2c6b792a1772ec159246916b4669206c099c3e204d930a26")
    deps = {n.request_id: [(d.request_id, d.trigger, d.delay_ms, d.relation)
                           for d in n.dependencies] for n in trace.graph.nodes}
    assert deps == {"a": [], "b": [("a", "completion", 70.0, "sequence"),
                                   ("c", "completion", 30.0, "join")],
                    "c": [("a", "dispatch", 50.0, "spawn")]}


def test_applied_compute_sessions_grow_their_prompts(tmp_path: Path) -> None:
    """Each line is a session of num_turns + 1 requests whose prompts add each answer and tool
    output, released the tool latency after the previous turn; a shared prefix family covers
    round(ratio x blocks) of the first prompt (ref: input lengths 64, 71, 81 and 30, 34;
    arrivals 0, 26, 58, 93, 118; reuse 0.5714285714285714)."""
    path = write(tmp_path / "s.jsonl", [
        {"num_turns": 2, "input_prompt_length": 64, "assistant_response_length": [2, 3],
         "tool_call_output_length": [5, 7], "tool_call_latency": [0.001, 0.002],
         "final_assistant_response_length": 4},
        {"num_turns": 1, "input_prompt_length": 30, "assistant_response_length": [2],
         "tool_call_output_length": [2], "tool_call_latency": [0.0],
         "final_assistant_response_length": 2}])
    report = replay(tmp_path, {"trace_format": "applied_compute_agentic", "trace_paths": [path],
                               "trace_block_size": 16, "load_type": "concurrency",
                               "concurrency": 1, "shared_prefix_ratio": 0.5,
                               "num_prefix_groups": 1})
    assert rows_of(report, "arrival_time_ms", "input_length", "output_length") == [
        (0.0, 64, 2), (26.0, 71, 3), (58.0, 81, 4), (93.0, 30, 2), (118.0, 34, 2)]
    assert {r["session_id"] for r in report["per_request"]} == {
        "applied_compute_agentic_session_1", "applied_compute_agentic_session_2"}
    assert report["summary"]["prefix_cache_reused_ratio"] == pytest.approx(0.5714285714285714)


def test_dynamo_errors_are_located(tmp_path: Path) -> None:
    """Each problem names file, line, the value's columns and its JSON path, inside an
    `{"event": ...}` wrapper too; every record is checked."""
    bad_type = record("b", 1000100, 50.0, 40, 3, [11])
    bad_type["request"]["replay"]["input_length"] = "40"
    wrapped = {"event": record("c", 1000100, 20.0, 20, 1, [21, 22])}
    wrapped["event"]["request"]["replay"]["input_sequence_hashes"] = [21, -1]
    lines = [json.dumps(record("a", 1000000, 30.0, 32, 2, [11, 12])), json.dumps(bad_type),
             json.dumps(wrapped), json.dumps(record("a", 1000300, 1.0, 16, 1, [5])),
             json.dumps(record("e", 1000300, 1.0, 64, 1, [5]))]
    path = write(tmp_path / "t.jsonl", lines)
    trace, found = read_dynamo([(path, "t.jsonl")])
    assert trace is None
    got = [(d.rule, d.span.line, d.span.path) for d in found]
    assert got == [("TRACE-FIELD", 2, "$.request.replay.input_length"),
                   ("TRACE-VALUE", 3, "$.event.request.replay.input_sequence_hashes[1]"),
                   ("TRACE-VALUE", 4, "$.request.request_id"),
                   ("TRACE-CAPACITY", 5, "$.request.replay.input_length")]
    first = found[0]
    assert lines[1][first.span.column - 1:first.span.end_column - 1] == '"40"'
    assert found[1].span.file == "t.jsonl"
    assert [d.message for d in found[:2]] == [
        '`request.replay.input_length` must be an integer, found string "40"',
        "`request.replay.input_sequence_hashes[1]` must be in 0..18446744073709551615, found -1"]


def test_dynamo_trace_level_refusals(tmp_path: Path) -> None:
    """Mixed agent_context, mixed or unexpected block sizes and a negative recorded gap are
    refused at the record at fault (the reference refuses them too)."""
    mixed = write(tmp_path / "m.jsonl", [record("a", 1, 1.0, 4, 1, [1], "s"),
                                        record("b", 2, 1.0, 4, 1, [1])])
    assert [d.rule for d in read_dynamo([(mixed, mixed)])[1]] == ["TRACE-VALUE"]
    sizes = write(tmp_path / "s.jsonl", [record("a", 1, 1.0, 4, 1, [1]),
                                        record("b", 2, 1.0, 4, 1, [1], bs=8)])
    found = read_dynamo([(sizes, sizes)])[1]
    assert [(d.rule, d.span.line) for d in found] == [("TRACE-BLOCK-SIZE", 2)]
    one = write(tmp_path / "o.jsonl", [record("a", 1, 1.0, 4, 1, [1])])
    assert [d.rule for d in read_dynamo([(one, one)], expected_block_size=32)[1]] == [
        "TRACE-BLOCK-SIZE"]
    overlap = write(tmp_path / "g.jsonl", [record("mm", 1000050, 20.0, 20, 1, [21, 22], "s2"),
                                          record("bb", 1000060, 20.0, 20, 1, [21, 22], "s2")])
    found = read_dynamo([(overlap, overlap)])[1]
    assert [(d.rule, d.span.line) for d in found] == [("TRACE-GRAPH", 2)]
    assert "negative dependency delay" in found[0].message


def test_applied_compute_errors_are_located(tmp_path: Path) -> None:
    """Per-turn lists must hold num_turns values; a missing field, a bad latency and an unknown
    field (a warning) are reported at their line and value."""
    path = write(tmp_path / "s.jsonl", [
        {"num_turns": 2, "input_prompt_length": 8, "assistant_response_length": [1],
         "tool_call_output_length": [1, 1], "tool_call_latency": [0.1, 0.1],
         "final_assistant_response_length": 1},
        {"num_turns": 0, "input_prompt_length": 8, "assistant_response_length": [],
         "tool_call_output_length": [], "tool_call_latency": [], "extra": 1},
        {"num_turns": 1, "input_prompt_length": 8, "assistant_response_length": [1],
         "tool_call_output_length": [1], "tool_call_latency": [-1.0],
         "final_assistant_response_length": 1}])
    rows, found = read_applied_compute(path, "s.jsonl", block_size=4)
    assert rows is None
    assert [(d.rule, d.span.line, d.span.path) for d in found] == [
        ("TRACE-VALUE", 1, "$.assistant_response_length"),
        ("TRACE-UNKNOWN-FIELD", 2, None),
        ("TRACE-MISSING", 2, "$"),
        ("TRACE-VALUE", 3, "$.tool_call_latency[0]")]


@pytest.mark.parametrize("reader", ["dynamo", "applied_compute"])
def test_lines_that_are_not_objects_and_unreadable_files(reader: str, tmp_path: Path) -> None:
    """Both readers locate bad UTF-8 and non-object lines at their line and read on; a folder
    given as the trace is TRACE-PATH alone."""
    def read(path: str) -> list[tuple[str, int | None, int | None]]:
        if reader == "dynamo":
            found = read_dynamo([(path, "t.jsonl")])[1]
        else:
            found = read_applied_compute(path, "t.jsonl", block_size=4)[1]
        return [(d.rule, d.span.line, d.span.column) for d in found
                if d.rule in ("TRACE-ENCODING", "TRACE-JSON", "TRACE-PATH")]

    bad = tmp_path / "t.jsonl"
    bad.write_bytes(b'{"a": 1}\n\n{"b": "\xff"}\n[1]\n{"c": NaN}\n')
    assert read(str(bad)) == [("TRACE-ENCODING", 3, 8), ("TRACE-JSON", 4, 1),
                              ("TRACE-JSON", 5, 7)]
    assert read(str(tmp_path)) == [("TRACE-PATH", None, None)]


def test_applied_compute_needs_concurrency_load(tmp_path: Path) -> None:
    """The sessions have no first-turn times: trace_timestamps load is refused."""
    path = write(tmp_path / "s.jsonl", [{
        "num_turns": 0, "input_prompt_length": 8, "assistant_response_length": [],
        "tool_call_output_length": [], "tool_call_latency": [],
        "final_assistant_response_length": 1}])
    with pytest.raises(WorkloadError) as refused:
        replay(tmp_path, {"trace_format": "applied_compute_agentic", "trace_paths": [path],
                          "trace_block_size": 16})
    assert [d.rule for d in refused.value.diagnostics] == ["WORKLOAD-LOAD"]


def test_converted_files_replay_like_their_sources(tmp_path: Path) -> None:
    """`kvreplay trace convert` writes Mooncake rows (standard Dynamo, Applied Compute) or an
    Agentic Mooncake v2 file (agentic Dynamo) that replay exactly like the source."""
    from kvreplay.cli.main import main

    examples = Path(__file__).resolve().parents[2] / "examples" / "traces"
    cases = [
        ("dynamo-requests.jsonl", [], "mooncake", {"trace_block_size": 64}, {}),
        ("dynamo-agentic.jsonl", [], "agentic_mooncake", {}, {}),
        ("applied-compute-sessions.jsonl", ["--block-size", "64"], "mooncake",
         {"trace_block_size": 64, "load_type": "concurrency", "concurrency": 2},
         {"trace_format": "applied_compute_agentic"}),
    ]
    for name, flags, target, extra, source_extra in cases:
        out = tmp_path / f"{name}.out"
        assert main(["trace", "convert", str(examples / name), *flags, "-o", str(out),
                     "--quiet"]) == 0
        source = {"trace_format": "dynamo", "trace_paths": [str(examples / name)], **extra,
                  **source_extra}
        converted = {"trace_format": target, "trace_paths": [str(out)], **extra}
        if target == "agentic_mooncake":
            source.pop("trace_block_size", None)
        ours, theirs = replay(tmp_path, source, "Qwen/Qwen3-0.6B"), replay(
            tmp_path, converted, "Qwen/Qwen3-0.6B")
        keys = ("arrival_time_ms", "first_token_ms", "last_token_ms", "input_length",
                "output_length", "reused_input_tokens", "session_id")
        assert rows_of(ours, *keys) == rows_of(theirs, *keys), name
        for key in ("duration_ms", "prefix_cache_reused_ratio", "agentic_graph"):
            assert ours["summary"].get(key) == theirs["summary"].get(key), (name, key)
