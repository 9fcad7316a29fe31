"""`kvreplay trace convert`: a trace of another format -> the one the engine replays it as.

Weka plays and agentic Dynamo request traces become an Agentic Mooncake v2 file (the dependency
graph); standard Dynamo request traces and Applied Compute agentic sessions become Mooncake
rows. Replaying the output gives the replay of the source (tests compare them).
"""

from __future__ import annotations

import argparse
import json
import os

from kvreplay.cli import exits
from kvreplay.cli.diagnostics_out import print_diagnostics
from kvreplay.io.display import escape_inline
from kvreplay.io.output import emit, write_stderr
from kvreplay.schema.diagnostics import Diagnostic

FORMATS = ("auto", "weka", "dynamo", "applied_compute_agentic")


def run(args: argparse.Namespace) -> int:
    traces: list[str] = args.trace
    fmt = args.source_format if args.source_format != "auto" else detect(traces[0])
    if fmt != "dynamo" and len(traces) > 1:
        write_stderr(f"kvreplay: trace convert: a {fmt} trace is one file or directory; "
                     f"{len(traces)} were given (several files are for Dynamo request "
                     "traces, --from dynamo)\n")
        return exits.USAGE
    if fmt == "applied_compute_agentic" and args.block_size is None:
        write_stderr("kvreplay: trace convert: Applied Compute sessions need --block-size "
                     "(tokens per synthesized block)\n")
        return exits.USAGE
    text, summary, found = _convert(fmt, traces, args)
    print_diagnostics([(path, None, [d for d in found if d.span.file in (path, None)])
                       for path in traces] + [(None, None, [d for d in found if d.span.file
                                                           not in (*traces, None)])], args)
    if text is None:
        return exits.for_diagnostics(found) or exits.USAGE
    if not emit(args.output, text, [("the trace", path) for path in traces]):
        return exits.USAGE
    if args.output and not args.quiet:
        write_stderr(f"{summary}: {escape_inline(args.output)}\n")
    return exits.OK


def _convert(fmt: str, traces: list[str], args: argparse.Namespace,
             ) -> tuple[str | None, str, list[Diagnostic]]:
    """(the converted text or None, a one-line summary, the findings)."""
    from kvreplay.engine.traces.agentic.weka import read_weka
    from kvreplay.engine.traces.applied_compute import mooncake_text, read_applied_compute
    from kvreplay.engine.traces.dynamo_trace import read_dynamo

    if fmt == "weka":
        graph, found = read_weka(traces[0], traces[0], basis=args.basis,
                                 expected_block_size=args.block_size)
        if graph is None:
            return None, "", found
        return ("".join(line + "\n" for line in graph.v2_lines()),
                f"{len(graph.nodes)} requests in {len(graph.plays)} play(s), nested timestamp "
                f"basis {graph.basis} (Agentic Mooncake v2)", found)
    if fmt == "dynamo":
        trace, found = read_dynamo([(p, p) for p in traces], expected_block_size=args.block_size)
        if trace is None:
            return None, "", found
        if trace.graph is not None:
            graph = trace.graph
            return ("".join(line + "\n" for line in graph.v2_lines()),
                    f"{len(graph.nodes)} requests in {len(graph.plays)} play(s) (Agentic "
                    "Mooncake v2)", found)
        assert trace.rows is not None
        return (mooncake_text(trace.rows).decode(),
                f"{len(trace.rows)} requests, trace block size {trace.block_size} (Mooncake)",
                found)
    rows, found = read_applied_compute(traces[0], traces[0], block_size=args.block_size,
                                       shared_prefix_ratio=args.shared_prefix_ratio,
                                       num_prefix_groups=args.prefix_groups)
    if rows is None:
        return None, "", found
    sessions = len({row["session_id"] for row in rows})
    return (mooncake_text(rows).decode(),
            f"{len(rows)} requests in {sessions} session(s), trace block size {args.block_size} "
            "(Mooncake sessions: replay them under concurrency load)", found)


def detect(path: str) -> str:
    """The format a trace's first record reads as: a Dynamo request-trace record, an Applied
    Compute session, else Weka plays (a directory is a corpus of plays)."""
    if os.path.isdir(path):
        return "weka"
    try:
        with open(path, "rb") as f:
            first = next((line for line in f if line.strip()), b"")
        value = json.loads(first.decode("utf-8-sig"))
    except (OSError, ValueError):
        return "weka"  # its reader says what is wrong with it
    if isinstance(value, dict):
        record = value.get("event") if isinstance(value.get("event"), dict) else value
        if isinstance(record, dict) and str(record.get("schema", "")).startswith(
                "dynamo.request.trace"):
            return "dynamo"
        if "num_turns" in value and "input_prompt_length" in value:
            return "applied_compute_agentic"
    return "weka"
