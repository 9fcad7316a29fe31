"""Telemetry samples (engine/telemetry.py): the reference's cadence, fields and gauges.

The expected figures are the reference's (ai-dynamo 1.6.1, `capture_telemetry=True`) on the
same hand-made traces: one worker, blocks of 16 tokens, fixed prefill 20 ms / decode 5 ms.
"""

from __future__ import annotations

import json
import random
from importlib import resources
from typing import Any

import jsonschema
import pytest
from engine_support import ListWorkload, native, native_pd, rank, request

from kvreplay.engine import run_native
from kvreplay.engine.report import report_from_run

RANK16 = rank(block_size=16, num_gpu_blocks=50,
              timing_model={"type": "fixed", "prefill_ms": 20.0, "decode_ms": 5.0})


def sampled(requests: list[Any], interval_ms: float, *, stepwise: bool = False,
            doc: dict[str, Any] | None = None, **options: Any) -> list[dict[str, Any]]:
    doc = doc or native(dict(RANK16), **options)
    doc["spec"]["telemetry"] = {"sample_interval_ms": interval_ms}
    result = run_native(doc, workload=ListWorkload(requests), stepwise=stepwise)
    assert result.facts.telemetry is not None
    assert result.facts.telemetry["sample_interval_ms"] == interval_ms
    samples: list[dict[str, Any]] = result.facts.telemetry["samples"]
    return samples


def gauges(sample: dict[str, Any]) -> list[tuple[int, int, int, int]]:
    return [(m["active_blocks"], m["inactive_blocks"], m["running_requests"],
             m["waiting_requests"])
            for m in sample["prefill_scheduler_metrics"] + sample["decode_scheduler_metrics"]]


def long_request() -> Any:
    """32 prompt tokens, 17 output tokens: tokens at 20, 25, ..., 100 ms."""
    return request(0, 0.0, 32, 17, [1, 2], 16)


def test_cadence_and_kinds_follow_simulated_time() -> None:
    """A baseline after instant 0, periodic samples at k x interval while requests remain, a
    final sample at the last instant; each interval counts its arrivals, completions and decode
    forwards (reference: 16 forwards, then 2; TTFT 20 ms, ITL 5 ms)."""
    samples = sampled([long_request(), request(1, 100.0, 32, 3, [3, 4], 16)], 100.0)
    assert [(s["sample_ordinal"], s["kind"], s["interval_start_ms"], s["sampled_at_ms"])
            for s in samples] == [(0, "baseline", 0.0, 0.0), (1, "periodic", 0.0, 100.0),
                                  (2, "final", 100.0, 130.0)]
    first, second = samples[1]["traffic"], samples[2]["traffic"]
    assert (first["arriving_requests"], first["completed_requests"], first["avg_ttft_ms"],
            first["avg_itl_ms"], first["accept_length_forward_count"]) == (2, 1, 20.0, 5.0, 16)
    assert second["duration_s"] == 0.03 and second["accept_length_forward_count"] == 2
    assert samples[0]["traffic"]["accept_length_forward_count"] == 0
    assert samples[0]["traffic"]["avg_accept_length"] is None
    # The arrival at 100 waits (the sample comes before the pass its instant starts updates the
    # gauges); the finished request's three blocks are cached.
    assert gauges(samples[1]) == [(0, 3, 0, 1)]
    assert gauges(samples[2]) == [(0, 5, 0, 0)]


def test_a_pass_in_flight_shows_the_state_before_it() -> None:
    """Gauges are read when a command reaches a rank or its worker's pass ends: mid-prefill the
    request still waits, mid-decode its next block is not yet counted (reference)."""
    samples = sampled([long_request()], 10.0)
    assert [gauges(s) for s in samples[:4]] == [[(0, 0, 0, 1)], [(0, 0, 0, 1)],
                                                [(2, 0, 1, 0)], [(3, 0, 1, 0)]]
    samples = sampled([long_request()], 22.0)
    assert gauges(samples[1]) == [(2, 0, 1, 0)]


def test_a_request_placed_mid_pass_refreshes_its_rank() -> None:
    """A request reaching a busy worker is a command: the gauges then show the pass in flight
    already done with the finished request (the reference executes a pass at its start)."""
    samples = sampled([long_request(), request(1, 97.0, 32, 3, [3, 4], 16)], 98.0)
    assert gauges(samples[1]) == [(0, 3, 0, 1)]
    samples = sampled([long_request(), request(1, 93.0, 32, 3, [3, 4], 16)], 94.0)
    assert gauges(samples[1]) == [(3, 0, 1, 1)]


def test_shared_prefix_blocks_count_once_and_preemptions_per_interval() -> None:
    """Two requests sharing two prompt blocks hold 6 blocks, not 8; a preemption in a tiny pool
    is counted in the interval that sees it (reference: 1 in (100, 150])."""
    shared = [request(0, 0.0, 48, 20, [1, 2, 3], 16), request(1, 1.0, 48, 20, [1, 2, 4], 16)]
    assert gauges(sampled(shared, 50.0)[1]) == [(6, 0, 2, 0)]
    tight = [request(0, 0.0, 30, 30, [1, 2], 16), request(1, 0.0, 30, 30, [3, 4], 16)]
    doc = native(rank(block_size=16, num_gpu_blocks=6,
                      timing_model={"type": "fixed", "prefill_ms": 20.0, "decode_ms": 5.0}))
    preempted = [s["decode_interval_metrics"]["preemptions"] for s in sampled(tight, 50.0,
                                                                              doc=doc)]
    assert preempted == [0, 0, 0, 1, 0, 0]


def test_kv_router_hit_rate_is_overlap_over_prompt_blocks() -> None:
    """Per placement: selected overlap blocks / prompt blocks (reference: 2/3, 3/4, 3/3)."""
    rows = [request(0, 0.0, 48, 2, [1, 2, 3], 16), request(1, 100.0, 40, 2, [1, 2, 4], 16),
            request(2, 200.0, 64, 2, [1, 2, 3, 5], 16), request(3, 300.0, 48, 2, [1, 2, 3], 16)]
    rates = [(s["traffic"]["avg_router_kv_hit_rate"], s["traffic"]["router_kv_hit_rate_count"])
             for s in sampled(rows, 50.0, router="kv_router")]
    assert rates == [(0.0, 0), (0.0, 1), (2 / 3, 1), (0.0, 0), (0.75, 1), (0.0, 0), (1.0, 1),
                     (0.0, 0)]


def test_disaggregated_gauges_and_commands() -> None:
    """P/D: destinations in transfer count as waiting on the decode rank, the source release
    refreshes the prefill rank, and an arrival's prefill submission shows only after the
    sample of its instant (reference, interval 1 ms)."""
    role = rank(num_gpu_blocks=10, kv_transfer_bytes_per_token=250000, kv_transfer_bandwidth=1.0,
                timing_model={"type": "fixed", "prefill_ms": 2.0, "decode_ms": 1.0})
    doc = native_pd(dict(role), dict(role))
    rows = [request(0, 0.0, 8, 2, [1, 2]), request(1, 10.0, 8, 2, [3, 4])]
    by_time = {s["sampled_at_ms"]: gauges(s) for s in sampled(rows, 1.0, doc=doc)}
    assert by_time[0.0] == [(0, 0, 0, 1), (0, 0, 0, 0)]
    assert by_time[2.0] == [(2, 0, 0, 0), (2, 0, 0, 1)]
    assert by_time[4.0] == [(0, 2, 0, 0), (2, 0, 0, 1)]
    assert by_time[5.0] == [(0, 2, 0, 0), (2, 0, 1, 0)]
    assert by_time[10.0] == [(0, 2, 0, 0), (0, 2, 0, 0)]
    assert by_time[11.0] == [(0, 2, 0, 1), (0, 2, 0, 0)]


def test_fast_forward_samples_every_pass_end_it_must() -> None:
    """A fast-forwarded stretch ends at the first tick at or after its first pass end, so the
    samples equal the step-by-step ones, on random decode-heavy workloads and cadences."""
    rng = random.Random(7)
    for _ in range(20):
        rows = [request(i, float(rng.randrange(0, 200)), rng.randint(1, 64),
                        rng.randint(1, 60), list(range(100 * i, 100 * i + 4)), 16)
                for i in range(rng.randint(1, 6))]
        interval = rng.choice([0.5, 1.0, 3.0, 7.5, 25.0])
        assert (sampled(rows, interval) == sampled(rows, interval, stepwise=True))


def test_no_telemetry_no_key_and_the_report_holds_the_samples() -> None:
    """Without `spec.telemetry` nothing is sampled and the report has no `telemetry`; with it
    the report's top-level `telemetry` is the samples, valid against the report schema."""
    plain = run_native(native(dict(RANK16)), workload=ListWorkload([long_request()]))
    assert plain.facts.telemetry is None and "telemetry" not in report_from_run(plain)
    doc = native(dict(RANK16))
    doc["spec"]["telemetry"] = {"sample_interval_ms": 25.0}
    report = report_from_run(run_native(doc, workload=ListWorkload([long_request()])))
    assert [s["sampled_at_ms"] for s in report["telemetry"]["samples"]] == [
        0.0, 25.0, 50.0, 75.0, 100.0]
    schema = json.loads(resources.files("kvreplay.schema").joinpath("report.schema.json")
                        .read_text("utf-8"))
    jsonschema.Draft202012Validator(schema).validate(report)


def test_the_sample_count_is_bounded_by_the_cadence() -> None:
    """Samples are one per interval of simulated time (plus baseline and final), whatever the
    number of passes: a 100 ms run at a 10 ms cadence has 11 samples for its 17 passes."""
    samples = sampled([long_request()], 10.0)
    assert len(samples) == 100 // 10 + 1
    assert samples[-1]["kind"] == "periodic"  # the run ends on a tick: no final sample


def test_sglang_ranks_are_sampled_as_the_reference_samples_them() -> None:
    """SGLang ranks: every page in the tree or a request's hands counts as active (none as
    inactive), decode forwards count decode steps (not the first token of a prefill), and the
    scheduler cache-hit tokens count what prefill batches took and found (reference: a second
    32-token prompt sharing both pages matches one page, at most len - 1 tokens)."""
    doc = native(rank(block_size=16, num_gpu_blocks=50, backend="sglang", max_num_seqs=8,
                      max_num_batched_tokens=64, enable_chunked_prefill=True,
                      timing_model={"type": "fixed", "prefill_ms": 20.0, "decode_ms": 5.0}))
    samples = sampled([request(0, 0.0, 32, 3, [1, 2], 16), request(1, 50.0, 32, 2, [1, 2], 16)],
                      40.0, doc=doc)
    assert [(s["kind"], s["sampled_at_ms"], gauges(s)[0], s["decode_interval_metrics"],
             s["traffic"]["accept_length_forward_count"]) for s in samples] == [
        ("baseline", 0.0, (0, 0, 0, 1),
         {"cache_hit_tokens": 0, "cache_total_tokens": 0, "preemptions": 0}, 0),
        ("periodic", 40.0, (2, 0, 0, 0),
         {"cache_hit_tokens": 0, "cache_total_tokens": 32, "preemptions": 0}, 2),
        ("final", 75.0, (2, 0, 0, 0),
         {"cache_hit_tokens": 16, "cache_total_tokens": 32, "preemptions": 0}, 1)]


@pytest.mark.parametrize("backend", ["sglang", "trtllm"])
def test_disaggregated_telemetry_runs(backend: str) -> None:
    """SGLang and TensorRT-LLM P/D with telemetry run (their samples are checked against the
    reference by the difftest kinds sglang-pd-telemetry and trtllm-pd-telemetry): a baseline,
    periodic ticks and a final sample."""
    ranked = rank(block_size=16, num_gpu_blocks=50, backend=backend, enable_chunked_prefill=True)
    doc = native_pd(dict(ranked), dict(ranked))
    doc["spec"]["telemetry"] = {"sample_interval_ms": 10.0}
    facts = run_native(doc, workload=ListWorkload([long_request()])).facts
    assert facts.telemetry is not None
    kinds = [sample["kind"] for sample in facts.telemetry["samples"]]
    assert kinds[0] == "baseline" and kinds[-1] == "final" and "periodic" in kinds


@pytest.mark.parametrize("backend", ["vllm", "trtllm", "sglang"])
def test_mtp_decode_forwards_count_their_drafts_before_the_cap(backend: str) -> None:
    """With MTP, a decode forward's visible tokens are its token and the drafts it accepted:
    nextn 2 accepting both, 8 output tokens. vLLM-shaped ranks emit a burst of 3 with the
    prefill (no forward), then two forwards: 3 tokens, and 2 left (the reference counts the 3
    drawn, not the 2 emitted): 2 forwards of 3. SGLang's prefill emits one token, then
    forwards of 3, 3 and 1 (3 drawn): 3 forwards of 3."""
    args = rank(block_size=16, num_gpu_blocks=50, backend=backend, aic_nextn=2,
                aic_nextn_accept_rates="1.0,1.0", aic_mtp_seed=3,
                timing_model={"type": "fixed", "prefill_ms": 20.0, "decode_ms": 5.0})
    if backend == "sglang":
        args["enable_chunked_prefill"] = True
    samples = sampled([request(0, 0.0, 32, 8, [1, 2], 16)], 1000.0, doc=native(args))
    traffic = samples[-1]["traffic"]
    forwards = 3 if backend == "sglang" else 2
    assert (traffic["accept_length_forward_count"], traffic["avg_accept_length"]) == (
        forwards, 3.0)
