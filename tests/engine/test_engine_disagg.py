"""Prefill/decode disaggregation (engine.md section 4), checked against the reference engine.

Both roles: vLLM, block 4, fixed timing prefill 10 ms / decode 2 ms, 250000 bytes per token
moved at 1 GB/s (1 ms per 4-token block).
"""

from __future__ import annotations

from typing import Any

from engine_support import ListWorkload, native_pd, rank, request

from kvreplay.engine import run_native
from kvreplay.engine.records import RequestRecord
from kvreplay.engine.traces.request import TraceRequest

LIFECYCLE = ("prefill_admit_ms", "source_held_ms", "destination_reserved_ms",
             "destination_activated_ms", "decode_admit_ms", "source_released_ms",
             "first_token_ms", "terminal_time_ms")


def role(**overrides: Any) -> dict[str, Any]:
    return rank(**{"num_gpu_blocks": 100, "kv_transfer_bytes_per_token": 250000,
                   "kv_transfer_bandwidth": 1.0, **overrides})


def run(requests: list[TraceRequest], *, prefill: dict[str, Any] | None = None,
        decode: dict[str, Any] | None = None, **kw: Any) -> list[RequestRecord]:
    doc = native_pd(prefill or role(), decode or role(), **kw)
    return run_native(doc, workload=ListWorkload(requests)).records


def lifecycle(rec: RequestRecord) -> tuple[float | None, ...]:
    return tuple(getattr(rec, name) for name in LIFECYCLE)


def test_handoff_lifecycle_and_decode_centric_ttft() -> None:
    """Prefill 0-10, source held 10, 8 tokens moved in 2 ms, decode admitted at 12: the first
    visible token comes from the decode worker at 14 (TTFT includes prefill and transfer)."""
    (r,) = run([request(0, 0.0, 8, 3, [1, 2])])
    assert lifecycle(r) == (0.0, 10.0, 10.0, 12.0, 12.0, 12.0, 14.0, 18.0)
    assert [(a.pool, a.at_ms, a.is_readmission) for a in r.admission_history] == [
        ("prefill", 0.0, False), ("decode", 12.0, False)]
    assert [h.pool for h in r.routing_history] == ["prefill", "decode"]


def test_full_prompt_charges_every_prompt_token() -> None:
    """full_prompt: 9 tokens take 2.25 ms, 10 tokens 2.5 ms."""
    a, b = run([request(0, 0.0, 9, 3, [1, 2, 3]), request(1, 100.0, 10, 2, [1, 2, 4])])
    assert a.destination_activated_ms == 12.25
    assert b.destination_activated_ms == 112.5


def test_destination_missing_charges_missing_blocks() -> None:
    """destination_missing: 9 tokens are 3 blocks (3 ms); a later prompt whose first 2 blocks
    stay resident on the decode worker moves only its last block (1 ms). Reuse is the prefill
    side's; the decode admission of a transferred prompt reuses nothing."""
    mode = {"kv_transfer_timing_mode": "destination_missing"}
    a, b = run([request(0, 0.0, 9, 3, [1, 2, 3]), request(1, 100.0, 10, 2, [1, 2, 4])],
               prefill=role(**mode), decode=role(**mode))
    assert lifecycle(a)[:6] == (0.0, 10.0, 10.0, 13.0, 13.0, 13.0)
    assert lifecycle(b)[:6] == (100.0, 110.0, 110.0, 111.0, 111.0, 111.0)
    assert b.reused_input_tokens == 8
    assert [x.reused_input_tokens for x in b.admission_history] == [8, 0]


def test_handoff_latency_adds_to_the_transfer() -> None:
    """handoff_latency_ms 5 on top of a 2 ms transfer."""
    (r,) = run([request(0, 0.0, 8, 2, [1, 2])], handoff_latency_ms=5.0)
    assert (r.destination_activated_ms, r.first_token_ms) == (17.0, 19.0)


def test_no_bandwidth_means_no_transfer_delay() -> None:
    """kv_transfer_bandwidth null: the prompt arrives at once."""
    (r,) = run([request(0, 0.0, 8, 3, [1, 2])], prefill=role(kv_transfer_bandwidth=None))
    assert (r.destination_activated_ms, r.first_token_ms) == (10.0, 12.0)


def test_a_transfer_completing_mid_pass_activates_at_the_pass_end() -> None:
    """Decode passes of 50 ms: the 8-token prompt lands at 12 on an idle worker; the 36-token
    one lands at 19, mid-pass, and is activated when that pass ends at 62."""
    slow = role(timing_model={"type": "fixed", "prefill_ms": 10.0, "decode_ms": 50.0},
                kv_transfer_timing_mode="destination_missing")
    big, small = run([request(0, 0.0, 36, 3, list(range(1, 10))),
                      request(1, 0.0, 8, 4, [11, 12])], prefill=slow, decode=slow)
    assert (small.destination_activated_ms, small.first_token_ms) == (12.0, 62.0)
    assert (big.destination_reserved_ms, big.destination_activated_ms) == (10.0, 62.0)
    assert big.first_token_ms == 112.0


def test_a_destination_waits_for_a_free_running_slot() -> None:
    """Decode max_num_seqs 1: B's prefill ends at 20 while A decodes, so B's destination is
    reserved when A leaves at 23; A's prompt lands at 11 but its source KV is released at 20,
    when the prefill worker (busy with B) applies commands (the reference's figures)."""
    a, b = run([request(0, 0.0, 4, 6, [1]), request(1, 5.0, 8, 2, [2, 3])],
               decode=role(max_num_seqs=1))
    assert lifecycle(a) == (0.0, 10.0, 10.0, 11.0, 11.0, 20.0, 13.0, 23.0)
    assert lifecycle(b) == (10.0, 20.0, 23.0, 25.0, 25.0, 25.0, 27.0, 29.0)


def test_an_arrival_at_a_prefill_pass_end_waits_for_the_next_pass() -> None:
    """Unlike aggregated replay, the disaggregated runtime restarts a prefill worker before
    queueing arrivals at the same instant: B arriving at 10 is admitted at 20."""
    budget = role(max_num_batched_tokens=12)
    _, b = run([request(0, 0.0, 16, 3, [1, 2, 3, 4]), request(1, 10.0, 3, 4, [11])],
               prefill=budget, decode=budget)
    assert (b.prefill_admit_ms, b.source_held_ms) == (20.0, 30.0)


def test_round_robin_rotates_scheduler_ids_in_each_pool() -> None:
    """P/D pools rotate flattened scheduler ids: (0,0) (0,1) (1,0) (1,1); decode placement
    happens when each prefill finishes, in that order."""
    records = run([request(i, float(i), 4 + i, 2, [10 * i + 1, 10 * i + 2, 10 * i + 3])
                   for i in range(6)], prefill_workers=2, decode_workers=2, dp_size=2)
    prefill = [(r.routing_history[0].logical_worker_id, r.routing_history[0].dp_rank)
               for r in records]
    decode_sids = [r.routing_history[1].scheduler_id for r in records]
    assert prefill == [(0, 0), (0, 1), (1, 0), (1, 1), (0, 0), (0, 1)]
    assert decode_sids == [0, 3, 1, 1, 2, 0]


def test_activation_retries_a_waiting_destination_before_its_blocks_become_hits() -> None:
    """Decode pool of 6 blocks: A (17 tokens, 5 blocks) lands at 6.25; B (6 tokens sharing A's
    first block) would fit only by hitting A's just-arrived block, so it is reserved when A's
    decode pass ends (6.75), not at A's activation (checked against the reference)."""
    args = {"num_gpu_blocks": 6, "max_num_seqs": 4, "max_num_batched_tokens": 32,
            "timing_model": {"type": "fixed", "prefill_ms": 2.0, "decode_ms": 0.5}}
    a, b = run([request(0, 0.0, 17, 1, [92, 551, 829, 911, 710]),
                request(1, 0.0, 6, 1, [92, 551])],
               prefill=role(**args), decode=role(**args))
    assert (a.destination_reserved_ms, a.destination_activated_ms) == (2.0, 6.25)
    assert (b.destination_reserved_ms, b.destination_activated_ms, b.first_token_ms) == (
        6.75, 8.25, 8.75)


def test_a_prompt_the_decode_worker_can_never_hold_is_rejected_with_its_reason() -> None:
    """The prefill side holds 12 tokens, the decode worker only 2 blocks of 4: the request is
    rejected at the handoff, for the decode worker's cache (max 8 tokens)."""
    (r,) = run([request(0, 0.0, 12, 3, [1, 2, 3])], decode=role(num_gpu_blocks=2))
    assert (r.terminal_status, r.rejection) == ("rejected", ("decode_kv_cache", 8))
