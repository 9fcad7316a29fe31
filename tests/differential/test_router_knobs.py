"""KV-router knobs on hand-made scenarios whose decision flips at a value derived by hand.

Two workers (A takes the first request; which one that is, the reference draws at random, so
decisions are compared as "same worker as the first request or not"). Fixed timing, 4-token
blocks. Each test asserts kvreplay's decisions on both sides of the flip; with the reference
installed, the reference's too.
"""

from __future__ import annotations

import os
from typing import Any

import harness
import pytest

P = list(range(1, 9))


def _rank(**changes: Any) -> dict[str, Any]:
    rank = {"backend": "vllm", "block_size": 4, "kv_cache_bytes_per_token": 250000,
            "num_gpu_blocks": 64, "max_num_seqs": 8, "max_num_batched_tokens": 64,
            "timing_model": {"type": "fixed", "prefill_ms": 2.0, "decode_ms": 1.0}}
    rank.update(changes)
    return rank


def _row(t: float, hashes: list[int], out: int = 1) -> dict[str, Any]:
    return {"timestamp": t, "hash_ids": hashes, "input_length": 4 * len(hashes),
            "output_length": out}


def _scenario(rows: list[dict[str, Any]], rank: dict[str, Any],
              router: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "hand", "seed": 0, "block_size": 4, "trace_format": "mooncake", "dp": 1,
            "workers": 2, "rank": rank, "rows": rows, "router": router}


def _sides(report: dict[str, Any]) -> list[str]:
    """Per request in arrival order: "A" when on the first request's worker, else "B"."""
    rows = sorted(report["per_request"], key=lambda r: r["arrival_time_ms"])
    workers = [r["routing_history"][0]["logical_worker_id"] for r in rows]
    return ["A" if w == workers[0] else "B" for w in workers]


def _engines() -> list[str]:
    os.environ.setdefault("DYN_LOG", "error")
    try:
        import dynamo.replay  # noqa: F401
    except ImportError:
        return ["kvreplay"]
    return ["kvreplay", "reference"]


def _run(engine: str, scn: dict[str, Any]) -> dict[str, Any]:
    return harness.run_kvreplay(scn) if engine == "kvreplay" else harness.run_reference(scn)


def _decay(decay: float, new_blocks: int) -> dict[str, Any]:
    """A holds the 8-block prefix P and, from t=100, 8 more prefill tokens (2 blocks) of a
    request still prefilling (50 ms passes); at t=101 a request of P + `new_blocks` arrives.
    cost_A = 2*2 + 2*g + 2*8 - f*8 and cost_B = 2*8 + 2*g (prefill + decode blocks), with
    f = 1 / (1 + decay * 2 / (8 + g)): A wins iff f > 1/2 iff decay < (8 + g) / 2."""
    rows = [_row(0, P), _row(100, P + [101, 102]),
            _row(101, P + [201 + i for i in range(new_blocks)])]
    rank = _rank(timing_model={"type": "fixed", "prefill_ms": 50.0, "decode_ms": 1.0},
                 max_num_batched_tokens=256)
    return _scenario(rows, rank, {"overlap_score_credit_decay": decay})


@pytest.mark.parametrize("engine", _engines())
@pytest.mark.parametrize(("decay", "new_blocks", "side"), [
    (0.0, 2, "A"), (4.9, 2, "A"), (5.1, 2, "B"), (6.9, 6, "A"), (7.1, 6, "B")])
def test_overlap_credit_decays_with_the_prefill_backlog(engine: str, decay: float,
                                                        new_blocks: int, side: str) -> None:
    """The flip is at decay (8 + g) / 2: 5 for g = 2, 7 for g = 6."""
    assert _sides(_run(engine, _decay(decay, new_blocks))) == ["A", "A", side]


def _active(weight: float) -> dict[str, Any]:
    """B (the first request's worker, "A" in the sides) holds 3 long decodes of one 6-block
    prompt: 6 active blocks, 3 requests; the other worker one decode of 10 blocks. A new
    2-block request: cost = 2 (prefill) + active blocks + 2 + weight * requests, so it joins
    the three iff 6 + 3w < 10 + w iff w < 2."""
    k, m = list(range(1, 7)), list(range(101, 111))
    rows = [_row(0, k, 200), _row(10, k, 200), _row(20, k, 200), _row(30, m, 200),
            _row(40, [201, 202])]
    return _scenario(rows, _rank(max_num_seqs=16, num_gpu_blocks=2048),
                     {"decode_active_request_weight": weight})


@pytest.mark.parametrize("engine", _engines())
@pytest.mark.parametrize(("weight", "side"), [(0.0, "A"), (1.9, "A"), (2.1, "B"), (2.9, "B")])
def test_active_requests_weigh_on_the_cost(engine: str, weight: float, side: str) -> None:
    """Below a weight of 2 the three short-prompt decodes are cheaper; above, the one."""
    assert _sides(_run(engine, _active(weight))) == ["A", "A", "A", "B", side]


def _queue(policy: str) -> dict[str, Any]:
    """One worker, budget 16, threshold 0.5: busy while more than 8 prefill tokens are booked.
    Six requests arrive 1 ms apart during the first 12-token prefill (2 ms passes): the queue
    drains in the policy's order."""
    rows = [_row(0, [1, 2, 3], 3), _row(1, [11, 12, 13], 3), _row(2, [21, 22, 23], 3),
            _row(3, [31], 3), _row(4, [41, 42], 3), _row(5, [51, 52, 53], 3)]
    scn = _scenario(rows, _rank(max_num_batched_tokens=16),
                    {"queue_threshold": 0.5, "queue_policy": policy})
    scn["workers"] = 1
    return scn


def _releases(report: dict[str, Any]) -> list[tuple[float, list[float]]]:
    """(release time, arrival times of the requests released then) in time order."""
    out: dict[float, list[float]] = {}
    for row in report["per_request"]:
        h = row["routing_history"][0]
        if h["outcome"] == "queued":
            at = round(h["queue_entered_at_ms"] + h["queue_wait_ms"], 6)
            out.setdefault(at, []).append(row["arrival_time_ms"])
            assert row["first_admit_ms"] >= at
        else:
            assert h["queue_entered_at_ms"] is None and h["queue_wait_ms"] == 0.0
    return [(at, sorted(arrivals)) for at, arrivals in sorted(out.items())]


@pytest.mark.parametrize("engine", _engines())
@pytest.mark.parametrize(("policy", "releases"), [
    # R0 books 12 tokens (busy) and runs 0-2; R1 (queued at 1) leaves at R0's first token (2)
    # and books 12; the next release is at R1's first token (5), with R2-R4 queued: fcfs lets
    # R2 out (12 booked, busy); lcfs R4 (8, not above 8) and then R3 (busy); wspt the shortest,
    # R3 (4) and then R4 (12). R5 arrives at 5, after that release.
    ("fcfs", [(2.0, [1.0]), (5.0, [2.0]), (8.0, [3.0, 4.0]), (11.0, [5.0])]),
    ("lcfs", [(2.0, [1.0]), (5.0, [3.0, 4.0]), (8.0, [5.0]), (11.0, [2.0])]),
    ("wspt", [(2.0, [1.0]), (5.0, [3.0, 4.0]), (8.0, [2.0]), (11.0, [5.0])]),
])
def test_router_queue_releases_in_policy_order(engine: str, policy: str,
                                               releases: list[tuple[float, list[float]]]
                                               ) -> None:
    """Queued requests leave when a prefill completes, while the worker is not busy, in
    arrival order (fcfs), reverse order (lcfs) or shortest uncached prompt first (wspt)."""
    assert _releases(_run(engine, _queue(policy))) == releases


@pytest.mark.parametrize("engine", _engines())
def test_round_robin_ignores_the_queue(engine: str) -> None:
    """The queue belongs to the KV router: with round robin and the same knobs, every request
    is placed at arrival (the reference's behaviour too)."""
    scn = {**_queue("fcfs"), "router_mode": "round_robin"}
    assert {r["routing_history"][0]["outcome"]
            for r in _run(engine, scn)["per_request"]} == {"immediate"}
    assert {r["routing_history"][0]["outcome"]
            for r in _run(engine, _queue("fcfs"))["per_request"]} == {"immediate", "queued"}
