"""Rule IDs of the workload readers (trace files and the `traffic` section), with their meaning."""

from __future__ import annotations

from kvreplay.schema.diagnostics import Diagnostic, Related, Severity, Span

RULES: dict[str, str] = {
    "TRACE-PATH": "a trace path is missing, unreadable, not a regular file, or the wrong number of "
                  "paths was given",
    "TRACE-FORMAT": "the trace format is not read by the bundled workload readers",
    "TRACE-ENCODING": "a line is not valid UTF-8 (or the file starts with a byte-order mark)",
    "TRACE-JSON": "a line is not one JSON object (syntax error, NaN/Infinity literal, "
                  "duplicate key)",
    "TRACE-MISSING": "a required field is absent",
    "TRACE-FIELD": "a field has the wrong JSON type",
    "TRACE-VALUE": "a field's value is out of range (negative, zero, non-finite, too large, empty) "
                   "or is not valid text (a lone UTF-16 surrogate)",
    "TRACE-CAPACITY": "input_length exceeds len(hash_ids) * trace_block_size",
    "TRACE-SESSION": "a session's first turn sets a non-zero delay",
    "TRACE-ORDER": "a session turn's timestamp precedes the previous turn's (negative gap), or its "
                   "gap cannot be inferred",
    "TRACE-EMPTY": "the trace holds no request",
    "TRACE-UNKNOWN-FIELD": "a row carries a field the reader ignores",
    "TRACE-TRUNCATED": "more problems were found than are listed",
    "TRACE-BLOCK-SIZE": "agentic plays disagree on their block size, or it differs from the "
                        "configured trace block size",
    "TRACE-NESTED-TIME": "a subagent's request precedes its marker under the absolute nested "
                         "timestamp basis",
    "TRACE-DURATION": "a completed subagent's stated duration_ms ends before its own last "
                      "request (replayed as the reference does: the parent resumes at the "
                      "stated end)",
    "TRACE-GRAPH": "the agentic dependency graph is invalid (no parent request, a subagent before "
                   "any parent, unknown or cross-play dependencies, a cycle, a play without a "
                   "root)",
    "WORKLOAD-SOURCE": "the traffic source type is unknown",
    "WORKLOAD-LOAD": "the load type does not fit the source, or its parameters are missing",
    "WORKLOAD-VALUE": "a traffic parameter is out of range or has the wrong type",
    "WORKLOAD-STOP": "the stop condition is missing or invalid",
    "WORKLOAD-IGNORED": "a traffic parameter has no effect with this source or load",
}


# Default severities (every other code is an error); the emitters pass the same value.
SEVERITIES: dict[str, Severity] = {
    "TRACE-UNKNOWN-FIELD": "warning",
    "TRACE-TRUNCATED": "note",
    "TRACE-DURATION": "warning",
    "WORKLOAD-IGNORED": "warning",
}

# What to change, for `kvreplay explain` and the SARIF rule help.
FIXES: dict[str, str] = {
    "TRACE-PATH": "Point `traffic.source.paths` (or `--trace`) at readable trace files, as many as "
                  "the format takes.",
    "TRACE-FORMAT": "Use a trace format the bundled readers take (the message lists them).",
    "TRACE-ENCODING": "Save the trace as UTF-8 without a byte-order mark.",
    "TRACE-JSON": "Write each line as one JSON object with unique keys and finite numbers.",
    "TRACE-MISSING": "Add the field the message names to the row.",
    "TRACE-FIELD": "Write the field with the JSON type the message names.",
    "TRACE-VALUE": "Use a value inside the range the message gives.",
    "TRACE-CAPACITY": "Give the row enough hash_ids for its input_length, or fix the trace block "
                      "size.",
    "TRACE-SESSION": "Start each session with a zero delay.",
    "TRACE-ORDER": "Order each session's turns by timestamp, or give the delays explicitly.",
    "TRACE-EMPTY": "Point at a trace that holds requests.",
    "TRACE-UNKNOWN-FIELD": "Nothing is required: the field is ignored; drop it to silence the "
                           "warning.",
    "TRACE-TRUNCATED": "Fix the listed problems first; the run lists the rest next time.",
    "TRACE-BLOCK-SIZE": "Use one block size in every play, and set the configured trace block size "
                        "to it.",
    "TRACE-NESTED-TIME": "Set `traffic.source.nested_timestamp_basis` to `relative` (or "
                         "`auto`), or fix the subagent's timestamps.",
    "TRACE-DURATION": "Check the subagent's duration_ms and the nested timestamp basis: one of "
                      "them does not describe the recorded requests.",
    "TRACE-GRAPH": "Fix the dependency graph as the message says: every request's parent exists "
                   "in the same play, no cycles, one root per play.",
    "WORKLOAD-SOURCE": "Use a traffic source type the readers know.",
    "WORKLOAD-LOAD": "Choose a load type that fits the source, with its parameters.",
    "WORKLOAD-VALUE": "Use a value of the type and range the message gives.",
    "WORKLOAD-STOP": "Give the stop condition the source needs (`traffic.stop`).",
    "WORKLOAD-IGNORED": "Remove the parameter, or pick the source or load it applies to.",
}


def diag(rule: str, message: str, *, file: str | None = None, path: str | None = None,
         line: int | None = None, column: int | None = None, end_column: int | None = None,
         severity: Severity = "error", hint: str | None = None,
         related: tuple[Related, ...] = ()) -> Diagnostic:
    """A diagnostic of one of the RULES (a single-line span when a line is given)."""
    if rule not in RULES:
        raise KeyError(f"unknown workload rule {rule}")
    span = Span(file=file, path=path, line=line, column=column,
                end_line=line if end_column is not None else None, end_column=end_column)
    return Diagnostic(rule=rule, severity=severity, message=message, span=span, hint=hint,
                      related=related)


def unreadable(exc: OSError, display: str) -> Diagnostic:
    """TRACE-PATH for a trace file that cannot be opened or read."""
    from kvreplay.schema.files import NotRegularFile

    if isinstance(exc, FileNotFoundError):
        message = f"trace file not found: {display}"
    elif isinstance(exc, NotRegularFile):
        message = f"trace path is not a regular file: {display} (it is {exc.kind})"
    else:
        message = f"cannot read trace file {display}: {exc.strerror or exc}"
    return diag("TRACE-PATH", message, file=display)
