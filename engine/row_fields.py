"""The per-request row of the report, stated once: its fields as a table of expressions.

`per_request_row` (the row as a mapping) is generated from these tables; so are the row printers
of engine/row_text.py and the plans of the compiled printer (engine/_rowtext.c), so a field is
added, renamed or computed differently here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kvreplay.engine.records import RequestRecord

# The shape flags: when a flagged field is in the row (over `r`) or in an admission (over `a`).
FLAG_TESTS = {"agentic": "r.agentic is not None", "phase": "r.agentic_phase is not None",
              "host": "r.first_admission_g1_reused_input_tokens is not None",
              "split": "a.g1_reused_input_tokens is not None",
              # G3 below G2 (no printer shape has it: row_text prints such rows from the mapping)
              "g3": "r.first_admission_g3_reused_input_tokens is not None",
              # MTP decoding (no compiled shape has it: row_text prints such rows in Python)
              "mtp": "r.speculative_steps is not None"}


def uuid_for(ordinal: int) -> str:
    """The request's uuid: the 128-bit number ordinal + 1, like the reference's replay fixtures."""
    digits = f"{ordinal + 1:032x}"
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


# (key, expression, kind, the shape flag it needs): the row's fields in the row's order, each
# value computed over the record `r`; `first`, `second`, `last`, `arrival` are its token and
# arrival times. `0.0 if x < 0.0 else x` is `max(x, 0.0)` (the same value and type, -0.0 and NaN
# included) without the call. The kinds "admissions" and "routes" are the history lists (tables
# ADMISSION over `a` and ROUTE over `d`); "uuid" and "nested" are a str and a mapping that the
# row printers print their own way.
Field = tuple[str, str, str, str | None]
ROW: tuple[Field, ...] = (
    ("uuid", "uuid_for(r.ordinal)", "uuid", None),
    ("request_id", "r.request_id or None", "str", None),
    ("play_id", "r.play_id", "str", "agentic"),
    ("agentic", "dict(r.agentic)", "nested", "agentic"),
    ("agentic_phase", "r.agentic_phase", "str", "phase"),
    ("session_id", "r.session_id", "str", None),
    ("turn_index", "r.turn_index", "int", None),
    ("arrival_time_ms", "arrival", "float", None),
    ("dispatched_at_ms", "r.dispatched_at_ms", "float", None),
    ("first_admit_ms", "r.first_admit_ms", "float", None),
    ("first_token_ms", "first", "float", None),
    ("last_token_ms", "last", "float", None),
    ("terminal_time_ms", "r.terminal_time_ms", "float", None),
    ("ttft_ms", "None if first is None else (0.0 if (x := first - arrival) < 0.0 else x)",
     "float", None),
    ("ttst_ms", "None if first is None or second is None "
                "else (0.0 if (x := second - first) < 0.0 else x)", "float", None),
    ("e2e_latency_ms", "None if last is None else (0.0 if (x := last - arrival) < 0.0 else x)",
     "float", None),
    ("itl_ms", "None if r.output_length < 2 or first is None or last is None "
               "else (0.0 if (x := last - first) < 0.0 else x) / (r.output_length - 1)",
     "float", None),
    ("input_length", "r.input_length", "int", None),
    ("output_length", "r.output_length", "int", None),
    ("requested_output_length", "r.requested_output_length", "int", None),
    ("reused_input_tokens", "r.reused_input_tokens", "int", None),
    ("decode_reused_input_tokens", "r.decode_reused_input_tokens", "int", None),
    ("admission_count", "len(r.admission_history)", "int", None),
    ("readmission_count", "r.readmission_count", "int", None),
    ("admission_history", "r.admission_history", "admissions", None),
    ("routing_history", "r.routing_history", "routes", None),
    ("terminal_status", "r.terminal_status", "str", None),
    ("prefill_admit_ms", "r.prefill_admit_ms", "float", None),
    ("source_held_ms", "r.source_held_ms", "float", None),
    ("destination_reserved_ms", "r.destination_reserved_ms", "float", None),
    ("destination_activated_ms", "r.destination_activated_ms", "float", None),
    ("decode_admit_ms", "r.decode_admit_ms", "float", None),
    ("source_released_ms", "r.source_released_ms", "float", None),
    ("first_admission_g1_reused_input_tokens", "r.first_admission_g1_reused_input_tokens",
     "int", "host"),
    ("first_admission_host_reused_input_tokens", "r.first_admission_host_reused_input_tokens",
     "int", "host"),
    ("first_admission_g3_reused_input_tokens", "r.first_admission_g3_reused_input_tokens",
     "int", "g3"),
    ("speculative_steps", "r.speculative_steps", "int", "mtp"),
    ("draft_tokens", "r.draft_tokens", "int", "mtp"),
    ("accepted_draft_tokens", "r.accepted_draft_tokens", "int", "mtp"),
)
ROW_TIMES = ("first = r.first_token_ms", "second = r.second_token_ms",
              "last = r.last_token_ms", "arrival = r.arrival_time_ms")

# An admission (with the G1/host split only when its G1 share is known) and a routing decision.
ADMISSION: tuple[Field, ...] = (
    ("admission_ordinal", "a.admission_ordinal", "int", None),
    ("at_ms", "a.at_ms", "float", None),
    ("g1_reused_input_tokens", "a.g1_reused_input_tokens", "int", "split"),
    ("host_reused_input_tokens", "a.host_reused_input_tokens", "int", "split"),
    ("is_readmission", "a.is_readmission", "bool", None),
    ("pool", "a.pool", "str", None),
    ("pool_admission_ordinal", "a.pool_admission_ordinal", "int", None),
    ("reused_input_tokens", "a.reused_input_tokens", "int", None),
)
ROUTE: tuple[Field, ...] = (
    ("best_available_overlap_blocks", "d.best_available_overlap_blocks", "int", None),
    ("dp_rank", "d.dp_rank", "int", None),
    ("logical_worker_id", "d.logical_worker_id", "int", None),
    ("outcome", "d.outcome", "str", None),
    ("pool", "d.pool", "str", None),
    ("queue_entered_at_ms", "d.queue_entered_at_ms", "float", None),
    ("queue_wait_ms", "d.queue_wait_ms", "float", None),
    ("reported_overlap_tokens", "d.reported_overlap_tokens", "int", None),
    ("scheduler_id", "d.scheduler_id", "int", None),
    ("selected_overlap_blocks", "d.selected_overlap_blocks", "int", None),
)


def _mapping_lines(table: tuple[Field, ...], target: str, indent: str) -> list[str]:
    """Statements that fill the dict `target` with `table`'s fields, in the table's order."""
    lines: list[str] = []
    for key, expression, kind, flag in table:
        pad = indent
        if flag is not None:
            lines.append(f"{indent}if {FLAG_TESTS[flag]}:")
            pad = indent + "    "
        if kind in ("admissions", "routes"):
            entries, name = (ADMISSION, "a") if kind == "admissions" else (ROUTE, "d")
            lines += [f"{pad}history = []", f"{pad}for {name} in {expression}:",
                      f"{pad}    entry = {{}}", *_mapping_lines(entries, "entry", pad + "    "),
                      f"{pad}    history.append(entry)", f"{pad}{target}[{key!r}] = history"]
        else:
            lines.append(f"{pad}{target}[{key!r}] = {expression}")
    return lines


def _row_builder() -> Callable[[RequestRecord], dict[str, Any]]:
    """`per_request_row`, generated from ROW."""
    lines = ["def per_request_row(r):", *(f"    {line}" for line in ROW_TIMES), "    row = {}",
             *_mapping_lines(ROW, "row", "    "), "    return row"]
    namespace: dict[str, Any] = {"uuid_for": uuid_for}
    exec(compile("\n".join(lines), "<kvreplay per-request row>", "exec"), namespace)
    builder: Callable[[RequestRecord], dict[str, Any]] = namespace["per_request_row"]
    builder.__doc__ = "One terminal request as the report lists it."
    return builder


per_request_row = _row_builder()
