"""Differential scenarios of the converted trace formats (harness.py's `dynamo` and
`applied-compute` kinds): a random Dynamo request trace (standard or agentic, over 1-3 files)
or Applied Compute agentic sessions, replayed on a small aggregated round-robin deployment.

Both engines read the same files: the reference through its own readers
(`trace_format="dynamo"` / `"applied_compute_agentic"`), kvreplay through its readers and the
Mooncake or Agentic Mooncake v2 replay they lower to.
"""

from __future__ import annotations

import random
from typing import Any

SCHEMA = "dynamo.request.trace.v1"
MODEL = "diff"  # the deployment's model (harness.AGENTIC_MODEL)


def _rank(rng: random.Random, bs: int, blocks: int) -> dict[str, Any]:
    return {"backend": "vllm", "block_size": bs, "num_gpu_blocks": blocks,
            "kv_cache_bytes_per_token": 250000, "max_num_seqs": rng.choice([1, 2, 3, 4]),
            "max_num_batched_tokens": rng.choice([8, 16, 32]), "enable_chunked_prefill": True,
            "preemption_mode": rng.choice(["lifo", "fifo"]),
            "timing_model": {"type": "fixed", "prefill_ms": rng.choice([1.0, 2.0, 3.0]),
                             "decode_ms": rng.choice([0.5, 1.0, 2.0])}}


def applied_compute_scenario(rng: random.Random, scn: dict[str, Any],
                             blocks: int) -> dict[str, Any]:
    """1-5 sessions of 0-3 tool turns, a closed loop of 1-3 sessions, sometimes a shared prefix
    family."""
    bs = scn["block_size"]
    ratio = rng.choice([0.0, 0.0, 0.25, 0.5, 1.0])
    groups = rng.choice([1, 2, 3]) if ratio else 0
    concurrency = rng.choice([1, 2, 3])
    rows = []
    for _ in range(rng.randint(1, 5)):
        turns = rng.choice([0, 1, 1, 2, 3])
        rows.append({
            "num_turns": turns, "input_prompt_length": rng.randint(1, 3 * bs),
            "assistant_response_length": [rng.randint(0, 3) for _ in range(turns)],
            "tool_call_output_length": [rng.randint(0, 4) for _ in range(turns)],
            "tool_call_latency": [rng.choice([0.0, 0.0005, 0.001, 0.0025, 0.01])
                                  for _ in range(turns)],
            "final_assistant_response_length": rng.randint(1, 3)})
    scn.update(trace_format="applied_compute_agentic", rank=_rank(rng, bs, blocks),
               workers=rng.choice([1, 1, 2]), dp=1, rows=rows,
               traffic={"load_type": "concurrency", "concurrency": concurrency,
                        "shared_prefix_ratio": ratio or None,
                        "num_prefix_groups": groups or None},
               replay={"replay_concurrency": concurrency, "trace_shared_prefix_ratio": ratio,
                       "trace_num_prefix_groups": groups})
    return scn


def dynamo_scenario(rng: random.Random, scn: dict[str, Any], blocks: int) -> dict[str, Any]:
    """A standard trace (timestamps or a closed loop) or, one time in two, an agentic one
    (sessions in sequence, child sessions spawned and joined through a tool call or by time),
    its records spread over 1-3 files, some wrapped in `{"event": ...}`, among skipped
    request_payload records."""
    bs = scn["block_size"]
    agentic = rng.random() < 0.5
    rows = _agentic_records(rng, bs) if agentic else _standard_records(rng, bs)
    for i, row in enumerate(rows):
        if rng.random() < 0.2:
            rows[i] = {"event": row}
    for _ in range(rng.randint(0, 2)):
        rows.insert(rng.randrange(len(rows) + 1), {
            "schema": SCHEMA, "event_type": "request_payload", "event_time_unix_ms": 1})
    files = rng.choice([1, 1, 2, 3])
    replay: dict[str, Any] = {"trace_block_size": bs if rng.random() < 0.5 else None}
    traffic: dict[str, Any] = {"trace_block_size": replay["trace_block_size"]}
    if agentic:
        replay["execution_model"] = MODEL
    elif rng.random() < 0.3:
        concurrency = rng.choice([1, 2])
        replay["replay_concurrency"] = concurrency
        traffic.update(load_type="concurrency", concurrency=concurrency)
    scn.update(trace_format="dynamo", rank=_rank(rng, bs, blocks),
               workers=rng.choice([1, 1, 2]), dp=1, rows=rows, files=files,
               file_of=[rng.randrange(files) for _ in rows], traffic=traffic, replay=replay)
    return scn


def _request(rid: str, start: int, total: float, length: int, output: int,
             hashes: list[int], bs: int, context: dict[str, Any] | None,
             rng: random.Random) -> dict[str, Any]:
    request: dict[str, Any] = {
        "request_id": rid, "model": "agent", "output_tokens": output,
        "request_received_ms": start, "total_time_ms": total,
        "replay": {"trace_block_size": bs, "input_length": length,
                   "input_sequence_hashes": hashes}}
    event_ms = start + _round(total)
    if rng.random() < 0.15:  # the start from the end time and the duration
        del request["request_received_ms"]
    elif rng.random() < 0.15:  # the end from the event time
        del request["total_time_ms"]
    record: dict[str, Any] = {"schema": SCHEMA, "event_type": "request_end",
                              "event_time_unix_ms": event_ms, "request": request}
    if context is not None:
        record["agent_context"] = context
    return record


def _round(ms: float) -> int:
    whole = int(ms)
    return whole + 1 if ms - whole >= 0.5 else whole


def _prompt(rng: random.Random, prefix: list[int], bs: int) -> tuple[int, list[int]]:
    used = rng.randint(1, len(prefix))
    hashes = prefix[:used]
    return len(hashes) * bs - rng.randrange(bs), hashes


def _standard_records(rng: random.Random, bs: int) -> list[dict[str, Any]]:
    prefixes = [[rng.randrange(1, 500) for _ in range(4)] for _ in range(rng.choice([1, 2]))]
    ids = rng.sample(range(100, 1000), 8)
    t = 1_000_000
    out = []
    for k in range(rng.randint(1, 8)):
        t += rng.choice([0, 0, 1, 2, 5, 10])
        length, hashes = _prompt(rng, rng.choice(prefixes), bs)
        out.append(_request(f"r{ids[k]}", t, rng.choice([0.0, 3.0, 4.5, 10.25, 20.0]), length,
                            rng.choice([1, 1, 2, 3, 4]), hashes, bs, None, rng))
    return out


def _agentic_records(rng: random.Random, bs: int) -> list[dict[str, Any]]:
    """A root session of 1-3 requests in sequence whose requests spawn child sessions (1-2
    requests) that a later root request joins, through a tool call or by their times."""
    prefix = [rng.randrange(1, 60) for _ in range(4)]
    ids = iter(rng.sample(range(100, 1000), 40))
    out: list[dict[str, Any]] = []
    t = 1_000_000
    root: list[tuple[str, int, int]] = []  # (id, start, end)
    turns = rng.randint(1, 3)
    children = []
    for k in range(turns):
        duration = rng.choice([2, 4, 6])
        length, hashes = _prompt(rng, prefix, bs)
        rid = f"r{next(ids)}"
        out.append(_request(rid, t, float(duration), length, rng.choice([1, 2, 3]), hashes, bs,
                            {"session_id": "root"}, rng))
        root.append((rid, t, t + duration))
        if k + 1 < turns and rng.random() < 0.6:
            children.append(k)
        t += duration + rng.choice([0, 1, 3, 8])
        if children and children[-1] == k:
            t += 12  # room for the child before the next root request
    for n, k in enumerate(children):
        parent_id, start, end = root[k]
        session = f"child{n}"
        c = start + rng.choice([0, 1, 2])
        child_ids = []
        for _ in range(rng.choice([1, 2])):
            length, hashes = _prompt(rng, prefix, bs)
            rid = f"r{next(ids)}"
            out.append(_request(rid, c, 2.0, length, 1, hashes, bs,
                                {"session_id": session, "parent_session_id": "root"}, rng))
            child_ids.append(rid)
            c += 2 + rng.choice([0, 1])
        if rng.random() < 0.5:
            consumer = root[k + 1][0] if rng.random() < 0.7 else None
            out.append({"schema": SCHEMA, "event_type": "tool_end",
                        "event_time_unix_ms": end + 1, "agent_context": {"session_id": "root"},
                        "tool": {"tool_call_id": f"tool{n}", "tool_class": "agent",
                                 "started_at_unix_ms": start, "ended_at_unix_ms": end + 1,
                                 "claude": {"source_request_id": parent_id,
                                            "consumer_request_id": consumer,
                                            "child_session_id": session,
                                            "execution_mode": "blocking" if consumer
                                            else "background"}}})
    return out
