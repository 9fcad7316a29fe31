"""`kvreplay trace convert`: Weka plays -> an Agentic Mooncake v2 file."""

from __future__ import annotations

import argparse

from kvreplay.cli import exits
from kvreplay.cli.diagnostics_out import print_diagnostics
from kvreplay.io.display import escape_inline
from kvreplay.io.output import emit, write_stderr


def run(args: argparse.Namespace) -> int:
    from kvreplay.engine.traces.agentic.weka import read_weka

    graph, found = read_weka(args.trace, args.trace, basis=args.basis,
                             expected_block_size=args.block_size)
    print_diagnostics([(args.trace, None, found)], args)
    if graph is None:
        return exits.for_diagnostics(found) or exits.USAGE
    text = "".join(line + "\n" for line in graph.v2_lines())
    if not emit(args.output, text, [("the trace", args.trace)]):
        return exits.USAGE
    if args.output and not args.quiet:
        write_stderr(f"{len(graph.nodes)} requests in {len(graph.plays)} play(s), nested "
                     f"timestamp basis {graph.basis}: {escape_inline(args.output)}\n")
    return exits.OK
