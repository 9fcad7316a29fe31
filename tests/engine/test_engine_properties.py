"""Engine invariants over random small workloads and deployments (hypothesis)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from engine_support import ListWorkload, native, native_pd, record_dict, request
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kvreplay.engine import ReplayStalled
from kvreplay.engine.config import read_engine_spec
from kvreplay.engine.loop import Simulation
from kvreplay.engine.result import RunResult
from kvreplay.engine.traces.request import TraceRequest
from kvreplay.engine.worker import Worker


@st.composite
def workloads(draw: st.DrawFn) -> list[TraceRequest]:
    n = draw(st.integers(1, 12))
    prefixes = [[], [1], [1, 2], [1, 2, 3], [7], [7, 8]]
    t = 0.0
    out = []
    for i in range(n):
        t += draw(st.sampled_from([0.0, 0.0, 1.0, 2.5, 5.0, 10.0, 40.0]))
        length = draw(st.integers(1, 30))
        blocks = -(-length // 4)
        ids = (draw(st.sampled_from(prefixes)) + [100 + 10 * i + k for k in range(blocks)])
        out.append(request(i, t, length, draw(st.integers(0, 12)), ids[:blocks]))
    return out


@st.composite
def deployments(draw: st.DrawFn) -> dict[str, Any]:
    def role() -> dict[str, Any]:
        timing = draw(st.sampled_from([
            {"type": "fixed", "prefill_ms": 10.0, "decode_ms": 2.0},
            {"type": "fixed", "prefill_ms": 7.0, "decode_ms": 3.0},
            {"type": "polynomial"},
        ]))
        out: dict[str, Any] = {
            "backend": "vllm", "block_size": 4, "timing_model": timing,
            "num_gpu_blocks": draw(st.sampled_from([6, 8, 10, 16, 40])),
            "max_num_batched_tokens": draw(st.sampled_from([4, 8, 16, 8192])),
            "max_num_seqs": draw(st.sampled_from([1, 2, 256])),
            "max_model_len": draw(st.sampled_from([None, None, 24])),
            "preemption_mode": draw(st.sampled_from(["lifo", "lifo", "fifo"])),
            "enable_chunked_prefill": draw(st.booleans()) or True,
            "enable_prefix_caching": draw(st.sampled_from([True, True, False])),
            "kv_transfer_bytes_per_token": 250000,
            "kv_transfer_bandwidth": draw(st.sampled_from([None, 1.0, 4.0])),
            "kv_transfer_timing_mode": draw(st.sampled_from(["full_prompt",
                                                             "destination_missing"])),
        }
        return out

    router = draw(st.sampled_from(["round_robin", "kv_router"]))
    dp = draw(st.sampled_from([1, 1, 2]))
    if draw(st.booleans()):
        doc = native(role(), workers=draw(st.integers(1, 3)), dp_size=dp, router=router,
                     router_config={"kv_event_lag_ms": draw(st.sampled_from([0.0, 3.0]))})
    else:
        doc = native_pd(role(), role(), prefill_workers=draw(st.integers(1, 2)),
                        decode_workers=draw(st.integers(1, 2)), dp_size=dp, router=router,
                        handoff_latency_ms=draw(st.sampled_from([0.0, 1.5])))
    return doc


@contextmanager
def checking_pools() -> Iterator[list[int]]:
    """Check every rank's pool invariants after each pass start; yield the pass count."""
    original = Worker.start_pass
    passes = [0]

    def start_pass(self: Worker, now_ns: int, stepwise: bool) -> int | None:
        end = original(self, now_ns, stepwise)
        for rank in self.ranks:
            rank.pool.check()
            holders = Counter(h for s in (*rank.running, *rank.waiting) for h in s.blocks)
            for handle, count in holders.items():
                assert rank.pool.refs[handle] >= count, "a held block lost its reference"
        passes[0] += 1
        return end

    Worker.start_pass = start_pass  # type: ignore[method-assign]
    try:
        yield passes
    finally:
        Worker.start_pass = original  # type: ignore[method-assign]


def simulate(doc: dict[str, Any], reqs: list[TraceRequest],
             stepwise: bool) -> tuple[RunResult, Simulation, ListWorkload]:
    workload = ListWorkload(reqs)
    sim = Simulation(read_engine_spec(doc), workload, stepwise=stepwise)
    return sim.run(), sim, workload


SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(workloads(), deployments())
def test_compressed_run_equals_step_by_step(reqs: list[TraceRequest], doc: dict[str, Any]) -> None:
    """Fast-forwarding pure decode stretches gives the same records as stepping every pass."""
    try:
        fast = simulate(doc, reqs, stepwise=False)[0]
    except ReplayStalled:
        try:
            simulate(doc, reqs, stepwise=True)
        except ReplayStalled:
            return
        raise AssertionError("only the compressed run stalled") from None
    slow = simulate(doc, reqs, stepwise=True)[0]
    assert [record_dict(r) for r in fast.records] == [record_dict(r) for r in slow.records]
    assert fast.facts.committed_prefill_tokens == slow.facts.committed_prefill_tokens
    assert fast.facts.end_ms == slow.facts.end_ms


@SETTINGS
@given(workloads(), deployments())
def test_run_invariants(reqs: list[TraceRequest], doc: dict[str, Any]) -> None:
    """Time never goes back, every request ends exactly once, reuse <= input, and blocks are
    conserved (pool invariants after every pass; nothing held at the end)."""
    with checking_pools():
        try:
            result, sim, workload = simulate(doc, reqs, stepwise=False)
        except ReplayStalled:
            assume(False)
    records = result.records
    assert [r.ordinal for r in records] == [q.ordinal for q in reqs]
    assert Counter(o for o, _ in workload.terminals) == Counter(q.ordinal for q in reqs)
    times = [t for _, t in workload.terminals]
    assert times == sorted(times)
    for r in records:
        assert r.terminal_status in ("completed", "rejected")
        assert 0 <= r.reused_input_tokens <= r.input_length
        assert r.output_length <= r.requested_output_length
        stamps = [r.arrival_time_ms, r.first_admit_ms, r.first_token_ms, r.second_token_ms,
                  r.last_token_ms, r.terminal_time_ms]
        present = [s for s in stamps if s is not None]
        assert present == sorted(present)
        admissions = [a.at_ms for a in r.admission_history]
        assert admissions == sorted(admissions)
        if r.terminal_status == "completed":
            assert sum(c for _, c in r.itl_runs()) == max(r.output_length - 1, 0)
            assert r.itl_count() == max(r.output_length - 1, 0)
            assert all(g >= 0 for g, _ in r.itl_runs())
        for a in r.admission_history:  # a readmission may reuse its own output blocks too
            assert 0 <= a.reused_input_tokens <= r.input_length + r.output_length
    for pool in sim.pools:
        for rank in pool.ranks:
            rank.pool.check()
            assert rank.pool.num_active() == 0, "every block is released at the end"
            assert not rank.running and not rank.waiting and not rank.pending
