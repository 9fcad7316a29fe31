"""`kvreplay run CONFIG_OR_SPEC`: compile if needed, replay with the bundled engine, report."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from kvreplay.cli import exits
from kvreplay.cli.diagnostics_out import print_diagnostics
from kvreplay.cli.progress import ProgressDisplay, mode_for
from kvreplay.io.display import escape_inline
from kvreplay.io.output import Output, commit_all, say, write_stderr, write_stdout


def run(args: argparse.Namespace) -> int:
    from kvreplay.api import matrix_rules
    from kvreplay.compiler.documents import compile_path
    from kvreplay.compiler.overrides import OverrideError
    from kvreplay.exports import ExportError, export_format
    from kvreplay.replay import replay

    inputs = [("the config", args.config), *(("the trace", path) for path in args.trace)]
    try:
        kinds = [export_format(path) for path in args.export]
    except ExportError as exc:
        say(str(exc))
        return exits.USAGE
    with contextlib.ExitStack() as stack:
        # Outputs are opened before any work: one that is an input (or another output) is
        # refused at once, and an interrupted run leaves the previous files as they were.
        outputs: list[Output] = []
        transcript = _open(stack, args.lifecycle, inputs, "the --lifecycle output", outputs)
        report = _open(stack, args.output, inputs, "the -o report", outputs)
        exports = [(out, kind) for path, kind in zip(args.export, kinds, strict=True)
                   if (out := _open(stack, path, inputs, "an --export output", outputs))]
        html = _open(stack, args.html, inputs, "the --html output", outputs)
        try:
            compiled = compile_path(args.config, overrides=args.overrides, rules=matrix_rules())
        except OverrideError as exc:
            say(str(exc))
            return exits.USAGE
        base_dir = os.path.dirname(os.path.abspath(args.config))
        traces = [(path, path) for path in args.trace]
        if not args.trace and compiled.spec is not None:
            traces = spec_traces(compiled.native(), base_dir)
            for out in outputs:
                out.refuse([("the trace", real) for _, real in traces])
        listed = _per_request(args, compiled)
        show = ProgressDisplay(mode_for(sys.stderr, quiet=args.quiet, disabled=args.no_progress))
        stack.callback(show.close)
        outcome = replay(compiled, base_dir=base_dir, trace_paths=args.trace or None,
                         stepwise=args.stepwise, progress=show,
                         lifecycle=transcript.write if transcript else None, stream=True,
                         rows=(listed == "full" and report is not None) or bool(exports)
                         or html is not None,
                         phase=show.phase)
        rows = outcome.report.get("per_request") if outcome.report is not None else None
        close = getattr(rows, "close", None)  # rows spilled to an anonymous file
        if close is not None:
            stack.callback(close)
        if outcome.report is not None:
            from kvreplay.provenance import provenance

            outcome.report["meta"]["per_request"] = listed
            outcome.report["meta"]["provenance"] = provenance(
                args.config, traces, getattr(args, "argv", None))
            if report is not None:
                written = dict(outcome.report)
                if listed != "full":
                    written["per_request"] = []
                _write_report(written, report, show)
            for out, kind in exports:
                _export(rows if rows is not None else [], out, kind, show)
            if html is not None:
                _write_html(outcome.report, args.config, html, show)
            commit_all(outputs)  # all of them or none: `-o A --html B` where B fails keeps A
        show.close()
        print_diagnostics([(compiled.file, compiled.text, outcome.diagnostics)], args)
        if outcome.refusals:
            write_stderr("kvreplay: the bundled engine cannot run this spec (it never "
                         "approximates silently):\n"
                         + "".join(f"  - {escape_inline(r)}\n" for r in outcome.refusals))
            return exits.FINDINGS
        if outcome.error is not None:
            say(f"replay failed: {outcome.error}")
            return exits.FINDINGS
        if outcome.report is None:
            return exits.for_diagnostics(outcome.diagnostics) or exits.FINDINGS
    if args.format == "json":
        write_stdout(json.dumps(outcome.report["summary"], sort_keys=True, indent=2) + "\n")
    elif not args.quiet:
        write_stdout(summary_table(outcome.report, args.output, args.export,
                                   html=args.html, lifecycle=args.lifecycle))
    phases = outcome.report["summary"].get("agentic_phases")
    if phases is not None and phases["phase"] == "aborted":
        say(f"the agentic warmup aborted ({phases['failure_reason']}): nothing was measured")
        return exits.FINDINGS
    return exits.OK


def _per_request(args: argparse.Namespace, compiled: Any) -> str:
    """`full` or `summary-only`: --per-request, else the spec's record_per_request."""
    if args.per_request is not None:
        return str(args.per_request)
    if compiled.spec is None:
        return "full"
    keep = compiled.native()["spec"].get("record_per_request", True)
    return "full" if keep else "summary-only"


def _write_report(report: dict[str, Any], out: Output, show: ProgressDisplay) -> None:
    from kvreplay.engine.report_stream import write_report

    label = f"writing {out.path}"
    show.phase(label)
    write_report(report, out, out.write_bytes, lambda share: show.phase(label, share))


def _export(rows: Iterable[dict[str, Any]], out: Output, kind: str,
            show: ProgressDisplay) -> None:
    from kvreplay import exports

    show.phase(f"exporting {out.path}")
    if kind == "parquet":
        exports.write_parquet(rows, out.binary())
    elif kind == "csv":
        exports.write_csv(rows, out)
    else:
        exports.write_jsonl(rows, out)


def _write_html(report: dict[str, Any], config: str, out: Output,
                show: ProgressDisplay) -> None:
    from kvreplay.html import render_html

    show.phase(f"writing {out.path}")
    label = os.path.splitext(os.path.basename(config))[0] or config
    out.write(render_html([(label, report)]))


def _open(stack: contextlib.ExitStack, path: str | None, inputs: list[tuple[str, str]],
          role: str, outputs: list[Output]) -> Output | None:
    """Enter the output at `path` (None without one); it becomes one more thing the next
    outputs must not be."""
    if not path:
        return None
    out = stack.enter_context(Output(path, inputs))
    inputs.append((role, path))
    outputs.append(out)
    return out


def spec_traces(native: dict[str, Any], base_dir: str) -> list[tuple[str, str]]:
    """The trace files the spec names: (as written, resolved as the workload reader does)."""
    given = native.get("traffic", {}).get("trace_paths") or []
    return [(p, os.path.join(base_dir, p)) for p in given if isinstance(p, str)]


def _ms(value: Any) -> str:
    return "-" if value is None else f"{value:,.2f}"


def _bytes(n: int) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n} B"


def _g2_rows(s: dict[str, Any]) -> list[tuple[str, str]]:
    """The host tier's lines, when the deployment has one."""
    g2 = s.get("g2_transfers")
    if not g2:
        return []
    scopes = " + ".join(g2["scopes"])
    restored = f"{s['first_admission_host_reused_ratio']:.4f} of input tokens restored"
    if "first_admission_g3_reused_ratio" in s:
        restored += f" ({s['first_admission_g3_reused_ratio']:.4f} through G3)"
    rows = [("host tier (G2)", f"{scopes}, {g2['pools']:,} pool(s): {restored}")]
    rows.append(("host copies", f"{g2['d2h_blocks']:,} blocks stored ({_bytes(g2['d2h_bytes'])}"
                 f"), {g2['h2d_blocks']:,} restored ({_bytes(g2['h2d_bytes'])}); "
                 f"{g2['restores_deferred']:,} restores deferred, "
                 f"{g2['store_cohorts_retried']:,} stores retried"))
    for domain in s.get("g2_domains") or []:
        rows.append(("shared pool", f"{domain['used_blocks']:,} of {domain['capacity_blocks']:,}"
                     f" blocks used ({domain['resident_blocks']:,} resident)"))
    g3 = s.get("g3_offload")
    if g3:
        read, write = g3["read"], g3["write"]
        rows.append(("G3 copies", f"{write['completed_jobs']:,} writes "
                     f"({_bytes(write['completed_bytes'])}), {read['completed_jobs']:,} reads "
                     f"({_bytes(read['completed_bytes'])}); {g3['lookup_hits']:,} of "
                     f"{g3['lookup_probes']:,} probes hit, {g3['evictions']:,} evicted, "
                     f"{g3['cross_worker_read_blocks']:,} blocks read across workers"))
    return rows


def _speculation_rows(s: dict[str, Any]) -> list[tuple[str, str]]:
    """What speculative decoding did, for runs with an MTP rank."""
    spec = s.get("speculation")
    if not spec:
        return []
    rates = ", ".join("-" if p["acceptance_rate"] is None else f"{p['acceptance_rate']:.2f}"
                      for p in spec["acceptance_by_position"])
    return [("speculation", f"{spec['kind']}: {spec['tokens_per_step']:.3f} tokens per step, "
             f"{spec['draft_acceptance_rate']:.1%} of {spec['draft_tokens']:,} drafts accepted;"
             f" acceptance by position {rates}")]


def _agentic_rows(s: dict[str, Any]) -> list[tuple[str, str]]:
    """Plays, the warmup barrier and the profile window, for agentic runs."""
    outcomes = s.get("agentic_play_outcomes")
    if outcomes is None:
        return []
    by_status = {k: sum(1 for o in outcomes if o["status"] == k)
                 for k in ("completed", "failed", "incomplete")}
    rows = [("agentic plays", f"{by_status['completed']:,} completed, {by_status['failed']:,} "
             f"failed, {by_status['incomplete']:,} incomplete of {len(outcomes):,}")]
    phases = s.get("agentic_phases")
    if phases is not None:
        done = sum(lane["warmup_completed"] for lane in phases["lanes"])
        primers = sum(lane["primers_completed"] for lane in phases["lanes"])
        if phases["phase"] == "profile":
            rows.append(("warmup", f"{primers:,} primers + {done:,} warmups, barrier at "
                         f"{_ms(phases['profile_start_ms'])} ms (times after it are relative)"))
        else:
            rows.append(("warmup", f"{phases['phase']}: {phases['failure_reason'] or 'not done'}"
                         " (no measured window)"))
    profile = s.get("agentic_profile")
    if profile is not None and profile["profile_start_ms"] is not None:
        rows.append(("profile window", f"{_ms(profile['profile_start_ms'])} -> "
                     f"{_ms(profile['admission_cutoff_ms'])} ms, finished at "
                     f"{_ms(profile['finished_at_ms'])} ms; {profile['plays_started']:,} plays "
                     "started"))
        rows.append(("profile requests", f"{profile['issued_requests']:,} issued, "
                     f"{profile['successful_responses']:,} succeeded, "
                     f"{profile['canceled_requests']:,} canceled, "
                     f"{profile['never_issued_requests']:,} never issued, "
                     f"{profile['unsettled_server_requests']:,} unsettled"))
    return rows


# The sample count that says whether a latency row has figures (ITL comes from the requests
# that give TPOT: those with two output tokens or more).
_SAMPLES = {"itl": "tpot"}
_ABBREVIATIONS = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2e_latency": "end to end"}


def summary_table(report: dict[str, Any], output: str | None,
                  exported: Sequence[str] = (), *, html: str | None = None,
                  lifecycle: str | None = None) -> str:
    """A terminal summary of the report (the canonical numbers are in the JSON), ending with
    every file the run wrote."""
    from kvreplay.engine.report import rejection_text

    s = report["summary"]
    meta = report["meta"]
    rejected = rejection_text(s)
    rows = [
        ("requests", f"{s['completed_requests']:,} completed of {s['num_requests']:,}"
         + (f"; {rejected}" if rejected else "")),
        ("simulated duration", f"{_ms(s['duration_ms'])} ms"),
        ("request throughput", f"{s['request_throughput_rps']:,.3f} req/s"),
        ("output throughput", f"{s['output_throughput_tok_s']:,.1f} tok/s"),
        ("prefix cache reuse", f"{s['prefix_cache_reused_ratio']:.4f} of input tokens"),
        ("committed prefill", f"{s['committed_prefill_tokens']:,} tokens"),
    ]
    rows.extend(_g2_rows(s))
    rows.extend(_speculation_rows(s))
    rows.extend(_agentic_rows(s))
    lines = [f"{name:<22}{value}" for name, value in rows]
    lines.append("")
    empty: list[str] = []
    table: list[tuple[str, list[str]]] = []
    for label, key in (("time to first token", "ttft"), ("time per output token", "tpot"),
                       ("inter-token latency", "itl"), ("end to end", "e2e_latency")):
        values = [s.get(f"{p}_{key}_ms") for p in ("mean", "median", "p90", "p99", "max")]
        # The report writes 0.0 for a figure without samples (as the reference does): shown
        # as 0.00 it would read as a measured zero.
        if s.get(f"num_{_SAMPLES.get(key, key)}_samples") == 0:
            values = [None] * len(values)
            empty.append(_ABBREVIATIONS[key])
        table.append((label, [_ms(v) for v in values]))
    # Columns as wide as their widest cell, two spaces apart (a latency of 100,000 ms or more
    # would otherwise run into the next column).
    width = max(10, *(len(cell) + 2 for _, cells in table for cell in cells))
    head = "".join(f"{name:>{width}}" for name in ("mean", "p50", "p90", "p99", "max"))
    lines.append(f"{'latency (ms)':<22}{head}")
    lines += [f"{label:<22}" + "".join(f"{cell:>{width}}" for cell in cells)
              for label, cells in table]
    wall = meta.get("wall_time_ms")
    footer = f"\nreplayed in {wall / 1000:.2f} s of wall time" if wall is not None else ""
    if empty:
        footer += f"\nnote: no sample for {' and '.join(empty)} (-): " + (
            "no request completed" if "TTFT" in empty else
            "no completed request has two output tokens")
    if meta.get("approximations"):
        footer += "\nnote: " + escape_inline("; ".join(meta["approximations"]))
    if output:
        footer += f"\nreport written to {escape_inline(output)}"
    for path in exported:
        footer += f"\nper-request rows exported to {escape_inline(path)}"
    if lifecycle:
        footer += f"\nlifecycle transcript written to {escape_inline(lifecycle)}"
    if html:
        footer += f"\nHTML report written to {escape_inline(html)}"
    return "\n".join(lines) + footer + "\n"

