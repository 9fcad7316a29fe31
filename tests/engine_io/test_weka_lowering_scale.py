"""Weka lowering on plays of thousands of forks: the replay barriers, chain detection and seam
order grow with the play (a 4,000-request play of forks took 100 s: every target compared every
pair of frontier candidates), and give the graph that comparing every pair gives."""

from __future__ import annotations

import cProfile
import json
import pstats
import random
from pathlib import Path
from typing import Any

import pytest

from kvreplay.engine.traces.agentic.weka import EPS, _Item, _Stream, read_weka, replay_barriers


def _pairwise(members: list[_Stream]) -> dict[str, list[str]]:
    """The barriers as the reference states them: every other stream's best candidate, then
    every pair of the frontier compared."""
    out = {}
    for stream in members:
        for target in stream.items:
            frontier = []
            for other in members:
                if other is stream:
                    continue
                best = None
                for c in other.items:
                    if c.t < target.t and c.end <= target.t + EPS and (
                            best is None or (c.end, c.t, c.sid.encode()) >= (
                                best.end, best.t, best.sid.encode())):
                        best = c
                if best is not None:
                    frontier.append(best)
            out[target.sid] = [c.sid for c in frontier if not any(
                c.t < o.t and c.end <= o.t + EPS for o in frontier)]
    return out


def _streams(rnd: random.Random) -> list[_Stream]:
    streams = []
    order = 0
    for k in range(rnd.randint(1, 6)):
        items = []
        t = rnd.choice([0.0, 0.5, 1.0])
        for _ in range(rnd.randint(0, 8)):
            t += rnd.choice([0.0, 0.0000005, 0.001, 0.25, 1.0])
            end = t + rnd.choice([0.0, 0.0000009, 0.001, 0.3, 2.0])
            items.append(_Item(f"outer:{order}", order, t, end, None))  # type: ignore[arg-type]
            order += 1
        streams.append(_Stream(f"s{k}", items, None, "scope"))
    return streams


@pytest.mark.parametrize("seed", range(300))
def test_replay_barriers_equal_comparing_every_pair(seed: int) -> None:
    """Random streams (equal starts, ends within EPS of a start, overlaps, empty streams): the
    same frontier for every request, in stream order."""
    members = _streams(random.Random(seed))
    found = {target.sid: [c.sid for c in frontier] for target, frontier in
             replay_barriers(members)}
    expected = _pairwise(members)
    assert {sid: f for sid, f in found.items() if f} == {sid: f for sid, f in expected.items()
                                                           if f}


def _forking_play(path: Path, n: int) -> Path:
    """n requests where request i shares its first block with request i - n/4 only: n/4
    chains of four forks each, every one its own stream in one scope."""
    requests = [{"t": i * 0.01, "type": "s", "model": "m", "in": 8, "out": 2,
                 "hash_ids": [i % (n // 4), 10**6 + i]} for i in range(n)]
    path.write_text(json.dumps({"id": "forks", "models": ["m"], "block_size": 4,
                                "hash_id_scope": "local", "requests": requests}))
    return path


def _calls(path: Path) -> int:
    profile = cProfile.Profile()
    profile.enable()
    graph, found = read_weka(str(path))
    profile.disable()
    assert graph is not None, found
    return int(pstats.Stats(profile).total_calls)  # type: ignore[attr-defined]


def test_lowering_a_play_of_forks_grows_with_the_play(tmp_path: Path) -> None:
    """Python calls (deterministic, unlike time) lowering 1,000 then 2,000 forking requests:
    about twice as many, where pairwise frontiers made it eight times and a scan of every
    chain per request four."""
    small = _calls(_forking_play(tmp_path / "a.json", 1_000))
    large = _calls(_forking_play(tmp_path / "b.json", 2_000))
    assert large < 2.6 * small, (small, large)


def _random_play(path: Path, seed: int) -> Path:
    """A play of 300 requests whose hash ids extend, fork from and rejoin earlier ones (chains,
    forks, seams), with overlapping api times, equal starts and a few subagents."""
    rnd = random.Random(seed)
    prefixes: list[list[int]] = [[1]]
    entries: list[dict[str, Any]] = []
    t = 0.0
    fresh = 100
    for i in range(300):
        t += rnd.choice([0.0, 0.001, 0.01, 0.5])
        base = list(rnd.choice(prefixes[-20:] if rnd.random() < 0.7 else prefixes))
        cut = rnd.randint(1, len(base))
        hashes = base[:cut] + [fresh + k for k in range(rnd.randint(0, 3))]
        fresh += 4
        prefixes.append(hashes)
        request = {"t": round(t, 6), "type": "s", "model": "m", "in": 4 * len(hashes),
                   "out": 2, "hash_ids": hashes,
                   "api_time": rnd.choice([0.0, 0.0005, 0.002, 0.3])}
        if i and rnd.random() < 0.05:
            entries.append({"t": round(t, 6), "type": "subagent", "agent_id": f"a{i}",
                            "subagent_type": "Explore", "status": "async_launched",
                            "models": ["m"], "requests": [dict(request, t=round(t + 0.001, 6))]})
        else:
            entries.append(request)
    path.write_text(json.dumps({"id": f"r{seed}", "models": ["m"], "block_size": 4,
                                "hash_id_scope": "local", "requests": entries}))
    return path


@pytest.mark.reference
@pytest.mark.parametrize("seed", range(6))
def test_random_forking_plays_lower_to_the_reference_graph(tmp_path: Path, seed: int) -> None:
    """The graph digest (ids, sessions, hashes, delays, edges) of random plays of forks and
    seams equals the reference's, and of the 2,000-request play of forks."""
    replay = pytest.importorskip("dynamo.replay")
    path = _random_play(tmp_path / "p.json", seed) if seed else _forking_play(
        tmp_path / "p.json", 2_000)
    graph, found = read_weka(str(path), basis="absolute")
    assert graph is not None, found
    rank = {"block_size": 4, "num_gpu_blocks": 4096, "max_num_batched_tokens": 64,
            "max_num_seqs": 4}
    theirs = replay.run_trace_replay(
        [str(path)], extra_engine_args={"engine": rank}, num_workers=1,
        router_mode="round_robin", trace_format="weka", execution_model="m", agentic_lanes=1,
        weka_nested_timestamp_basis="absolute").summary["agentic_graph"]
    assert (graph.digest(), len(graph.nodes)) == (theirs["graph_digest"], theirs["node_count"])
