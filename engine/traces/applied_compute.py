"""Applied Compute agentic traces: one complete session per line, expanded into Mooncake turns.

A line `{num_turns, input_prompt_length, assistant_response_length[num_turns],
tool_call_output_length[num_turns], tool_call_latency[num_turns] (s),
final_assistant_response_length}` is one session of num_turns + 1 requests, as the reference
reads it (aisimulate-core's `from_applied_compute_agentic`): turn k's prompt is the session's
whole history so far (the first prompt, then each earlier answer and tool output), its output the
k-th answer (the last turn: the final answer), and it is released `tool_call_latency[k - 1]`
seconds after turn k - 1 ends. Prompt blocks get hash ids in file order from 1; with
`shared_prefix_ratio` and `num_prefix_groups`, the first round(ratio x blocks of the first
prompt) blocks of line i come from prefix group i mod groups. The source has no first-turn
times, so it replays under concurrency load only.
"""

from __future__ import annotations

import json
from typing import Any

from kvreplay.engine.traces.json_objects import json_objects
from kvreplay.engine.traces.mooncake_rows import MAX_TOKENS
from kvreplay.engine.traces.record_check import RecordCheck
from kvreplay.engine.traces.rules import diag
from kvreplay.schema.diagnostics import Diagnostic

FIELDS = ("num_turns", "input_prompt_length", "assistant_response_length",
          "tool_call_output_length", "tool_call_latency", "final_assistant_response_length")
PER_TURN = FIELDS[2:5]
MAX_TURNS = 100_000
MAX_LATENCY_S = 1e12  # the readers' bound on times, 1e15 ms
MAX_ERRORS = 200
GROUP_TAG = 0xA63E_0000_0000_0000  # the reference's shared-prefix hash ids: tag | group << 32 | k
Row = dict[str, Any]


def read_applied_compute(path: str, display: str, *, block_size: int,
                         shared_prefix_ratio: float = 0.0, num_prefix_groups: int = 0,
                         ) -> tuple[list[Row] | None, list[Diagnostic]]:
    """The sessions' turns as Mooncake rows (None when any error was found)."""
    found: list[Diagnostic] = []
    rows: list[Row] = []
    unknown: set[str] = set()
    next_hash = [1]
    errors = 0
    for item in json_objects(path, display):
        if isinstance(item, Diagnostic):
            found.append(item)
            errors += 1
            if item.rule == "TRACE-PATH":
                return None, [item]
            continue
        number, text, obj = item
        check = RecordCheck(text, display, number)
        session = _session(check, obj, number, block_size, shared_prefix_ratio,
                           num_prefix_groups, next_hash)
        for key in obj:
            if key not in FIELDS and key not in unknown:
                unknown.add(key)
                found.append(diag("TRACE-UNKNOWN-FIELD", f"field `{key}` is not read "
                                  "(Applied Compute sessions)", file=display,
                                  line=number, severity="warning"))
        found.extend(check.found)
        errors += len(check.found)
        if session is not None:
            rows.extend(session)
        if errors > MAX_ERRORS:
            found.append(diag("TRACE-TRUNCATED", f"more than {MAX_ERRORS} problems: the "
                              "rest of the file was not checked", file=display,
                              line=number, severity="note"))
            break
    if not rows and not errors:
        found.append(diag("TRACE-EMPTY", f"trace file {display} did not contain any session",
                          file=display))
    if errors or not rows:
        return None, found
    return rows, found


def _session(check: RecordCheck, obj: dict[str, Any], number: int, block_size: int,
             ratio: float, groups: int, next_hash: list[int]) -> list[Row] | None:
    turns = check.integer(obj, ("num_turns",), 0, MAX_TURNS, required=True)
    prompt = check.integer(obj, ("input_prompt_length",), 1, MAX_TOKENS, required=True)
    answers = check.int_list(obj, ("assistant_response_length",), 0, MAX_TOKENS, required=True)
    tools = check.int_list(obj, ("tool_call_output_length",), 0, MAX_TOKENS, required=True)
    latency = check.number_list(obj, ("tool_call_latency",), 0.0, MAX_LATENCY_S, required=True)
    final = check.integer(obj, ("final_assistant_response_length",), 0, MAX_TOKENS,
                          required=True)
    if turns is not None:
        for key, values in zip(PER_TURN, (answers, tools, latency), strict=True):
            if values is not None and len(values) != turns:
                check.report("TRACE-VALUE", (key,), f"`{key}` holds {len(values)} value(s); "
                             f"num_turns is {turns}")
    if (check.found or turns is None or prompt is None or answers is None or tools is None
            or latency is None or final is None):
        return None
    group = (number - 1) % groups if ratio > 0.0 and groups > 0 else None
    shared = _round_half_away(-(-prompt // block_size) * ratio)
    session_id = f"applied_compute_agentic_session_{number}"
    hashes: list[int] = []
    rows: list[Row] = []
    length = prompt
    delay = 0.0
    for k in range(turns + 1):
        _extend(hashes, length, block_size, shared, group, next_hash)
        row: Row = {"session_id": session_id, "hash_ids": list(hashes), "input_length": length,
                    "output_length": answers[k] if k < turns else final}
        if k:
            row["delay"] = delay
        rows.append(row)
        if k < turns:
            length += answers[k] + tools[k]
            delay = latency[k] * 1000.0
            if length > MAX_TOKENS:
                check.report("TRACE-VALUE", ("tool_call_output_length",),
                             f"turn {k + 1}'s prompt would hold {length:,} tokens, more than "
                             f"{MAX_TOKENS:,}")
                return None
    return rows


def _extend(hashes: list[int], length: int, block_size: int, shared: int, group: int | None,
            next_hash: list[int]) -> None:
    """Hash ids for the prompt's blocks not yet named: the group's shared prefix, then fresh."""
    target = -(-length // block_size)
    while len(hashes) < target:
        k = len(hashes)
        if group is not None and k < shared:
            hashes.append(GROUP_TAG | (group << 32) | k)
            continue
        hashes.append(next_hash[0])
        next_hash[0] += 1


def _round_half_away(x: float) -> int:
    """Rust's f64::round: halves away from zero (x >= 0 here)."""
    whole = int(x)
    return whole + 1 if x - whole >= 0.5 else whole


def mooncake_text(rows: list[Row]) -> bytes:
    """Rows as a Mooncake JSONL file's bytes (the converted trace the engine replays)."""
    return "".join(json.dumps(row, separators=(",", ":")) + "\n" for row in rows).encode()
