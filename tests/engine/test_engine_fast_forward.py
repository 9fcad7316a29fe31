"""Fast-forwarded decode stretches under polynomial timing: the same records and report bytes as
stepping every pass, with each stretch's token gaps stored once (SharedGaps) for all of its
requests, and pass durations computed in one series."""

from __future__ import annotations

import json
import random
from array import array
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from engine_support import mooncake_rows, mooncake_workload, native, native_pd, record_dict

from kvreplay.engine import run_native
from kvreplay.engine.records import PassSeries, PassSpan, RequestRecord, SharedGaps
from kvreplay.engine.report import dumps_report, report_from_run
from kvreplay.engine.report_stream import ReportStream, write_report
from kvreplay.engine.result import PoolFacts, RunFacts, RunResult
from kvreplay.engine.timing import PassTimer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "traces"
POLY = {"backend": "vllm", "block_size": 512, "num_gpu_blocks": 1000,
        "timing_model": {"type": "polynomial"}}
# How the engine ran (never equal between the two modes); everything else must be.
MODE_META = ("stepwise", "passes", "fast_forwarded_passes")


def replay(rows: list[dict[str, Any]], stepwise: bool, **options: Any) -> RunResult:
    return run_native(native(dict(POLY), **options), workload=mooncake_workload(rows, 512),
                      stepwise=stepwise)


def report_text(result: RunResult) -> str:
    report = report_from_run(result, version="test")
    report["meta"] = {k: v for k, v in report["meta"].items() if k not in MODE_META}
    return dumps_report(report)


def assert_same_as_stepwise(rows: list[dict[str, Any]], **options: Any) -> RunResult:
    fast = replay(rows, stepwise=False, **options)
    slow = replay(rows, stepwise=True, **options)
    assert fast.facts.fast_forwarded_passes > 0
    assert any(isinstance(entry, SharedGaps) for r in fast.records for entry in r.itl_gaps)
    assert not any(isinstance(entry, SharedGaps) for r in slow.records for entry in r.itl_gaps)
    assert [record_dict(r) for r in fast.records] == [record_dict(r) for r in slow.records]
    assert report_text(fast) == report_text(slow)
    return fast


@pytest.mark.parametrize("dp_size", [1, 2])
def test_polynomial_fast_forward_equals_step_by_step_on_the_example_trace(dp_size: int) -> None:
    """200 conversation rows, 2 workers (DP 2: a pass lasts as long as its slowest rank)."""
    rows = mooncake_rows(EXAMPLE / "mooncake-conversation-200.jsonl")
    assert_same_as_stepwise(rows, workers=2, dp_size=dp_size)


@pytest.mark.slow
def test_polynomial_fast_forward_equals_step_by_step_on_2000_rows(
        conversation_2000: tuple[list[dict[str, Any]], Path]) -> None:
    """The first 2,000 conversation rows, 8 workers as bench/bench_engine.py's poly regime:
    identical records and report bytes, and the streamed report (the CLI's) is the same text."""
    rows = conversation_2000[0]
    fast = assert_same_as_stepwise(rows, workers=8)
    stream = ReportStream(None, rows=True)
    try:
        streamed = run_native(native(dict(POLY), workers=8),
                              workload=mooncake_workload(rows, 512), sink=stream)
        report = stream.finish(streamed, version="test")
        assert len(streamed.records) == 0
        out = _Text()
        write_report(report, out)
        assert out.text == dumps_report(report_from_run(fast, version="test"))
    finally:
        stream.close()


class _Text:
    def __init__(self) -> None:
        self.text = ""

    def write(self, chunk: str) -> int:
        self.text += chunk
        return len(chunk)


def test_shared_gaps_fold_like_their_expansion() -> None:
    """A summary over records that share gap blocks (a stretch's SharedGaps, spans of a
    worker's pass series) equals the one over the same records with every gap written out as
    runs; only completed records count their shared gaps."""
    rnd = random.Random(7)
    blocks = []
    for _ in range(6):
        durations = [rnd.choice([5_000_000, 5_000_001, 7_250_000, rnd.randrange(1, 40_000_000)])
                     for _ in range(rnd.randrange(1, 30))]
        shared = array("q", durations)
        blocks += [SharedGaps(shared, 0), SharedGaps(shared, 1)]
        series = PassSeries()  # a worker's pass series, spans of it (PassSpan)
        series.gaps.extend(durations)
        start = rnd.randrange(len(durations))
        blocks += [PassSpan(series, start, rnd.randrange(start, len(durations) + 1))]
    records = []
    for ordinal in range(40):
        rec = RequestRecord(ordinal, f"r{ordinal}", float(ordinal), 10, 100)
        rec.first_admit_ms = rec.first_token_ms = float(ordinal) + 1.0
        for _ in range(rnd.randrange(0, 4)):
            rec.itl_gaps.append((rnd.choice([0.5, 2.0, 5.0, 5.000001]), rnd.randrange(1, 4)))
            block = rnd.choice(blocks)
            if block.count:
                rec.itl_gaps.append(block)
        rec.output_length = rec.itl_count() + 1
        rec.last_token_ms = rec.first_token_ms + 10.0
        rec.terminal_time_ms = rec.last_token_ms
        rec.terminal_status = rnd.choice(["completed", "completed", "canceled"])
        records.append(rec)
    expanded = []
    for rec in records:
        copy = RequestRecord(rec.ordinal, rec.request_id, rec.arrival_time_ms, 10, 100)
        for name in RequestRecord.__slots__:
            setattr(copy, name, getattr(rec, name))
        copy.itl_gaps = list(rec.itl_runs())
        expanded.append(copy)
    core = RunFacts()
    core.pools, core.end_ms = [PoolFacts("aggregated", 1, 1, 1, 1, "vllm", 16, 100)], 100.0
    shared_report = report_from_run(RunResult(records, core), version="t")
    plain_report = report_from_run(RunResult(expanded, core), version="t")
    assert shared_report["summary"]["mean_itl_ms"] > 0
    assert json.dumps(shared_report, sort_keys=True) == json.dumps(plain_report, sort_keys=True)


def test_decode_series_equals_decode_ns_pass_by_pass() -> None:
    """The stretch series is decode_ns at each pass's token count, to the nanosecond (clamped
    at u = 1 too, and with speedup ratios)."""
    rnd = random.Random(3)
    for _ in range(400):
        blocks, block_size = rnd.randint(1, 2000), rnd.choice([1, 4, 16, 512])
        rank = SimpleNamespace(
            speedup_ratio=rnd.choice([0.0, 1.0, 2.0, 0.7, 3.1]),
            decode_speedup_ratio=rnd.choice([0.0, 1.0, 1.5, 0.33]),
            num_gpu_blocks=blocks, block_size=block_size, kv_cache_groups=None,
            timing_model=SimpleNamespace(type="polynomial", prefill_ms=1.0, decode_ms=1.0))
        timer = PassTimer(rank)  # type: ignore[arg-type]
        active = rnd.randint(0, blocks * block_size + 50)
        step, passes = rnd.randint(1, 40), rnd.randint(0, 600)
        assert timer.decode_series(active, step, passes) == [
            timer.decode_ns(active + j * step) for j in range(passes)]


def test_record_parts_to_dict_cover_every_field() -> None:
    """RoutingDecision and Admission list their fields explicitly in to_dict."""
    from kvreplay.engine.records import Admission, RoutingDecision

    route = RoutingDecision("agg", 1, 0, 2)
    admission = Admission(0, "agg", 0, 1.5, 4, None, None, False)
    assert list(route.to_dict()) == sorted(RoutingDecision.__slots__)
    assert list(admission.to_dict()) == sorted(Admission.__slots__)
    assert route.to_dict() == {name: getattr(route, name) for name in RoutingDecision.__slots__}
    assert admission.to_dict() == {name: getattr(admission, name)
                                   for name in Admission.__slots__}


def test_replay_runs_without_the_cycle_collector_and_restores_it() -> None:
    """The run and its report switch the cyclic collector off and back on, even on failure."""
    import gc

    from kvreplay.engine.collect import no_collections

    assert gc.isenabled()
    seen = []
    with pytest.raises(RuntimeError), no_collections():
        seen.append(gc.isenabled())
        raise RuntimeError
    assert seen == [False] and gc.isenabled()
    rows = mooncake_rows(EXAMPLE / "mooncake-conversation-200.jsonl", limit=20)
    report_from_run(replay(rows, stepwise=False, workers=2))
    assert gc.isenabled()


def test_reading_a_trace_runs_without_the_cycle_collector_and_restores_it() -> None:
    """A Mooncake trace is read and indexed with no collection (its rows live on), the
    collector back on afterwards, also when the trace does not read."""
    import gc

    from kvreplay.engine.traces import WorkloadError, workload_from_traffic

    traffic = {"source_type": "trace", "trace_format": "mooncake", "load_type":
               "trace_timestamps", "trace_block_size": 512,
               "trace_paths": ["mooncake-conversation-200.jsonl"]}
    seen: list[int] = []
    gc.callbacks.append(lambda phase, info: seen.append(info["generation"]))
    try:
        with_threshold = gc.get_threshold()
        gc.set_threshold(10)  # a collection every 10 new objects, if the collector ran
        workload = workload_from_traffic(traffic, base_dir=str(EXAMPLE), block_size=512)
        # (the call's first lines may collect once or twice; reading the rows with the
        # collector on collects about 40 times at this threshold)
        assert workload.total_requests == 200 and len(seen) <= 2 * 2 and gc.isenabled()
        with pytest.raises(WorkloadError):
            workload_from_traffic({**traffic, "trace_paths": ["absent.jsonl"]},
                                  base_dir=str(EXAMPLE), block_size=512)
        assert gc.isenabled()
    finally:
        gc.set_threshold(*with_threshold)
        gc.callbacks.pop()


def test_what_a_run_kept_is_counted_old_and_its_cycles_still_collected() -> None:
    """After the run, its survivors sit in the oldest generation (no young collection rescans
    them), a cycle among them is freed by a full collection, and objects someone else froze
    stay frozen."""
    import gc
    import weakref

    from kvreplay.engine.collect import no_collections

    class Node:
        pass

    gc.collect()
    with no_collections():
        kept = [[i] for i in range(50_000)]
        looped = Node()
        looped.self = looped  # type: ignore[attr-defined]
        alive = weakref.ref(looped)
        del looped
    assert gc.get_count()[0] < 1000 and gc.get_freeze_count() == 0
    assert alive() is not None
    gc.collect()
    assert alive() is None and len(kept) == 50_000
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with no_collections():
            kept.append([0])
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


@pytest.mark.parametrize("topology", ["aggregated", "disaggregated"])
def test_a_replay_makes_no_cycles_of_what_it_drops(topology: str) -> None:
    """What lets a run go without the cyclic collector: with G2 cluster-shared (the tier with
    the most back references), 200 rows, no sequence, pass outcome or handoff (what a run drops
    as it goes) is ever left in a reference cycle; what is, is the run's own graph at its end."""
    import gc

    import g2_support as g2

    from kvreplay.engine.handoff import Handoff
    from kvreplay.engine.scheduler import PassOutcome
    from kvreplay.engine.sequence import Seq

    rows = mooncake_rows(EXAMPLE / "mooncake-conversation-200.jsonl")
    host = g2.g2(scope="cluster_shared", num_host_blocks=300)
    shape = {"block_size": 512, "num_gpu_blocks": 60, "max_num_seqs": 8,
             "max_num_batched_tokens": 4096}
    if topology == "aggregated":
        document = native(g2.rank(host, **shape), workers=2)
    else:
        role = g2.pd_role(host, **shape)
        document = native_pd(role, role, decode_workers=2)
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        result = run_native(document, workload=mooncake_workload(rows, 512))
        report_from_run(result)
        assert result.facts.passes > 100
        del result
        gc.collect()
        transient = (Seq, PassOutcome, Handoff)
        dropped = [type(o).__name__ for o in gc.garbage if isinstance(o, transient)]
        kept = len(gc.garbage)
    finally:
        gc.garbage.clear()
        gc.set_debug(0)
        gc.enable()
    assert dropped == [] and kept > 0


def test_block_keys_are_one_to_one() -> None:
    """An int key for one-value blocks below 2**68 (every value space of traces/values.py), the
    pair otherwise: distinct (parent, content) pairs never share a key, whatever the parent's
    sign."""
    from kvreplay.engine.identity import ROOT, BlockIdentities, block_key
    from kvreplay.engine.traces import values

    parents = [ROOT, -2, -3, 0, 1, 2 ** 40]
    contents: list[object] = [0, 1, 2 ** 64 - 1, 2 ** 64, 2 ** 68 - 1, 2 ** 68, -1, (1, 3, 2, 1),
                              values.GENERATED_OUTPUT_BASE + 7, values.SYNTHETIC_GROUP_BASE + 3,
                              values.SYNTHETIC_UNIQUE_BASE + 19_999]
    assert values.SYNTHETIC_UNIQUE_BASE * 2 <= 2 ** 68  # synthetic prompts take the int key
    keys = {block_key(p, c) for p in parents for c in contents}
    assert len(keys) == len(parents) * len(contents)
    ids = BlockIdentities(keep_keys=True)
    chain = ids.prompt_blocks(((5, 4), (2 ** 64 - 1, 4), (7, 2), (8, 2)), 12, 4)
    assert chain == [0, 1, 2]
    assert ids.intern(ROOT, 5) == (0, False) and ids.intern(0, 2 ** 64 - 1) == (1, False)
    assert ids.intern(1, (7, 2, 8, 2)) == (2, False)
    assert ids.keys == [(ROOT, 5), (0, 2 ** 64 - 1), (1, (7, 2, 8, 2))]


def test_pool_memory_follows_the_blocks_in_use_not_the_capacity() -> None:
    """Handles are minted as blocks are needed: a schema-valid 3e9-block pool costs nothing up
    front, and a replay on it runs."""
    import tracemalloc

    from engine_support import rank

    from kvreplay.engine.pool import BlockPool

    tracemalloc.start()
    try:
        pool = BlockPool(3_000_000_000, False)
        blocks: list[int] = []
        pool.allocate(10, blocks)
        pool.register(blocks[0], 5)
        pool.release(blocks)
        pool.check()
        assert tracemalloc.get_traced_memory()[1] < 1 << 20
    finally:
        tracemalloc.stop()
    rows = mooncake_rows(EXAMPLE / "mooncake-conversation-200.jsonl", limit=20)
    doc = native(rank(block_size=512, num_gpu_blocks=3_000_000_000), workers=2)
    result = run_native(doc, workload=mooncake_workload(rows, 512))
    assert all(r.terminal_status == "completed" for r in result.records)


FIXED = {"backend": "vllm", "block_size": 512, "num_gpu_blocks": 1000,
         "timing_model": {"type": "fixed", "prefill_ms": 20.0, "decode_ms": 5.0}}
G2_RANK = {**FIXED, "kv_cache_bytes_per_token": 131072}


def _regime(name: str) -> dict[str, Any]:
    """bench/bench_engine.py's regimes (10x load is the rows' timestamps divided by 10)."""
    if name == "pd":
        pd_rank = {**FIXED, "kv_cache_bytes_per_token": 131072,
                   "kv_transfer_bytes_per_token": 131072, "kv_transfer_bandwidth": 25.0}
        return native_pd(pd_rank, pd_rank, prefill_workers=4, decode_workers=4)
    if name == "g2-local":
        return native({**G2_RANK, "native_host_offload": {
            "num_host_blocks": 4000, "d2h_bandwidth_gbps": 32.0, "h2d_bandwidth_gbps": 32.0}},
            workers=8)
    if name == "g2-shared":
        return native({**G2_RANK, "native_host_offload": {
            "scope": "cluster_shared", "num_host_blocks": 16000, "kv_layout_id": "bench",
            "d2h_bandwidth_gbps": 32.0, "h2d_bandwidth_gbps": 32.0}}, workers=8)
    if name == "mtp":
        return native({**FIXED, "aic_nextn": 2, "aic_nextn_accept_rates": "0.8,0.6",
                       "aic_mtp_seed": 42}, workers=8)
    return native(dict(FIXED), workers=8, router="kv_router" if name == "fixed-kv" else
                  "round_robin")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["fixed-rr", "fixed-kv", "load10x", "pd", "g2-local",
                                  "g2-shared", "mtp"])
def test_every_bench_regime_fast_forward_equals_step_by_step_on_2000_rows(
        name: str, conversation_2000: tuple[list[dict[str, Any]], Path]) -> None:
    """The first 2,000 conversation rows in each other regime of bench/bench_engine.py:
    fast-forwarded and step-by-step replays give identical records and report bytes."""
    rows = conversation_2000[0]
    if name == "load10x":
        rows = [{**row, "timestamp": row["timestamp"] / 10} for row in rows]
    document = _regime(name)
    fast = run_native(document, workload=mooncake_workload(rows, 512), stepwise=False)
    slow = run_native(document, workload=mooncake_workload(rows, 512), stepwise=True)
    assert fast.facts.fast_forwarded_passes > 0
    assert [record_dict(r) for r in fast.records] == [record_dict(r) for r in slow.records]
    assert report_text(fast) == report_text(slow)


def _fixed_rank(**overrides: Any) -> dict[str, Any]:
    return {"backend": "vllm", "block_size": 4, "num_gpu_blocks": 3000, "max_num_seqs": 8,
            "max_num_batched_tokens": 64,
            "timing_model": {"type": "fixed", "prefill_ms": 3.0, "decode_ms": 1.0}, **overrides}


def test_a_long_decode_under_fixed_timing_is_one_stretch_across_its_blocks() -> None:
    """One request decoding 200,000 tokens in 4-token blocks: its prefill pass, one stretch
    through 50,000 new blocks and the pass of its last token, instead of a pass at every block
    boundary (50,000); the tokens land where 200,000 passes put them (3 ms + 1 ms a token)."""
    rows = [{"timestamp": 0, "input_length": 8, "output_length": 200_000, "hash_ids": [1, 2]}]
    doc = native(_fixed_rank(num_gpu_blocks=60_000))
    result = run_native(doc, workload=mooncake_workload(rows, 4))
    assert result.facts.passes <= 3
    (rec,) = result.records
    assert (rec.terminal_status, rec.output_length) == ("completed", 200_000)
    assert (rec.first_token_ms, rec.last_token_ms) == (3.0, 3.0 + 199_999 * 1.0)
    assert rec.itl_runs() == [(1.0, 199_999)]


def test_a_stretch_stops_where_free_capacity_ends() -> None:
    """Two long decodes that need 2,254 blocks of a 1,300-block rank: stretches take free
    capacity only (never an eviction), the pass that finds none preempts as single passes do;
    records equal step by step, with under half of its passes."""
    rows = [{"timestamp": 0, "input_length": 8, "output_length": 5_000, "hash_ids": [1, 2]},
            {"timestamp": 1, "input_length": 8, "output_length": 4_000, "hash_ids": [5, 6]}]
    doc = native(_fixed_rank(num_gpu_blocks=1_300))
    fast = run_native(doc, workload=mooncake_workload(rows, 4), stepwise=False)
    slow = run_native(doc, workload=mooncake_workload(rows, 4), stepwise=True)
    assert [record_dict(r) for r in fast.records] == [record_dict(r) for r in slow.records]
    assert sum(r.readmission_count for r in fast.records) > 0
    assert fast.facts.passes < slow.facts.passes // 2


@pytest.mark.parametrize("seed", range(24))
def test_fixed_stretches_across_blocks_equal_step_by_step(seed: int) -> None:
    """Random small workloads under fixed timing (1-2 workers, DP 1-2, prefix caching on and
    off, capacity from ample to barely the longest request, round robin and KV router):
    stretches that cross block boundaries give the records and report bytes of single
    passes."""
    rnd = random.Random(seed)
    rows = []
    t = 0.0
    for _ in range(rnd.randint(2, 7)):
        t += rnd.choice([0.0, 1.0, 7.0, 40.0, 300.0])
        blocks = rnd.randint(1, 4)
        rows.append({"timestamp": t, "input_length": 4 * blocks - rnd.randint(0, 3),
                     "output_length": rnd.choice([1, 2, 30, 200, 900]),
                     "hash_ids": [rnd.randint(1, 6) for _ in range(blocks)]})
    longest = max(-(-(r["input_length"] + r["output_length"]) // 4) for r in rows)
    rank = _fixed_rank(num_gpu_blocks=rnd.choice([3000, 2 * longest, longest + 1]),
                       enable_prefix_caching=rnd.random() < 0.7,
                       max_num_seqs=rnd.choice([2, 8]))
    doc = native(rank, workers=rnd.choice([1, 2]), dp_size=rnd.choice([1, 2]),
                 router=rnd.choice(["round_robin", "kv_router"]))
    fast = run_native(doc, workload=mooncake_workload(rows, 4), stepwise=False)
    slow = run_native(doc, workload=mooncake_workload(rows, 4), stepwise=True)
    assert [record_dict(r) for r in fast.records] == [record_dict(r) for r in slow.records]
    assert report_text(fast) == report_text(slow)


def test_token_distributions_of_distinct_shared_gaps_use_bounded_memory(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """40,000 distinct shared gaps (a long polynomial decode has one a token): the ITL figures
    are exact, and the report is built in memory for one batch of gaps, not for all of them
    (the batch scaled down 1,024 times: 512 gaps stand for 524,288)."""
    import tracemalloc

    from kvreplay.engine import report

    monkeypatch.setattr(report, "_MERGED_AT_ONCE", 512)
    n = 40_000
    durations = array("i", range(5_000_000, 5_000_000 + 7 * n, 7))
    rec = RequestRecord(0, "r0", 0.0, 10, n + 1)
    rec.first_admit_ms = rec.first_token_ms = 1.0
    rec.itl_gaps.append(SharedGaps(durations, 0))
    rec.output_length = n + 1
    rec.last_token_ms = rec.first_token_ms + sum(durations) / 1e6
    rec.terminal_time_ms = rec.last_token_ms
    rec.terminal_status = "completed"
    core = RunFacts()
    core.pools = [PoolFacts("aggregated", 1, 1, 1, 1, "vllm", 16, 100)]
    core.end_ms = rec.last_token_ms
    tracemalloc.start()
    try:
        summary = report_from_run(RunResult([rec], core), version="t",
                                  per_request=False)["summary"]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak  # all 40,000 in one mapping took 5 MB
    assert (summary["min_itl_ms"], summary["max_itl_ms"]) == (5.0, (5_000_000 + 7 * (n - 1)) / 1e6)
    assert summary["mean_itl_ms"] == pytest.approx((5_000_000 + 3.5 * (n - 1)) / 1e6, rel=1e-12)


def _itl_summary(records: list[RequestRecord]) -> dict[str, Any]:
    core = RunFacts()
    core.pools = [PoolFacts("aggregated", 1, 1, 1, 1, "vllm", 16, 100)]
    core.end_ms = max(rec.last_token_ms for rec in records)
    summary = report_from_run(RunResult(records, core), version="t", per_request=False)["summary"]
    return {k: v for k, v in summary.items() if "itl" in k or "per_user" in k}


def _shared_gap_record(i: int, durations: list[int]) -> RequestRecord:
    rec = RequestRecord(i, f"r{i}", 0.0, 10, len(durations) + 1)
    rec.first_admit_ms = rec.first_token_ms = 1.0
    rec.itl_gaps.append(SharedGaps(array("i", durations), 0))
    rec.output_length = len(durations) + 1
    rec.last_token_ms = rec.first_token_ms + sum(durations) / 1e6
    rec.terminal_time_ms = rec.last_token_ms
    rec.terminal_status = "completed"
    return rec


@pytest.mark.parametrize("at_once", [1, 2, 3, 1 << 19])
def test_token_distributions_do_not_depend_on_how_gaps_merge(
        monkeypatch: pytest.MonkeyPatch, at_once: int) -> None:
    """Shared gaps repeated across records are merged by value before the ITL and rate
    distributions see them; however small the batches, the figures equal those of every gap
    added one at a time."""
    from kvreplay.engine import report
    from kvreplay.engine.metrics import StreamingDistribution

    rnd = random.Random(7)
    lists = [[rnd.choice([5_000_000, 5_000_001, 7_250_000, 0, 12_345_678, 40_000_000])
              for _ in range(rnd.randint(1, 30))] for _ in range(6)]
    monkeypatch.setattr(report, "_MERGED_AT_ONCE", at_once)
    summary = _itl_summary([_shared_gap_record(i, d) for i, d in enumerate(lists)])
    itl, rate = StreamingDistribution(), StreamingDistribution()
    for durations in lists:
        for d in durations:
            itl.add(d / 1e6)
            if d:
                rate.add(1000.0 / (d / 1e6))
    want_itl, want_rate = itl.finish(), rate.finish()
    assert summary["mean_itl_ms"] == want_itl.mean and summary["p99_itl_ms"] == want_itl.p99
    assert (summary["min_itl_ms"], summary["max_itl_ms"], summary["median_itl_ms"]) == (
        want_itl.min, want_itl.max, want_itl.median)
    assert summary["std_itl_ms"] == want_itl.std
    rates = {k: v for k, v in summary.items() if "per_user" in k}
    assert rates == want_rate.summary("output_token_throughput_per_user", "")


@pytest.mark.parametrize("caching", [True, False])
def test_hybrid_ranks_fast_forward_inside_blocks_only(caching: bool) -> None:
    """With a state cache (1 block a request, 8 blocks of 4 tokens), stretches run inside
    blocks and stop before a boundary, which under prefix caching publishes a checkpoint whose
    copy the next pass needs: the same records as step by step, with preemptions."""
    rows = [{"timestamp": 0, "hash_ids": [1, 2, 3], "input_length": 12, "output_length": 30},
            {"timestamp": 1, "hash_ids": [1, 2, 4], "input_length": 11, "output_length": 25},
            {"timestamp": 3, "hash_ids": [1, 2, 3, 5], "input_length": 16, "output_length": 20},
            {"timestamp": 40, "hash_ids": [1, 2, 3, 5], "input_length": 15, "output_length": 9}]
    rank = {"backend": "vllm", "block_size": 4, "num_gpu_blocks": 8,
            "kv_cache_bytes_per_token": 250000, "max_num_seqs": 3, "max_num_batched_tokens": 8,
            "enable_prefix_caching": caching, "state_cache": {"bytes_per_request": 1000000},
            "timing_model": {"type": "fixed", "prefill_ms": 1.0, "decode_ms": 1.0}}
    fast = run_native(native(rank), workload=mooncake_workload(rows, 4))
    slow = run_native(native(rank), workload=mooncake_workload(rows, 4), stepwise=True)
    assert fast.facts.fast_forwarded_passes > 0
    assert sum(r.readmission_count for r in fast.records) > 0  # preemptions
    assert [record_dict(r) for r in fast.records] == [record_dict(r) for r in slow.records]
    assert report_text(fast) == report_text(slow)
