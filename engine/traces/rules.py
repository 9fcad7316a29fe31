"""Rule IDs of the workload readers (trace files and the `traffic` section), with their meaning."""

from __future__ import annotations

from kvreplay.diagnostics import Diagnostic, Related, Severity, Span

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
    "TRACE-GRAPH": "the agentic dependency graph is invalid (no parent request, a subagent before "
                   "any parent, unknown or cross-play dependencies, a cycle, a play without a "
                   "root)",
    "WORKLOAD-SOURCE": "the traffic source type is unknown",
    "WORKLOAD-LOAD": "the load type does not fit the source, or its parameters are missing",
    "WORKLOAD-VALUE": "a traffic parameter is out of range or has the wrong type",
    "WORKLOAD-STOP": "the stop condition is missing or invalid",
    "WORKLOAD-IGNORED": "a traffic parameter has no effect with this source or load",
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
