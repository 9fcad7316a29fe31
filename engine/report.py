"""The canonical report: `{"summary": {...}, "per_request": [...], "meta": {...}}`.

`summary` and `per_request` are functions of the simulation only (identical runs give identical
bytes); everything that depends on the machine or on how the engine ran (version, wall time, rates
per wall second, engine mode switches) goes to `meta`. Summary keys and their definitions follow
the reference engine's report; docs/traces-and-reports.md lists them.

The core gives the finished `RequestRecord`s and its `RunFacts` (engine/result.py);
`facts_from_core` turns those into the `ReportFacts` the report is built from.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping
from itertools import accumulate, islice
from typing import Any

from kvreplay.engine.canonical_json import canonical_json
from kvreplay.engine.collect import no_collections
from kvreplay.engine.metrics import Distribution, StreamingDistribution, exact_distribution
from kvreplay.engine.records import BurstGaps, PassSeries, PassSpan, RequestRecord, SharedGaps
from kvreplay.engine.result import RunFacts, RunResult
from kvreplay.engine.row_fields import per_request_row as per_request_row  # re-exported
from kvreplay.engine.row_fields import uuid_for as uuid_for  # re-exported
from kvreplay.engine.simtime import NS_PER_MS
from kvreplay.engine.speculation_report import speculation_summary
from kvreplay.schema.sla import Sla as Sla  # re-exported: report callers name it here
from kvreplay.schema.version import VERSION

REPORT_VERSION = 1


class ReportError(ValueError):
    """Records that cannot be reported consistently (a bug upstream, named by request uuid)."""


_FACTS = ("decode_workers", "prefill_workers", "decode_gpus_per_worker",
          "prefill_gpus_per_worker", "decode_worker_seconds", "prefill_worker_seconds",
          "committed_prefill_tokens", "duration_ms", "sla", "kv_eviction_policy", "wall_time_ms",
          "summary_extra", "meta", "telemetry", "speculation_draws")


class ReportFacts:
    """What the report needs of a run beyond its request records (from the core's RunFacts).

    Workers: the reference reports an aggregated deployment as decode workers (prefill 0).
    `*_worker_seconds` is provisioned worker time; None means a static pool, `workers x duration`.
    `duration_ms` None means the reference's definition: the last terminal time of a completed
    request. `committed_prefill_tokens` (prompt tokens actually computed, re-computation after
    preemption included) is not derivable from records; None reports null. `summary_extra` adds
    engine-specific summary keys (e.g. `g2_domains`); `meta` adds run switches (never compared).
    """

    # A plain class (keyword construction, equality and repr as `@attrs.frozen` gave them),
    # not importing attrs at each run's start (issue 29); compiled by mypyc with the core.

    def __init__(self, decode_workers: int = 0, prefill_workers: int = 0,
                 decode_gpus_per_worker: int = 0, prefill_gpus_per_worker: int = 0,
                 decode_worker_seconds: float | None = None,
                 prefill_worker_seconds: float | None = None,
                 committed_prefill_tokens: int | None = None, duration_ms: float | None = None,
                 sla: Sla | None = None, kv_eviction_policy: str = "lru",
                 wall_time_ms: float | None = None,
                 summary_extra: Mapping[str, Any] | None = None,
                 meta: Mapping[str, Any] | None = None,
                 telemetry: Mapping[str, Any] | None = None,
                 speculation_draws: tuple[int, ...] | None = None) -> None:
        self.decode_workers = decode_workers
        self.prefill_workers = prefill_workers
        self.decode_gpus_per_worker = decode_gpus_per_worker
        self.prefill_gpus_per_worker = prefill_gpus_per_worker
        self.decode_worker_seconds = decode_worker_seconds
        self.prefill_worker_seconds = prefill_worker_seconds
        self.committed_prefill_tokens = committed_prefill_tokens
        self.duration_ms = duration_ms
        self.sla = sla
        self.kv_eviction_policy = kv_eviction_policy
        self.wall_time_ms = wall_time_ms
        self.summary_extra: Mapping[str, Any] = {} if summary_extra is None else summary_extra
        self.meta: Mapping[str, Any] = {} if meta is None else meta
        self.telemetry = telemetry  # the report's `telemetry`, when sampled
        self.speculation_draws = speculation_draws  # MTP ranks' draw histogram (merged)

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in _FACTS)

    def __eq__(self, other: object) -> bool:
        if type(other) is not ReportFacts:
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in zip(_FACTS, self._values(), strict=True))
        return f"ReportFacts({shown})"


def _check_gaps(record: RequestRecord, produced: int, negative: bool) -> None:
    """A record holds output_length - 1 token gaps (a core bug otherwise)."""
    expected = max(record.output_length - 1, 0)
    if produced != expected or negative:
        raise ReportError(f"request {uuid_for(record.ordinal)}: itl_gaps hold {produced} gaps for "
                          f"{record.output_length} output tokens (expected {expected})")


def _fold_gaps(record: RequestRecord, gaps: dict[float, int],
               shared: dict[SharedGaps | PassSpan, int], speculation: list[int]) -> None:
    """Count a completed record's token gaps: run-length gaps by value (negative ones as 0),
    a stretch's SharedGaps and a PassSpan by reference, an MTP stretch's BurstGaps by value;
    checked to hold output_length - 1 gaps. A record decoded with MTP adds its steps, drafts
    and accepted drafts to `speculation` (with one request more)."""
    if record.speculative_steps is not None:
        speculation[0] += 1
        speculation[1] += record.speculative_steps
        speculation[2] += record.draft_tokens
        speculation[3] += record.accepted_draft_tokens
    produced = 0
    negative = False
    for entry in record.itl_gaps:
        if isinstance(entry, tuple):
            gap, count = entry
            if gap < 0.0:  # max(gap, 0.0)
                gap = 0.0
            gaps[gap] = gaps.get(gap, 0) + count
        elif isinstance(entry, BurstGaps):
            count = entry.count
            entry.fold(gaps)
        else:
            count = entry.count
            shared[entry] = shared.get(entry, 0) + 1
        produced += count
        if count < 0:
            negative = True
    output = record.output_length
    if negative or produced != (output - 1 if output > 1 else 0):
        _check_gaps(record, produced, negative)


class SummaryAccumulator:
    """The summary's inputs, accumulated one terminal record at a time (in any order): counters,
    every per-request sample (8 bytes each), and token gaps grouped by value (a stretch's
    SharedGaps are counted per record and folded in by value when the summary is made)."""

    def __init__(self, sla: Sla | None) -> None:
        self.sla = sla if sla is not None and sla.is_set else None
        self.ttfts = array("d")
        self.ttsts = array("d")
        self.tpots = array("d")
        self.e2es = array("d")
        self.gaps: dict[float, int] = {}
        # Records referencing each SharedGaps (a PassSpan: 1, each its record's own).
        self.shared: dict[SharedGaps | PassSpan, int] = {}
        self.completed = self.input_tokens = self.output_tokens = self.reused = 0
        self.first_reused = self.host_reused = self.good_requests = self.good_tokens = 0
        self.g3_reused = 0
        self.last_terminal = 0.0
        self.rejected: dict[tuple[str, int] | None, int] = {}  # RequestRecord.rejection: count
        # Completed requests decoded speculatively: count, steps, draft and accepted tokens.
        self.speculation = [0, 0, 0, 0]

    def add(self, r: RequestRecord) -> None:
        """Count a record (only completed ones enter the statistics)."""
        self.add_all((r,))

    def add_all(self, records: Iterable[RequestRecord]) -> None:
        """Count records, in one loop over locals (the sink hands them a batch at a time)."""
        completed, input_tokens, output_tokens = self.completed, self.input_tokens, \
            self.output_tokens
        reused, first_reused, host_reused = self.reused, self.first_reused, self.host_reused
        good_requests, good_tokens, last_terminal, g3_reused = (
            self.good_requests, self.good_tokens, self.last_terminal, self.g3_reused)
        gaps, shared, rejected, sla = self.gaps, self.shared, self.rejected, self.sla
        ttfts, ttsts, tpots, e2es = (self.ttfts.append, self.ttsts.append, self.tpots.append,
                                     self.e2es.append)
        try:
            for r in records:
                terminal = r.terminal_time_ms
                if terminal is None or r.first_admit_ms is None or r.terminal_status != "completed":
                    if r.terminal_status == "rejected":
                        rejected[r.rejection] = rejected.get(r.rejection, 0) + 1
                    continue
                completed += 1
                input_tokens += r.input_length
                output_tokens += r.output_length
                # The reference's ratio counts a P/D request's better reuse of its two pools.
                decode = r.decode_reused_input_tokens
                reused += r.reused_input_tokens if decode is None or \
                    decode < r.reused_input_tokens else decode
                first_reused += (r.admission_history[0].reused_input_tokens
                                 if r.admission_history else 0)
                host_reused += r.first_admission_host_reused_input_tokens or 0
                g3_reused += r.first_admission_g3_reused_input_tokens or 0
                if terminal > last_terminal:  # max(last_terminal, terminal)
                    last_terminal = terminal
                _fold_gaps(r, gaps, shared, self.speculation)
                first, last = r.first_token_ms, r.last_token_ms
                if first is None or last is None:
                    if sla is not None and sla.is_good_without_tokens(
                            max(terminal - r.arrival_time_ms, 0.0)):
                        good_requests += 1
                    continue
                # max(x, 0.0) spelled out: the same value and type, without the call
                ttft = first - r.arrival_time_ms
                ttft = 0.0 if ttft < 0.0 else ttft
                e2e = last - r.arrival_time_ms
                e2e = 0.0 if e2e < 0.0 else e2e
                ttfts(ttft)
                e2es(e2e)
                if sla is not None and sla.is_good(ttft, e2e, r.output_length):
                    good_requests += 1
                    good_tokens += r.output_length
                second = r.second_token_ms
                if second is not None:
                    ttst = second - first
                    ttsts(0.0 if ttst < 0.0 else ttst)
                if r.output_length >= 2:  # the row's itl_ms
                    span = last - first
                    tpots((0.0 if span < 0.0 else span) / (r.output_length - 1))
        finally:
            self.completed, self.input_tokens, self.output_tokens = completed, input_tokens, \
                output_tokens
            self.reused, self.first_reused, self.host_reused = reused, first_reused, host_reused
            self.good_requests, self.good_tokens, self.last_terminal, self.g3_reused = (
                good_requests, good_tokens, last_terminal, g3_reused)

    def finish(self, num_requests: int, facts: ReportFacts) -> dict[str, Any]:
        """The summary of `num_requests` records (terminal or not) given so far."""
        duration_ms = facts.duration_ms if facts.duration_ms is not None else self.last_terminal
        duration_s = max(duration_ms / 1000.0, 1e-9)
        itl, rate = self._token_distributions()
        summary: dict[str, Any] = {
            **self._volumes(num_requests, duration_ms, duration_s),
            **_billing(facts, duration_s),
            **self._reuse(),
            "committed_prefill_tokens": facts.committed_prefill_tokens,
            "kv_eviction_policy": facts.kv_eviction_policy,
            "power_w": None,
            "power_coverage": None,
            "max_itl_ms": itl.max,
        }
        stats: list[tuple[str, Distribution, str]] = [
            ("ttft", exact_distribution(self.ttfts), "_ms"),
            ("ttst", exact_distribution(self.ttsts), "_ms"),
            ("tpot", exact_distribution(self.tpots), "_ms"),
            ("itl", itl, "_ms"),
            ("e2e_latency", exact_distribution(self.e2es), "_ms"),
            ("output_token_throughput_per_user", rate, ""),
        ]
        for name, dist, unit in stats:
            summary.update(dist.summary(name, unit))
        summary["num_ttft_samples"] = len(self.ttfts)
        summary["num_tpot_samples"] = len(self.tpots)
        summary["num_e2e_latency_samples"] = len(self.e2es)
        if self.sla is not None:
            summary["goodput_completed_requests"] = self.good_requests
            summary["goodput_request_throughput_rps"] = self.good_requests / duration_s
            summary["goodput_output_throughput_tok_s"] = self.good_tokens / duration_s
        if self.speculation[0] or facts.speculation_draws is not None:
            summary["speculation"] = self._speculation(facts)
        if "g2_transfers" in facts.summary_extra:  # kvreplay's own figure: restored share of input
            summary["first_admission_host_reused_ratio"] = self._share(self.host_reused)
        if "g3_offload" in facts.summary_extra:  # of the host share, what G3 brought up first
            summary["first_admission_g3_reused_ratio"] = self._share(self.g3_reused)
        for key, value in facts.summary_extra.items():
            if key in summary:
                raise ReportError(f"summary_extra key {key!r} would replace a computed summary key")
            summary[key] = value
        return summary

    def _volumes(self, num_requests: int, duration_ms: float,
                 duration_s: float) -> dict[str, Any]:
        """Request and token counts and their rates per simulated second."""
        completed, tokens_in, tokens_out = self.completed, self.input_tokens, self.output_tokens
        return {
            "num_requests": num_requests,
            "completed_requests": completed,
            "rejected_requests": sum(self.rejected.values()),
            "rejections": rejections(self.rejected),
            "total_input_tokens": tokens_in,
            "total_output_tokens": tokens_out,
            "processed_tokens": tokens_in + tokens_out,
            "duration_ms": float(duration_ms),
            "request_throughput_rps": completed / duration_s,
            "input_throughput_tok_s": tokens_in / duration_s,
            "output_throughput_tok_s": tokens_out / duration_s,
            "total_throughput_tok_s": (tokens_in + tokens_out) / duration_s,
        }

    def _share(self, tokens: int) -> float:
        """`tokens` as a share of the completed requests' input (0 without input)."""
        return tokens / self.input_tokens if self.input_tokens else 0.0

    def _reuse(self) -> dict[str, float]:
        return {"prefix_cache_reused_ratio": self._share(self.reused),
                "first_admission_prefix_cache_reused_ratio": self._share(self.first_reused)}

    def _token_distributions(self) -> tuple[Distribution, Distribution]:
        """ITL and per-user output rate over every token gap (equal gaps added as one run: the
        moments are exact, the sketch counts per bin, so neither depends on how runs split)."""
        itl = StreamingDistribution()
        rate = StreamingDistribution()
        for gaps, counts in self.gap_runs():
            itl.add_columns(gaps, counts)
            # Each batch is sorted, so its zero gaps (no rate) lead.
            skip = bisect_right(gaps, 0.0)
            rate.add_columns([1000.0 / gap for gap in gaps[skip:]], counts[skip:])
        return itl.finish(), rate.finish()

    def _speculation(self, facts: ReportFacts) -> dict[str, Any]:
        """The summary's `speculation` block (speculation_report.py): the gaps of 0 ms are the
        tokens of one burst, the others the gaps between steps."""
        gaps = burst_gaps = 0
        step_itl = StreamingDistribution()
        for values, counts in self.gap_runs():
            gaps += sum(counts)
            skip = bisect_right(values, 0.0)
            burst_gaps += sum(counts[:skip])
            step_itl.add_columns(values[skip:], counts[skip:])
        return speculation_summary(self.speculation, facts.speculation_draws, gaps, burst_gaps,
                                   step_itl.finish())

    def gap_runs(self) -> Iterator[tuple[list[float], list[int]]]:
        """Every token gap of the completed records as columns (gaps_ms, counts), each batch
        sorted by gap, a bounded batch at a time: the records' own runs, then the pass series'
        and shared gaps merged by nanosecond value (each counted once per record referencing
        it). Merging across workers and batches matters under polynomial timing, where every
        pass has its own duration but workers repeat each other's (the 12k poly bench: 2.5
        million shared gaps, 153,000 values). The gaps of one weight (records referencing
        them) are sorted in C and run-length counted in one sequential pass, then the sorted
        columns merged, never a hash probe per gap; at most _MERGED_AT_ONCE gaps or distinct
        values are held at a time (the figures do not depend on how runs split: exact
        moments, sketch counts per bin)."""
        own = sorted(self.gaps.items())
        yield [gap for gap, _ in own], [count for _, count in own]
        by_weight: dict[int, list[SharedGaps]] = {}
        by_series: dict[PassSeries, list[tuple[PassSpan, int]]] = {}
        for shared, weight in self.shared.items():
            if isinstance(shared, PassSpan):
                by_series.setdefault(shared.series, []).append((shared, weight))
            else:
                by_weight.setdefault(weight, []).append(shared)
        at_once = _MERGED_AT_ONCE
        columns: list[tuple[list[int], list[int]]] = []  # sorted (gap_ns, count), to merge
        held = 0
        for series, spans in by_series.items():
            columns.append(_series_columns(series, spans))
            held += len(columns[-1][0])
            if held >= at_once:
                yield _ms_columns(columns)
                columns, held = [], 0
        for weight, group in by_weight.items():
            gaps: list[int] = []
            for shared in group:
                durations = shared.durations
                for start in range(shared.start, len(durations), at_once):
                    gaps.extend(islice(durations, start, start + at_once))
                    if len(gaps) >= at_once:
                        gaps.sort()
                        columns.append(_run_lengths(gaps, weight))
                        held += len(columns[-1][0])
                        gaps = []
                        if held >= at_once:
                            yield _ms_columns(columns)
                            columns, held = [], 0
            if gaps:
                gaps.sort()
                columns.append(_run_lengths(gaps, weight))
                held += len(columns[-1][0])
                if held >= at_once:
                    yield _ms_columns(columns)
                    columns, held = [], 0
        if columns:
            yield _ms_columns(columns)


_MERGED_AT_ONCE = 1 << 19  # gaps, or distinct gap values, held at once (memory stays bounded)


def _run_lengths(ordered: list[int], weight: int) -> tuple[list[int], list[int]]:
    """Sorted gaps as (distinct gaps, occurrences x weight) columns, in one pass."""
    gaps: list[int] = []
    counts: list[int] = []
    if not ordered:
        return gaps, counts
    last = ordered[0]
    count = 0
    for gap in ordered:
        if gap != last:
            gaps.append(last)
            counts.append(count * weight)
            last = gap
            count = 0
        count += 1
    gaps.append(last)
    counts.append(count * weight)
    return gaps, counts


def _ms_columns(columns: list[tuple[list[int], list[int]]]) -> tuple[list[float], list[int]]:
    """Sorted nanosecond columns merged into one, equal gaps' counts summed, the gaps in
    milliseconds (ns_to_ms; gaps are >= 0, so no max(., 0.0), and dividing keeps their
    order). The merge is a C sort of the concatenated columns, each gap tagged with its
    position: a run of sorted runs, which the sort merges without comparing within a run."""
    if len(columns) == 1:
        gaps, counts = columns[0]
        return [gap / NS_PER_MS for gap in gaps], counts
    every: list[int] = []
    weights: list[int] = []
    for gaps, counts in columns:
        every.extend(gaps)
        weights.extend(counts)
    bits = len(every).bit_length()
    mask = (1 << bits) - 1
    tagged = [(gap << bits) | position for position, gap in enumerate(every)]
    tagged.sort()
    merged: list[float] = []
    summed: list[int] = []
    last = -1
    count = 0
    for reference in tagged:
        gap = reference >> bits
        if gap != last:
            if count:
                merged.append(last / NS_PER_MS)
                summed.append(count)
            last = gap
            count = 0
        count += weights[reference & mask]
    if count:
        merged.append(last / NS_PER_MS)
        summed.append(count)
    return merged, summed


def _series_columns(series: PassSeries, spans: list[tuple[PassSpan, int]]
                    ) -> tuple[list[int], list[int]]:
    """The gaps of a worker's pass series as sorted (gap, count) columns, each gap counted
    once per record referencing a span holding it: a difference array over the series, so
    the cost is the series' length plus the spans', never the tokens'; the referenced gaps
    are sorted as tagged integers (gap shifted up, its weight below)."""
    gaps = series.gaps
    deltas = [0] * (len(gaps) + 1)
    for span, weight in spans:
        deltas[span.start] += weight
        deltas[span.stop] -= weight
    weights = list(accumulate(deltas))[:len(gaps)]
    bits = max(weights, default=0).bit_length()
    tagged = [(gap << bits) | weight
              for gap, weight in zip(gaps.tolist(), weights, strict=True) if weight]
    tagged.sort()
    mask = (1 << bits) - 1
    values: list[int] = []
    counts: list[int] = []
    for reference in tagged:
        gap = reference >> bits
        if values and values[-1] == gap:
            counts[-1] += reference & mask
        else:
            values.append(gap)
            counts.append(reference & mask)
    return values, counts


# Why the engine rejects a request (RequestRecord.rejection's reason), as the summary says it.
REJECTIONS = {
    "kv_cache": "prompt larger than the KV cache",
    "decode_kv_cache": "prompt larger than the decode worker's KV cache",
    "max_model_len": "prompt at or above max_model_len",
    "other": "prompt the engine refused",
}


def rejections(counts: Mapping[tuple[str, int] | None, int]) -> list[dict[str, Any]]:
    """The summary's `rejections`: one entry per reason and limit, by reason then limit."""
    out = []
    for why in sorted(counts, key=lambda w: ("other", -1) if w is None else w):
        reason, limit = why if why is not None else ("other", None)
        text = REJECTIONS[reason] + (f" (max {limit:,} tokens)" if limit is not None else "")
        if reason == "max_model_len" and limit is not None:
            text = f"{REJECTIONS[reason]} ({limit:,} tokens)"
        out.append({"reason": reason, "limit_tokens": limit, "count": counts[why],
                    "message": text})
    return out


def rejection_text(summary: Mapping[str, Any]) -> str | None:
    """`2 rejected: prompt larger than the KV cache (max 102,400 tokens)`, or None when the
    summary counts no rejection (or is from a report without the figure)."""
    count = summary.get("rejected_requests")
    if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
        return None
    entries = summary.get("rejections")
    reasons = [e for e in entries if isinstance(e, Mapping)] if isinstance(entries, list) else []
    if len(reasons) == 1:
        return f"{count:,} rejected: {reasons[0].get('message')}"
    parts = [f"{e.get('count')} {_plural(str(e.get('message')), e.get('count') != 1)}"
             for e in reasons]
    return f"{count:,} rejected" + (f": {', '.join(parts)}" if parts else "")


def _plural(message: str, several: bool) -> str:
    return "prompts" + message[len("prompt"):] if several and message.startswith("prompt ") \
        else message


def _billing(facts: ReportFacts, duration_s: float) -> dict[str, Any]:
    """Provisioned worker time and GPU hours (static pools: workers x duration)."""
    prefill_ws = (facts.prefill_worker_seconds if facts.prefill_worker_seconds is not None
                  else facts.prefill_workers * duration_s)
    decode_ws = (facts.decode_worker_seconds if facts.decode_worker_seconds is not None
                 else facts.decode_workers * duration_s)
    return {
        "prefill_worker_seconds": float(prefill_ws),
        "decode_worker_seconds": float(decode_ws),
        "prefill_gpus_per_worker": facts.prefill_gpus_per_worker,
        "decode_gpus_per_worker": facts.decode_gpus_per_worker,
        "gpu_hours": (prefill_ws * facts.prefill_gpus_per_worker
                      + decode_ws * facts.decode_gpus_per_worker) / 3600.0,
    }


def build_report(records: Iterable[RequestRecord], facts: ReportFacts, *,
                 per_request: bool = True, version: str | None = None) -> dict[str, Any]:
    """The report of a finished run.

    `records`: every request that arrived (terminal or not: `num_requests` counts them all);
    only terminal ones are listed in `per_request` (sorted by uuid), only completed ones enter
    the statistics. `per_request=False` leaves the list empty (spec.record_per_request false).
    """
    with no_collections():
        ordered = sorted(records, key=lambda r: r.ordinal)
        seen = {r.ordinal for r in ordered}
        if len(seen) != len(ordered):
            raise ReportError("two records share an ordinal (uuids would collide)")
        acc = SummaryAccumulator(facts.sla)
        acc.add_all(ordered)
        summary = acc.finish(len(ordered), facts)
        rows = ([per_request_row(r) for r in ordered if listed(r)] if per_request else [])
    return with_telemetry(
        {"summary": summary, "per_request": rows, "meta": report_meta(summary, facts, version)},
        facts)


def with_telemetry(report: dict[str, Any], facts: ReportFacts) -> dict[str, Any]:
    """The report, with its top-level `telemetry` when the run sampled the engine."""
    if facts.telemetry is not None:
        report["telemetry"] = facts.telemetry
    return report


def listed(r: RequestRecord) -> bool:
    """Terminal requests are listed in `per_request`."""
    return r.terminal_status is not None and r.terminal_time_ms is not None


def report_meta(summary: Mapping[str, Any], facts: ReportFacts,
                version: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "report_version": REPORT_VERSION,
        "generator": "kvreplay",
        "kvreplay_version": version if version is not None else VERSION,
        "wall_time_ms": facts.wall_time_ms,
        "processed_tokens_per_s": None,
        "processed_output_tokens_per_s": None,
    }
    if facts.wall_time_ms is not None and facts.wall_time_ms > 0:
        meta["processed_tokens_per_s"] = summary["processed_tokens"] / facts.wall_time_ms * 1000
        meta["processed_output_tokens_per_s"] = (
            summary["total_output_tokens"] / facts.wall_time_ms * 1000)
    for key, value in facts.meta.items():
        if key in meta:
            raise ReportError(f"meta key {key!r} is reserved")
        meta[key] = value
    return meta


def facts_from_core(core: RunFacts, *, sla: Sla | None = None,
                    wall_time_ms: float | None = None) -> ReportFacts:
    """The report's facts from the core's: static pools are billed until the clock stopped
    (`end_ms`), as the reference does; the summary's duration keeps the reference definition;
    the core's mode switches and counters go to `meta`."""
    workers = {"prefill": 0, "decode": 0}
    gpus = {"prefill": 0, "decode": 0}
    for pool in core.pools:
        role = "prefill" if pool.name == "prefill" else "decode"
        workers[role] += pool.workers
        gpus[role] = max(gpus[role], pool.gpus_per_worker)
    end_s = max(core.end_ms / 1000.0, 1e-9)
    billed = {"prefill": workers["prefill"] * end_s, "decode": workers["decode"] * end_s}
    scaling = core.scaling
    if scaling is not None:  # provisioned from each worker's start request to its removal
        billed = {"prefill": 0.0, "decode": 0.0}
        for name, seconds in scaling["worker_seconds"].items():
            billed["prefill" if name == "prefill" else "decode"] += seconds
    meta = {"mode": core.mode, "router": core.router, "stepwise": core.stepwise,
            "passes": core.passes, "fast_forwarded_passes": core.fast_forwarded_passes,
            "approximations": core.approximations, "preemptions_total": core.preemptions_total,
            "requests_released": core.requests_released,
            "requests_terminal": core.requests_terminal, "max_sim_time_ms": core.max_sim_time_ms,
            "stopped_at_time_cap": core.stopped_at_time_cap, "end_ms": core.end_ms}
    extra: dict[str, Any] = {}
    if core.g2_domains is not None:  # the reference reports the shared pool only
        extra["g2_domains"] = core.g2_domains
    if core.host_transfers is not None:
        extra["g2_transfers"] = core.host_transfers
    if core.g2_timeline is not None:
        extra["g2_timeline"] = core.g2_timeline
    if core.g3_offload is not None:  # the reference's block, then kvreplay's own timeline
        extra["g3_offload"] = core.g3_offload
        extra["g3_timeline"] = core.g3_timeline
    extra.update(core.workload_summary or {})
    if scaling is not None:
        extra["scaling"] = {key: scaling[key] for key in
                            ("policy", "ticks", "lifecycle_operations", "replicas")}
    return ReportFacts(
        prefill_workers=workers["prefill"], decode_workers=workers["decode"],
        prefill_gpus_per_worker=gpus["prefill"], decode_gpus_per_worker=gpus["decode"],
        prefill_worker_seconds=billed["prefill"],
        decode_worker_seconds=billed["decode"],
        committed_prefill_tokens=core.committed_prefill_tokens,
        duration_ms=core.reported_duration_ms,
        kv_eviction_policy=core.kv_eviction_policy, sla=sla, wall_time_ms=wall_time_ms,
        summary_extra=extra, meta=meta, telemetry=core.telemetry,
        speculation_draws=core.speculation_draws)


def report_from_run(result: RunResult, *, sla: Sla | None = None,
                    wall_time_ms: float | None = None, per_request: bool = True,
                    version: str | None = None) -> dict[str, Any]:
    """The report of the core's `RunResult` (records + facts), for the CLI."""
    facts = facts_from_core(result.facts, sla=sla, wall_time_ms=wall_time_ms)
    return build_report(result.records, facts, per_request=per_request, version=version)


def sla_from_spec(sla: Mapping[str, Any] | None) -> Sla | None:
    """`spec.sla` of a native document ({ttft_ms, itl_ms, e2e_ms} or null)."""
    if sla is None:
        return None
    return Sla(ttft_ms=sla.get("ttft_ms"), itl_ms=sla.get("itl_ms"), e2e_ms=sla.get("e2e_ms"))


def dumps_report(report: Mapping[str, Any]) -> str:
    """Canonical text: sorted keys, 2-space indent, one trailing newline; NaN/Infinity refused."""
    bad = non_finite(report, "$")
    if bad is not None:
        raise ReportError(f"non-finite number at {bad}: a report must hold finite numbers only")
    return canonical_json(report) + "\n"


def non_finite(value: Any, path: str) -> str | None:
    if isinstance(value, float):
        return None if math.isfinite(value) else path
    if isinstance(value, Mapping):
        for key, item in value.items():
            found = non_finite(item, f"{path}.{key}")
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = non_finite(item, f"{path}[{i}]")
            if found is not None:
                return found
    return None
