"""The likely fix of a trace that the readers refused row after row, derived from the file itself:
the block size its hash ids were written at (TRACE-CAPACITY on every row is a block-size
mismatch), or the format that would read it (a Weka play given to a Mooncake config)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any, BinaryIO

from kvreplay.schema.diagnostics import Diagnostic, Span, sort_unique
from kvreplay.schema.files import open_regular
from kvreplay.schema.frozen import evolve

# Rows read back to derive the block size: a few hundred rows pin it; more only cost reading.
_SAMPLE_ROWS = 1024
# The longest line read back; a longer one is skipped (the readers have reported it anyway).
_MAX_LINE = 1 << 20
_MOONCAKE = ("mooncake", "mooncake-delta")
# Findings that a file in another format gets from a reader (its fields are not the format's).
_SHAPE_RULES = frozenset({"TRACE-MISSING", "TRACE-FIELD", "TRACE-UNKNOWN-FIELD", "TRACE-FORMAT",
                          "TRACE-VALUE"})
_FORMAT_NAMES = {"weka": "a Weka / AgentX play (objects with `requests`)",
                 "agentic_mooncake": "an Agentic Mooncake v2 file (a `dynamo.agentic_mooncake` "
                 "header)",
                 "mooncake": "a Mooncake trace (rows with `hash_ids` and `output_length`)"}


def explain_trace_findings(diagnostics: Sequence[Diagnostic], traffic: dict[str, Any],
                           block_size_key: str, format_key: str) -> list[Diagnostic]:
    """The findings with the likely fix the files show: a file in another format than the
    configured one is one TRACE-FORMAT finding naming the format that reads it (instead of
    every field the wrong reader missed), and TRACE-CAPACITY gets the block size the rows were
    written with; the other findings are unchanged."""
    fmt = traffic.get("trace_format")
    out = list(diagnostics)
    for file in sorted({d.span.file for d in out if d.span.file and d.span.line is not None}):
        found = [d for d in out if d.span.file == file]
        other = _format_of(file)
        shaped = [d for d in found if d.rule in _SHAPE_RULES]
        if other is not None and other != fmt and not (other == "mooncake" and fmt in _MOONCAKE) \
                and any(d.severity == "error" for d in shaped):
            out = [d for d in out if d not in shaped]
            out.append(_wrong_format(file, str(fmt), other, shaped, format_key))
            continue
        capacity = [d.span.line for d in found if d.rule == "TRACE-CAPACITY"]
        sized = _block_size_hint(file, [n for n in capacity if n is not None], block_size_key) \
            if capacity and fmt in _MOONCAKE else None
        if sized is not None:
            out = [evolve(d, hint=sized) if d.span.file == file and d.hint is None
                   and d.rule == "TRACE-CAPACITY" else d for d in out]
    return sort_unique(out)


def _wrong_format(file: str, fmt: str, other: str, shaped: list[Diagnostic],
                  format_key: str) -> Diagnostic:
    rules = ", ".join(sorted({d.rule for d in shaped}))
    first = min(shaped, key=Diagnostic.sort_key)
    return Diagnostic(
        "TRACE-FORMAT", "error", f"this file looks like {_FORMAT_NAMES[other]}, not a {fmt} "
        f"trace: the {fmt} reader refused it ({len(shaped):,} finding(s): {rules}; the first: "
        f"{first.message})", Span(file=file, line=first.span.line, column=first.span.column),
        hint=f"set `{format_key}: {other}`")


def _numbered(stream: BinaryIO) -> Iterator[tuple[int, bytes | None]]:
    """Each line with its 1-based number (split at `\n`, as the readers count them); None for
    a line longer than _MAX_LINE, which is skipped without holding it."""
    number = 0
    while raw := stream.readline(_MAX_LINE + 1):
        number += 1
        if len(raw) > _MAX_LINE and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):
                raw = stream.readline(_MAX_LINE + 1)
            yield number, None
        else:
            yield number, raw


def _lines(path: str, wanted: set[int]) -> Iterator[bytes]:
    """The wanted lines of a file (1-based numbers), in order."""
    last = max(wanted, default=0)
    try:
        with open_regular(path) as stream:
            for number, raw in _numbered(stream):
                if number > last:
                    return
                if number in wanted and raw is not None:
                    yield raw
    except OSError:
        return


def _format_of(path: str) -> str | None:
    """The trace format the first non-blank line reads as, if it is one of the known shapes."""
    try:
        with open_regular(path) as stream:
            first = next((raw for _, raw in _numbered(stream) if raw is None or raw.strip()),
                         None)
    except OSError:
        return None
    if first is None:
        return None
    try:
        row = json.loads(first)
    except ValueError:
        return None
    if not isinstance(row, dict):
        return None
    if row.get("schema") == "dynamo.agentic_mooncake":
        return "agentic_mooncake"
    if isinstance(row.get("requests"), list):
        return "weka"
    if "hash_ids" in row and ("output_length" in row or "input_length" in row):
        return "mooncake"
    return None


def _block_size_hint(path: str, lines: list[int], key: str) -> str | None:
    """The block size every refused row fits exactly (its hash ids, the last one partly
    filled, cover its input_length), when one does."""
    low, high = 1, None
    for raw in _lines(path, set(sorted(lines)[:_SAMPLE_ROWS])):
        try:
            row = json.loads(raw)
            tokens, blocks = int(row["input_length"]), len(row["hash_ids"])
        except (ValueError, KeyError, TypeError):
            continue
        if blocks < 1 or tokens < 1:
            continue
        low = max(low, -(-tokens // blocks))
        if blocks > 1:
            most = (tokens - 1) // (blocks - 1)
            high = most if high is None else min(high, most)
    if high is not None and low > high:
        return (f"no one block size fits these rows (they need {low:,} tokens per hash id or "
                "more, but fewer for others): check their input_length and hash_ids")
    size = 1 << (low - 1).bit_length()  # the block sizes engines use are powers of two
    if high is not None and size > high:
        size = low
    fits = f"at least {low:,}" if high is None else f"{low:,}" if high == low \
        else f"any size from {low:,} to {high:,}"
    return (f"the hash ids of these rows cover {size:,} tokens each ({fits} fits every one): "
            f"set `{key}: {size}`")
