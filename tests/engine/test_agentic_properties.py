"""Graph execution invariants over generated Weka plays (hypothesis).

Plays of plain turns, blocking subagents and background (async) subagents, with random times,
prompts and a small engine that sometimes rejects (max_model_len) or preempts, on 1-2 workers
and 0-2 lanes. Checked from the lifecycle transcript against the lowered graph.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentic_support import run_trace
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvreplay.engine.report import dumps_report
from kvreplay.engine.traces.agentic.graph import AgenticGraph
from kvreplay.engine.traces.agentic.weka import read_weka

MODEL = "synthetic-model"


@st.composite
def request(draw: st.DrawFn, t: float) -> dict[str, Any]:
    blocks = draw(st.integers(1, 4))
    hashes = draw(st.lists(st.integers(1, 12), min_size=blocks, max_size=blocks))
    return {"t": round(t, 3), "type": "s", "model": MODEL,
            "in": 4 * blocks - draw(st.integers(0, 3)), "out": draw(st.integers(0, 3)),
            "hash_ids": hashes, "api_time": draw(st.sampled_from([0.001, 0.002, 0.005]))}


@st.composite
def play(draw: st.DrawFn, name: str) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    t = 0.0
    for k in range(draw(st.integers(1, 4))):
        t += draw(st.sampled_from([0.0, 0.001, 0.004, 0.02]))
        kind = "s" if k == 0 else draw(st.sampled_from(["s", "s", "blocking", "async"]))
        if kind == "s":
            items.append(draw(request(t)))
            continue
        inner = []
        u = t
        for _ in range(draw(st.integers(1, 2))):
            u += draw(st.sampled_from([0.0, 0.002, 0.01]))
            inner.append(draw(request(u)))
        items.append({"t": round(t, 3), "type": "subagent", "agent_id": f"a{k}",
                      "subagent_type": "Explore",
                      "status": "completed" if kind == "blocking" else "async_launched",
                      "models": [MODEL], "requests": inner})
    return {"id": name, "models": [MODEL], "block_size": 4, "hash_id_scope": "local",
            "requests": items}


corpora = st.lists(st.integers(0, 0), min_size=1, max_size=3).flatmap(
    lambda ks: st.tuples(*[play(f"p{i}") for i in range(len(ks))]))
deployments = st.fixed_dictionaries({
    "blocks": st.sampled_from([6, 8, 64]), "seqs": st.integers(1, 4),
    "max_len": st.sampled_from([None, None, 10]), "workers": st.integers(1, 2),
    "lanes": st.sampled_from([None, 1, 2])})


def replay(path: Path, d: dict[str, Any], lines: list[str], fmt: str = "weka") -> dict[str, Any]:
    rank: dict[str, Any] = {"backend": "vllm", "block_size": 4, "num_gpu_blocks": d["blocks"],
                            "max_num_seqs": d["seqs"], "max_num_batched_tokens": 16,
                            "timing_model": {"type": "fixed", "prefill_ms": 2.0,
                                             "decode_ms": 1.0}}
    if d["max_len"] is not None:
        rank["max_model_len"] = d["max_len"]
    return run_trace(path, lifecycle=lines, extra_engine_args={"engine": rank},
                     num_workers=d["workers"], agentic_lanes=d["lanes"], trace_format=fmt,
                     execution_model=MODEL, weka_nested_timestamp_basis="absolute")


def check_execution(graph: AgenticGraph, events: list[dict[str, Any]],
                    lanes: int | None) -> None:
    """Each node once dispatched (then one terminal, one quiescent) or skipped; dispatches
    after their triggers; never more plays at once than lanes."""
    dispatch: dict[str, float] = {}
    terminal: dict[str, tuple[float, str]] = {}
    quiescent: set[str] = set()
    skipped: set[str] = set()
    active: set[str] = set()
    for e in events:
        rid, kind = e.get("request_id"), e["event"]
        if kind == "dispatch":
            assert rid not in dispatch and rid not in skipped
            dispatch[rid] = e["at_ms"]
            active.add(e["play_id"])
            assert lanes is None or len(active) <= lanes
        elif kind == "causal_terminal":
            assert rid in dispatch and rid not in terminal
            terminal[rid] = (e["at_ms"], e["status"])
        elif kind == "quiescent":
            assert rid in terminal and rid not in quiescent
            quiescent.add(rid)
        elif kind == "skipped":
            assert rid not in dispatch and rid not in skipped
            skipped.add(rid)
        else:
            active.discard(e["play_id"])
    ids = {n.request_id for n in graph.nodes}
    assert set(dispatch) | skipped == ids and not set(dispatch) & skipped
    assert set(terminal) == set(quiescent) == set(dispatch)
    for node in graph.nodes:
        if node.request_id not in dispatch:
            continue
        at = dispatch[node.request_id]
        for dep in node.dependencies:
            if dep.trigger == "dispatch":
                assert at >= dispatch[dep.request_id] + dep.delay_ms - 1e-6
            else:
                fired, status = terminal[dep.request_id]
                assert status == "completed"
                assert at >= fired + dep.delay_ms - 1e-6


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(plays=corpora, d=deployments)
def test_graph_execution_invariants(tmp_path_factory: Any, plays: tuple[dict[str, Any], ...],
                                    d: dict[str, Any]) -> None:
    """Generated corpora obey the execution invariants, rerun byte for byte, and their v2 form
    (`kvreplay trace convert`) replays to the same report."""
    folder = tmp_path_factory.mktemp("plays")
    path = folder / "plays.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in plays))
    graph, found = read_weka(str(path), basis="absolute")
    assert graph is not None, found
    lines: list[str] = []
    report = replay(path, d, lines)
    check_execution(graph, [json.loads(line) for line in lines], d["lanes"])
    again: list[str] = []
    assert dumps_report(replay(path, d, again)) == dumps_report(report) and again == lines
    v2 = folder / "plays.v2.jsonl"
    v2.write_text("".join(line + "\n" for line in graph.v2_lines()))
    converted: list[str] = []
    other = replay(v2, d, converted, fmt="agentic_mooncake")
    report["summary"].pop("weka_nested_timestamp_basis")
    assert dumps_report(other) == dumps_report(report) and converted == lines
