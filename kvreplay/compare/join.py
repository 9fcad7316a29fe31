"""The per-request join: the same requests in both runs, by identity, and how each moved.

Rows are matched by `uuid` (the trace ordinal) and must agree on what identifies a request in
the trace (`IDENTITY`); when the reports record their traces' digests (meta.provenance) these
must match too. Otherwise the join is skipped with the reason, never guessed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from kvreplay.report_file import JOINED_FIGURES

METRICS = JOINED_FIGURES
RANKED_BY = "e2e_latency_ms"
IDENTITY = ("request_id", "session_id", "turn_index", "play_id", "input_length")
PERCENTILES = (10, 50, 90, 99)


@attrs.frozen
class DeltaStats:
    """Per-request deltas (new - base, ms) of one metric over requests completed in both."""

    count: int = 0
    slower: int = 0
    faster: int = 0
    unchanged: int = 0
    mean: float | None = None
    min: float | None = None
    max: float | None = None
    percentiles: tuple[tuple[int, float], ...] = ()


@attrs.frozen
class RequestMove:
    """One request that got slower: its identity and both runs' times."""

    uuid: str
    request_id: Any
    session_id: Any
    turn_index: Any
    base: Mapping[str, float | None]
    new: Mapping[str, float | None]

    def delta(self, metric: str) -> float | None:
        before, after = self.base.get(metric), self.new.get(metric)
        return None if before is None or after is None else after - before


@attrs.frozen
class RequestJoin:
    """The join, or why there is none (`skipped`)."""

    skipped: str | None = None
    other_trace: str | None = None  # what shows that the runs replayed different traces
    matched: int = 0
    only_base: int = 0
    only_new: int = 0
    not_completed: int = 0  # matched, but not completed in one run or both
    stats: Mapping[str, DeltaStats] = attrs.field(factory=dict)
    top: tuple[RequestMove, ...] = ()


def join_requests(base: Mapping[str, Any], new: Mapping[str, Any], *,
                  top: int = 10) -> RequestJoin:
    reason = _unjoinable(base, new)
    if reason is not None:
        return RequestJoin(skipped=reason, other_trace=different_traces(base, new))
    theirs = {row["uuid"]: row for row in new["per_request"]}
    pairs: list[tuple[Mapping[str, Any], Mapping[str, Any]]] = []
    only_base = 0
    for row in base["per_request"]:
        other = theirs.get(row["uuid"])
        if other is None:
            only_base += 1
            continue
        for key in IDENTITY:
            if row.get(key) != other.get(key):
                evidence = (f"request {row['uuid']} differs in `{key}` ({row.get(key)!r} vs "
                            f"{other.get(key)!r})")
                return RequestJoin(skipped=f"{evidence}: the runs did not replay the same trace",
                                   other_trace=evidence)
        pairs.append((row, other))
    completed = [(a, b) for a, b in pairs if _completed(a) and _completed(b)]
    moves = [_move(a, b) for a, b in completed]
    stats = {metric: _stats([d for m in moves if (d := m.delta(metric)) is not None])
             for metric in METRICS}
    slower = [m for m in moves if (m.delta(RANKED_BY) or 0.0) > 0.0]
    slower.sort(key=lambda m: (-(m.delta(RANKED_BY) or 0.0), m.uuid))
    return RequestJoin(matched=len(pairs), only_base=only_base,
                       only_new=len(theirs) - len(pairs), not_completed=len(pairs) - len(completed),
                       stats=stats, top=tuple(slower[:max(top, 0)]))


def _unjoinable(base: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    for label, report in (("BASE", base), ("NEW", new)):
        if not report["per_request"]:
            return (f"{label} has no per-request rows (written with `kvreplay run -o` and "
                    "--per-request full)")
    if different_traces(base, new) is not None:
        return "the runs replayed different traces (meta.provenance.traces digests differ)"
    return None


def different_traces(base: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """How the traces the two reports record (meta.provenance.traces) differ, or None when
    they are the same or a report does not record them."""
    ours, theirs = _traces(base), _traces(new)
    if ours is None or theirs is None or [d for _, d in ours] == [d for _, d in theirs]:
        return None
    return f"BASE replayed {_listed(ours)}, NEW {_listed(theirs)}"


def _traces(report: Mapping[str, Any]) -> list[tuple[Any, Any]] | None:
    provenance = report["meta"].get("provenance")
    traces = provenance.get("traces") if isinstance(provenance, Mapping) else None
    if not isinstance(traces, list):
        return None
    return [(t.get("path"), t.get("digest")) for t in traces if isinstance(t, dict)]


def _listed(traces: Sequence[tuple[Any, Any]]) -> str:
    def one(path: Any, digest: Any) -> str:
        short = str(digest)[:19] if digest is not None else "no digest"
        return f"{path} ({short})" if path is not None else short

    return " + ".join(one(p, d) for p, d in traces) or "no trace"


def _completed(row: Mapping[str, Any]) -> bool:
    return row.get("terminal_status") == "completed"


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _move(base: Mapping[str, Any], new: Mapping[str, Any]) -> RequestMove:
    return RequestMove(uuid=base["uuid"], request_id=base.get("request_id"),
                       session_id=base.get("session_id"), turn_index=base.get("turn_index"),
                       base={m: _number(base.get(m)) for m in METRICS},
                       new={m: _number(new.get(m)) for m in METRICS})


def _stats(deltas: Sequence[float]) -> DeltaStats:
    if not deltas:
        return DeltaStats()
    ordered = sorted(deltas)
    n = len(ordered)
    # nearest rank, halves up (as the report's per-request percentiles)
    points = tuple((p, ordered[min(int((n - 1) * p / 100 + 0.5), n - 1)]) for p in PERCENTILES)
    return DeltaStats(count=n, slower=sum(1 for d in ordered if d > 0),
                      faster=sum(1 for d in ordered if d < 0),
                      unchanged=sum(1 for d in ordered if d == 0), mean=math.fsum(ordered) / n,
                      min=ordered[0], max=ordered[-1], percentiles=points)
