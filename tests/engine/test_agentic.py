"""Agentic replay (engine.md sections 1.1, 6, 7, 9 example 5) with exact numbers.

Every number here is also the reference engine's (tests/engine/test_agentic_reference.py
replays the corpus cases on both engines).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agentic_support import BASE_RANK, CASES_DIR, cases, run_case, run_trace

import kvreplay

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def by_suffix(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Rows keyed by the request id's local part (`outer:2`, `outer:1:inner:0`)."""
    return {r["request_id"].split(":request:")[1]: r for r in report["per_request"]}


def example(name: str, *overrides: str) -> dict[str, Any]:
    outcome = kvreplay.run_spec(EXAMPLES / name, overrides=list(overrides))
    assert outcome.ok, (outcome.refusals, outcome.error, outcome.diagnostics)
    assert outcome.report is not None
    return outcome.report


def test_agentx_example_restores_eight_tokens() -> None:
    """agentx-g2-local as shipped: the parent's resumed turn (arrival 200) restores 8 host
    tokens, is admitted at 202, TTFT 4; every other turn TTFT 2, no reuse; committed 28."""
    report = example("agentx-g2-local.yaml")
    rows = by_suffix(report)
    resumed = rows["outer:2"]
    assert (resumed["arrival_time_ms"], resumed["first_admit_ms"], resumed["ttft_ms"]) == (
        200.0, 202.0, 4.0)
    assert (resumed["first_admission_g1_reused_input_tokens"],
            resumed["first_admission_host_reused_input_tokens"]) == (0, 8)
    for key in ("outer:0", "outer:1:inner:0", "outer:3"):
        assert (rows[key]["ttft_ms"], rows[key]["reused_input_tokens"]) == (2.0, 0)
    assert report["summary"]["committed_prefill_tokens"] == 28
    assert report["summary"]["completed_requests"] == 4


def test_agentx_example_slow_restore_and_hbm_only() -> None:
    """h2d 0.1 GB/s: admitted at 220, TTFT 22. Without G2: 4 complete, 36 committed, no reuse."""
    slow = by_suffix(example("agentx-g2-local.yaml", "engine.workers.aggregated.kv_cache."
                             "host_offload.h2d_bandwidth_gbps=0.1"))["outer:2"]
    assert (slow["first_admit_ms"], slow["ttft_ms"]) == (220.0, 22.0)
    plain = example("agentx-g2-local.yaml",
                    "engine.workers.aggregated.kv_cache.host_offload=null")
    assert plain["summary"]["completed_requests"] == 4
    assert plain["summary"]["committed_prefill_tokens"] == 36
    assert all(r["reused_input_tokens"] == 0 for r in plain["per_request"])
    assert "first_admission_host_reused_input_tokens" not in plain["per_request"][0]


def test_agentx_shared_variants_count_the_pool_and_the_reuse_once() -> None:
    """cluster_shared (aggregated) and the 1P1D example: one g2_domains entry of capacity 8,
    and the restored 8 tokens counted once per request."""
    shared = example("agentx-g2-local.yaml",
                     "engine.workers.aggregated.kv_cache.host_offload.scope=cluster_shared")
    pd = example("agentx-g2-shared-pd.yaml")
    for report in (shared, pd):
        (domain,) = report["summary"]["g2_domains"]
        assert domain["capacity_blocks"] == 8
        host = [r["first_admission_host_reused_input_tokens"] for r in report["per_request"]]
        assert sorted(host) == [0, 0, 0, 8]
    resumed = by_suffix(pd)["outer:2"]
    assert [(a["pool"], a["host_reused_input_tokens"]) for a in resumed["admission_history"]] == [
        ("prefill", 8), ("decode", 0)]


def test_report_carries_the_agentic_identity_and_summary() -> None:
    """Rows: request, play, conversation, lane, root and parent ids; summary: graph identity,
    play outcomes, lifecycle count and digest, nested-timestamp basis, trajectories."""
    report = example("agentx-g2-local.yaml")
    child = by_suffix(report)["outer:1:inner:0"]
    ns = child["request_id"].split(":request:")[0]
    assert child["agentic"] == {
        "request_id": f"{ns}:request:outer:1:inner:0",
        "play_id": f"{ns}:play:g2-parent-resume",
        "conversation_id": f"{ns}:session:subagent:1:pressure",
        "lane_id": "lane:0", "root_id": f"{ns}:request:outer:0",
        "parent_id": f"{ns}:request:outer:0"}
    assert child["session_id"] == child["agentic"]["conversation_id"]
    summary = report["summary"]
    assert summary["agentic_graph"]["graph_digest"] == (
        "aebf0afd71820b141bc7f605e3224a1282f556296bece75537ed2204b8eb9f66")
    assert summary["agentic_play_outcomes"] == [
        {"play_id": f"{ns}:play:g2-parent-resume", "status": "completed",
         "causal_terminal_ms": 302.0, "settled_at_ms": 302.0}]
    assert summary["agentic_lifecycle_event_count"] == 13
    assert summary["weka_nested_timestamp_basis"] == "absolute"
    assert (summary["total_trajectories"], summary["completed_trajectories"]) == (1, 1)
    assert summary["mean_trajectory_e2e_latency_ms"] == 302.0


def test_uuids_follow_the_request_id_order() -> None:
    """Graph ordinals sort request ids as strings, so outer:10 precedes outer:2."""
    report = run_case("many_outer_entries")
    rows = sorted(report["per_request"], key=lambda r: r["uuid"])
    names = [r["request_id"].split(":request:")[1] for r in rows]
    assert names[:4] == ["outer:0", "outer:1", "outer:10:inner:0", "outer:11"]
    assert names.index("outer:11") < names.index("outer:2")


@pytest.mark.parametrize(("lanes", "starts"), [(1, [0.0, 23.0, 36.0]), (2, [0.0, 0.0, 13.0]),
                                               (None, [0.0, 0.0, 0.0])])
def test_lanes_start_the_next_play_when_one_settles(lanes: int | None,
                                                    starts: list[float]) -> None:
    """Three plays: one lane runs them back to back, two lanes let the third take the first
    free lane, no lane limit starts every play at 0 (and rows carry no lane id)."""
    report = run_case("multi_play_1lane", agentic_lanes=lanes)
    first: dict[str, float] = {}
    for row in report["per_request"]:
        play = row["play_id"]
        first[play] = min(first.get(play, float("inf")), row["arrival_time_ms"])
    order = [o["play_id"] for o in report["summary"]["agentic_play_outcomes"]]
    assert [first[p] for p in order] == starts
    assert all(("lane_id" in r["agentic"]) == (lanes is not None) for r in report["per_request"])


def test_a_rejected_child_fails_its_play_and_skips_the_parents_next_turn() -> None:
    """weka-relative.json (relative basis) with max_model_len 6: the second child request is
    rejected at 24 ms; 3 issued, 2 completed, the play failed naming that child, one skipped
    event for the parent's next turn, and the transcript ends with play_quiescent."""
    lines: list[str] = []
    rank = {**BASE_RANK, "max_model_len": 6}
    report = run_trace(CASES_DIR / "weka-relative.json", lifecycle=lines,
                       extra_engine_args={"engine": rank}, execution_model="model",
                       weka_nested_timestamp_basis="auto")
    summary = report["summary"]
    assert (summary["num_requests"], summary["completed_requests"]) == (3, 2)
    (outcome,) = summary["agentic_play_outcomes"]
    assert outcome["status"] == "failed" and outcome["failure_status"] == "rejected"
    assert outcome["failure_request_id"].endswith(":request:outer:1:inner:1")
    events = [json.loads(line) for line in lines]
    skipped = [e for e in events if e["event"] == "skipped"]
    assert len(skipped) == 1 and skipped[0]["request_id"].endswith(":request:outer:2")
    assert events[-1]["event"] == "play_quiescent" and len(events) == 11
    assert summary["weka_nested_timestamp_basis"] == "relative"
    assert summary["agentic_lifecycle_event_count"] == len(events)


def test_the_nested_timestamp_basis_moves_the_subagents_requests() -> None:
    """w05 (absolute inner times) read as relative: the subagent's requests arrive 20 ms later
    (its marker's time), the others do not move (the reference's figures, in
    test_agentic_reference.py's cases absolute_json_explicit / absolute_json_as_relative)."""
    arrivals = {}
    for name in ("absolute_json_explicit", "absolute_json_as_relative"):
        report = run_case(name)
        arrivals[name] = {r["request_id"].split(":request:")[1]: r["arrival_time_ms"]
                          for r in report["per_request"]}
    assert arrivals["absolute_json_explicit"] == {
        "outer:0": 0.0, "outer:1:inner:0": 21.0, "outer:1:inner:1": 26.0, "outer:2": 50.0}
    assert arrivals["absolute_json_as_relative"] == {
        "outer:0": 0.0, "outer:1:inner:0": 41.0, "outer:1:inner:1": 46.0, "outer:2": 50.0}


def test_lifecycle_digest_is_the_transcripts() -> None:
    """The reported digest is BLAKE3 over the domain and the transcript lines, and every event
    of a completed play appears: 3 per request and one play_quiescent."""
    import blake3

    lines: list[str] = []
    report = run_case("blocking_duration")
    again = run_trace(CASES_DIR / "w01_blocking_duration.jsonl", lifecycle=lines)
    digest = blake3.blake3(b"aisimulate-agentic-lifecycle-v1\0" + "".join(lines).encode())
    assert report["summary"]["agentic_lifecycle_digest"] == digest.hexdigest()
    assert len(lines) == 3 * len(report["per_request"]) + 1
    assert again["summary"] == report["summary"]


def test_weka_and_its_v2_form_replay_identically(tmp_path: Path) -> None:
    """A Weka corpus and its `kvreplay trace convert` output give the same graph digest and
    byte-identical reports (ids, times, reuse, outcomes, lifecycle digest)."""
    from kvreplay.engine.report import dumps_report
    from kvreplay.engine.traces.agentic.weka import read_weka

    for trace in ("w10_multi_subagent.jsonl", "w11_multi_play.jsonl", "w22_dir"):
        graph, found = read_weka(str(CASES_DIR / trace))
        assert graph is not None, found
        v2 = tmp_path / f"{trace}.v2.jsonl"
        v2.write_text("".join(line + "\n" for line in graph.v2_lines()))
        weka = run_trace(CASES_DIR / trace, agentic_lanes=2)
        converted = run_trace(v2, agentic_lanes=2, trace_format="agentic_mooncake")
        weka["summary"].pop("weka_nested_timestamp_basis")
        assert weka["summary"]["agentic_graph"]["graph_digest"] == (
            converted["summary"]["agentic_graph"]["graph_digest"])
        assert dumps_report(weka) == dumps_report(converted)


def test_a_plain_run_keeps_its_next_release_until_something_moves_it() -> None:
    """A plain run answers from memory until a release or feedback (here the heap is emptied
    behind its back: only a release makes it look again)."""
    from kvreplay.engine.agentic.driver import AgenticWorkload
    from kvreplay.engine.traces.agentic.weka import read_weka

    graph, found = read_weka(str(CASES_DIR / "w03_async.jsonl"), basis="absolute")
    assert graph is not None, found
    graph.normalize_starts()
    workload = AgenticWorkload(graph, lanes=1, target_model="m")
    first = workload.next_release_ms()
    assert first is not None
    workload._heap.clear()
    assert workload.next_release_ms() == first
    assert workload.release(first) == []
    assert workload.next_release_ms() is None


def test_a_plain_run_is_event_driven_and_reports_as_when_acting_at_every_instant() -> None:
    """A plain run (no snapshot) does not act at instants: the loop never calls its at_instant,
    and every plain corpus case reports byte for byte what it reports when the workload is made
    to act at every instant (feedback flushed there, the next release asked at each)."""
    from kvreplay.engine.report import dumps_report

    calls: list[float] = []

    def counted(workload: Any) -> None:
        assert workload.acts_at_instants is False
        inner = workload.at_instant
        workload.at_instant = lambda now: calls.append(now) or inner(now)

    def acting(workload: Any) -> None:
        workload.acts_at_instants = True

    loads = ("agentic_snapshot_seed", "agentic_warmup", "agentic_profile")
    compared = 0
    for name, case in cases().items():
        if any(key in case["params"] for key in loads):
            continue
        trace = CASES_DIR / case["trace"]
        event_driven = run_trace(trace, defaults=False, adjust=counted, **case["params"])
        every = run_trace(trace, defaults=False, adjust=acting, **case["params"])
        for report in (event_driven, every):
            report.pop("meta", None)
            report["summary"].pop("wall_time_ms", None)
        assert dumps_report(event_driven) == dumps_report(every), name
        compared += 1
    assert calls == []
    assert compared >= 40


def test_the_lifecycle_digest_hashes_its_lines_in_chunks_as_one_stream() -> None:
    """Past several chunks of lines, with a digest asked in the middle, the digest is still
    BLAKE3 over the domain and every line written, in order."""
    import blake3

    from kvreplay.engine.agentic.lifecycle import CHUNK, DOMAIN, Lifecycle

    lines: list[str] = []
    life = Lifecycle(lines.append)
    middle = None
    for k in range(3 * CHUNK + 7):
        life.event(k * 0.5, f"play-{k % 5}", f"r{k}" if k % 9 else None, "dispatch")
        if k == CHUNK + 3:
            middle = life.digest()
    assert middle == blake3.blake3(DOMAIN + "".join(lines[:CHUNK + 4]).encode()).hexdigest()
    assert life.digest() == blake3.blake3(DOMAIN + "".join(lines).encode()).hexdigest()
    assert life.count == len(lines) == 3 * CHUNK + 7


def test_the_graph_digest_does_not_depend_on_its_chunk_size(monkeypatch: Any) -> None:
    """The graph digest hashes its nodes in chunks: one node a chunk, three, or all of them at
    once give the same digest (the reference's, tests/engine/test_agentic_reference.py)."""
    from kvreplay.engine.traces.agentic import graph as graphs
    from kvreplay.engine.traces.agentic.weka import read_weka

    graph, found = read_weka(str(CASES_DIR / "w11_multi_play.jsonl"))
    assert graph is not None, found
    assert len(graph.nodes) > 3
    digests = set()
    for size in (1, 3, len(graph.nodes), 256):
        monkeypatch.setattr(graphs, "DIGEST_CHUNK", size)
        digests.add(graph.digest())
    assert len(digests) == 1


def test_an_agentic_corpus_is_read_without_collections_and_the_collector_restored(
        monkeypatch: Any) -> None:
    """Reading and lowering the plays runs with the cyclic collector off (a bulk load), and
    the collector is left as it was found, on or off."""
    import gc

    from kvreplay.engine.traces.agentic import weka

    seen: list[bool] = []
    real = weka.read_weka

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(weka, "read_weka", recording)
    was = gc.isenabled()
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            report = run_trace(CASES_DIR / "w03_async.jsonl")
            assert report["summary"]["completed_requests"] > 0
            assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
    assert seen == [False, False]
