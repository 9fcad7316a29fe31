"""`compare` output: a text table, JSON (the contract, docs/cli.md) or GitHub annotations."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from kvreplay.compare.gates import GateResult
from kvreplay.compare.join import METRICS, PERCENTILES, RANKED_BY, DeltaStats, RequestJoin
from kvreplay.compare.model import Comparison, FigureDelta
from kvreplay.compare.speedup import text_lines, to_dict
from kvreplay.compiler.emit import escape_active
from kvreplay.io.display import escape_inline

COMPARE_VERSION = 1
Labels = tuple[str, str]


def to_json(comparison: Comparison, results: Sequence[GateResult], labels: Labels, *,
            changed_only: bool = False) -> str:
    """Canonical JSON (sorted keys, 2-space indent); a relative change from a base of 0 is
    null, a percent gate change from 0 is the string "+inf" / "-inf". `changed_only`: the
    `figures` list holds the changed ones only (`changed_only: true` says so)."""
    shown = comparison.changed if changed_only else comparison.figures
    doc = {
        "compare_version": COMPARE_VERSION,
        "base": _side(labels[0], comparison.base_meta),
        "new": _side(labels[1], comparison.new_meta),
        "warnings": list(comparison.warnings),
        "changed_only": changed_only,
        "figures": [_figure(f) for f in shown],
        "changed_figures": len(comparison.changed),
        "requests": _join(comparison.requests),
        "gates": [_gate(r) for r in results],
        "tripped_gates": sum(r.tripped for r in results),
    }
    if comparison.speedup is not None:
        doc["speculation"] = to_dict(comparison.speedup)
    # Figure names and ids come from the report files: no raw control or bidi characters.
    return escape_active(json.dumps(doc, sort_keys=True, indent=2, ensure_ascii=False,
                                    allow_nan=False)) + "\n"


def _side(label: str, meta: Mapping[str, Any]) -> dict[str, Any]:
    provenance = meta.get("provenance") or {}
    config = provenance.get("config") if isinstance(provenance, Mapping) else None
    return {"report": label, "kvreplay_version": meta.get("kvreplay_version"),
            "config_digest": config.get("digest") if isinstance(config, Mapping) else None}


def _figure(f: FigureDelta) -> dict[str, Any]:
    return {"name": f.name, "base": f.base if f.in_base else None,
            "new": f.new if f.in_new else None, "in_base": f.in_base, "in_new": f.in_new,
            "delta": _json_number(f.delta), "relative": f.relative, "changed": f.changed}


def _json_number(value: float | None) -> float | str | None:
    """A number as JSON holds it: one that overflowed a double is the string "+inf" / "-inf"."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value:+}"
    return value


def _join(join: RequestJoin) -> dict[str, Any]:
    if join.skipped is not None:
        return {"joined": False, "reason": join.skipped}
    return {
        "joined": True, "matched": join.matched, "only_in_base": join.only_base,
        "only_in_new": join.only_new, "not_completed_in_both": join.not_completed,
        "deltas_ms": {m: _stats(s) for m, s in join.stats.items()},
        "ranked_by": RANKED_BY,
        "top_regressions": [
            {"uuid": m.uuid, "request_id": m.request_id, "session_id": m.session_id,
             "turn_index": m.turn_index,
             **{metric: {"base": m.base[metric], "new": m.new[metric],
                         "delta": m.delta(metric)} for metric in METRICS}}
            for m in join.top],
    }


def _stats(s: DeltaStats) -> dict[str, Any]:
    return {"count": s.count, "slower": s.slower, "faster": s.faster, "unchanged": s.unchanged,
            "mean": s.mean, "min": s.min, "max": s.max,
            **{f"p{p}": value for p, value in s.percentiles}}


def _gate(r: GateResult) -> dict[str, Any]:
    return {"gate": r.gate.text, "figure": r.gate.figure, "op": r.gate.op,
            "threshold": r.gate.threshold, "relative": r.gate.relative, "base": r.base,
            "new": r.new, "change": _json_number(r.change), "tripped": r.tripped}


# --- text ---

def num(value: Any) -> str:
    """A figure for people: thousands separators, at most 4 decimals, trailing zeros cut; very
    small and very large floats in scientific notation."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "-" if value is None else str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if value != 0 and abs(value) < 1e-3:
        return f"{value:.3e}"
    if abs(value) >= 1e15:
        return f"{value:.6g}"
    text = f"{value:,.4f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def signed(value: Any) -> str:
    text = num(value)
    return text if text.startswith("-") or text in ("-", "0") else "+" + text


def percent(value: float | None) -> str:
    if value is None:
        return "n/a"
    if not math.isfinite(value):
        return f"{value:+}%"
    if abs(value) >= 1e6:
        return f"{value:+.3g}%"
    return f"{value:+.2f}%"


def columns(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Aligned lines: the first column left, the others right, each as wide as its widest cell
    and two spaces apart, so that no two cells ever run together."""
    widths = [max(len(cell) for cell in column) for column in zip(head, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        first, *rest = cells
        return "  ".join([first.ljust(widths[0]),
                          *(c.rjust(w) for c, w in zip(rest, widths[1:], strict=True))]).rstrip()

    return [line(head), *map(line, rows)]


def to_text(comparison: Comparison, results: Sequence[GateResult], labels: Labels, *,
            changed_only: bool = False) -> str:
    """The table for people; every string from the reports (figure names, text figures, ids,
    versions) with its control characters shown as escapes (io.display). `changed_only`:
    leave out the figures equal in both reports."""
    lines = [f"BASE {_describe(labels[0], comparison.base_meta)}",
             f"NEW  {_describe(labels[1], comparison.new_meta)}"]
    lines.extend(escape_inline(f"warning: {w}") for w in comparison.warnings)
    lines.append("")
    shown = comparison.changed if changed_only else comparison.figures
    if shown:
        lines.extend(columns(["figure", "base", "new", "delta", "relative"],
                             [_figure_cells(f) for f in shown]))
    total, changed = len(comparison.figures), len(comparison.changed)
    footer = f"{total} figures, {changed} changed"
    if changed_only:
        footer += f" ({total - changed} unchanged not shown: --changed-only)"
    lines.append(footer)
    if comparison.speedup is not None:
        lines.extend(text_lines(comparison.speedup))
    lines.append("")
    lines.extend(_join_text(comparison.requests))
    if results:
        lines.append("")
        lines.append("gates:")
        lines.extend("  " + gate_line(r) for r in results)
    return "\n".join(lines) + "\n"


def _figure_cells(f: FigureDelta) -> list[str]:
    rel = percent(None if f.relative is None else f.relative * 100.0)
    if not f.numeric:
        rel = "changed" if f.changed else ""
    delta = signed(f.delta) if f.numeric else ""
    return [escape_inline(f.name), _side_value(f.base, f.in_base),
            _side_value(f.new, f.in_new), delta, rel]


def _describe(label: str, meta: Mapping[str, Any]) -> str:
    side = _side(label, meta)
    text = f"{label} (kvreplay {side['kvreplay_version'] or '?'}"
    if side["config_digest"]:
        text += f", config {str(side['config_digest'])[:19]}"
    return escape_inline(text + ")")


def _side_value(value: Any, present: bool) -> str:
    return escape_inline(num(value)) if present else "(absent)"


def _join_text(join: RequestJoin) -> list[str]:
    if join.skipped is not None:
        return [escape_inline(f"per-request join skipped: {join.skipped}")]
    lines = [f"per-request join: {join.matched:,} requests in both runs ({join.only_base:,} only "
             f"in BASE, {join.only_new:,} only in NEW, {join.not_completed:,} not completed in "
             "both)"]
    head = ["delta (ms)", "slower", "faster", "same", "mean", "min",
            *(f"p{p}" for p in PERCENTILES), "max"]
    lines.extend(columns(head, [
        [metric, f"{s.slower:,}", f"{s.faster:,}", f"{s.unchanged:,}",
         *(signed(v) for v in (s.mean, s.min, *(v for _, v in s.percentiles), s.max))]
        for metric, s in join.stats.items()]))
    if join.top:
        lines.append(f"slowest regressions (by {RANKED_BY}):")
        for m in join.top:
            who = escape_inline(m.uuid if m.request_id is None else f"{m.uuid} ({m.request_id})")
            parts = [f"{metric} {num(m.base[metric])} -> {num(m.new[metric])} "
                     f"({signed(m.delta(metric))})" for metric in METRICS]
            lines.append(f"  {who}: " + ", ".join(parts))
    else:
        lines.append("no request got slower")
    return lines


def gate_line(r: GateResult) -> str:
    verdict = "FAILED" if r.tripped else "passed"
    change = percent(r.change) if r.gate.relative else signed(r.change)
    return (f"{verdict} `{escape_inline(r.gate.text)}`: {r.gate.figure} base {num(r.base)}, "
            f"new {num(r.new)}, change {change} (threshold {r.gate.op} "
            f"{r.gate.threshold_text()})")


# --- GitHub workflow commands ---

def to_github(comparison: Comparison, results: Sequence[GateResult], labels: Labels, *,
              changed_only: bool = False) -> str:
    """One `::error::` per tripped gate, a `::warning::` for each warning (the reports ran
    different traces) or when the join was skipped, then the text table for the log, with
    workflow commands stopped around it (figure names and ids come from the report files)."""
    from kvreplay.formats.github import data, property_value, unprocessed

    title = property_value("kvreplay compare")
    out = [f"::error title={title}::{data(gate_line(r))}" for r in results if r.tripped]
    out.extend(f"::warning title={title}::{data(w)}" for w in comparison.warnings)
    if comparison.requests.skipped is not None and not comparison.warnings:
        out.append(f"::warning title={title}::"
                   + data(f"per-request join skipped: {comparison.requests.skipped}"))
    return ("\n".join(out) + ("\n" if out else "")
            + unprocessed(to_text(comparison, results, labels, changed_only=changed_only)))


RENDERERS = {"text": to_text, "json": to_json, "github": to_github}
