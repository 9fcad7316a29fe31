"""Every native field the bundled engine executes changes its replay as it changes the reference's.

A probe is one field on a small hand-made scenario, run at a base value and at a probe value:
kvreplay's per-request figures must move (the field is executed, not only carried), and with the
reference installed both engines give the same figures at both values (so the same direction
and amount; harness.compare, request by request). An inert field (accepted, read by neither
engine's timing) is probed for moving nothing on both sides. Fields probed elsewhere name their
test; fields of features the engine does not execute yet are pending with their issue; the rest
are no replay input (with the reason), or listed as not probed yet.
`test_every_knob_is_classified` keeps the tables complete: a new knob must be classified.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from typing import Any

import harness
import pytest

from kvreplay.knobs import EXPOSED, NOT_EXPOSED

Scenario = dict[str, Any]


def _rank(**changes: Any) -> dict[str, Any]:
    rank: dict[str, Any] = {
        "backend": "vllm", "block_size": 4, "num_gpu_blocks": 12,
        "kv_cache_bytes_per_token": 250000, "max_num_seqs": 2, "max_num_batched_tokens": 8,
        "enable_chunked_prefill": True, "preemption_mode": "lifo",
        "timing_model": {"type": "fixed", "prefill_ms": 2.0, "decode_ms": 1.0}}
    rank.update(changes)
    return rank


def _row(session: str, t: float, hashes: list[int], length: int, out: int) -> dict[str, Any]:
    return {"session_id": session, "timestamp": t, "hash_ids": hashes, "input_length": length,
            "output_length": out}


# Four requests on a shared 2-block prefix, arriving close enough to batch, queue and (with
# 12 blocks of 4 tokens) preempt; outputs long enough for decode timing to show.
ROWS = [_row("a", 0, [1, 2, 3], 11, 6), _row("b", 1, [1, 2, 4, 5], 16, 5),
        _row("c", 2, [1, 2, 6], 12, 4), _row("d", 12, [1, 2, 3, 7], 15, 3)]


def agg(rows: list[dict[str, Any]] | None = None, workers: int = 1, dp: int = 1,
        **rank: Any) -> Scenario:
    return {"kind": "probe", "seed": 0, "block_size": 4, "trace_format": "mooncake",
            "rank": _rank(**rank), "workers": workers, "dp": dp,
            "rows": copy.deepcopy(rows if rows is not None else ROWS)}


def pd(prefill_workers: int = 1, decode_workers: int = 1, **rank: Any) -> Scenario:
    transfer = {"kv_transfer_bytes_per_token": 250000, "kv_transfer_bandwidth": 1.0,
                "kv_transfer_timing_mode": "destination_missing"}
    role = {**transfer, **rank}
    return {"kind": "probe", "seed": 0, "block_size": 4, "trace_format": "mooncake",
            "prefill": _rank(**role), "decode": _rank(**{**role, "num_gpu_blocks": 16}),
            "prefill_workers": prefill_workers, "decode_workers": decode_workers, "dp": 1,
            "rows": copy.deepcopy(ROWS)}


HOST = {"num_host_blocks": 8, "d2h_bandwidth_gbps": 0.5, "h2d_bandwidth_gbps": 0.5}
# Two sessions whose second turns come back after other prompts pushed their prefixes out of
# 6 G1 blocks: the host tier (when there is one) restores them.
G2_ROWS = [_row("a", 0, [1, 2, 3], 12, 2), _row("b", 10, [4, 5, 6], 12, 2),
           _row("c", 20, [7, 8, 9], 12, 2), _row("a", 40, [1, 2, 3, 10], 16, 2),
           _row("b", 50, [4, 5, 6, 11], 16, 2)]


def g2(**rank: Any) -> Scenario:
    return agg(G2_ROWS, num_gpu_blocks=6, **{"native_host_offload": dict(HOST), **rank})


def routed(router: dict[str, Any], rows: list[dict[str, Any]], **scn: Any) -> Scenario:
    return {**agg(rows, workers=2, num_gpu_blocks=64, max_num_batched_tokens=64,
                  max_num_seqs=8), "router": router, **scn}


# Router probes (2 workers; A takes the first request, a placement tie). A holds a (the 4-block
# prefix P) and a3 (P + 2 blocks), B holds b0 (1 block), all decoding when c (P + 4 blocks, 32
# tokens) arrives: its cost on A is s * (8 - 4 credit) + 10 decode blocks, on B 8 s + 9, so c
# goes to A iff 4 credit * s > 1 (credit 1, scale 1 by default). Every earlier placement is
# strict for any credit and scale. With a 50 ms KV event lag the router sees no overlap on A.
P = [1, 2, 3, 4]
ROUTER_ROWS = [_row("a", 0, P, 16, 40), _row("b0", 0.5, [50], 4, 40),
               _row("a3", 5, P + [60, 61], 24, 40), _row("c", 10, P + [30, 31, 32, 33], 32, 1)]
# Chunked prefill: two prompts at once share one 16-token pass only when the second is cut.
CHUNK_ROWS = [_row("a", 0, [1, 2, 3], 11, 3), _row("b", 0, [4, 5, 6, 7], 16, 3)]
# Preemption: three 8-token prompts growing by 8 tokens each on 8 blocks of 4 tokens.
PREEMPT_ROWS = [_row(s, 0, [10 * i + 1, 10 * i + 2], 8, 8) for i, s in enumerate("abc")]
# A two-turn session: under mooncake-delta the second prompt extends the first turn's.
TURN_ROWS = ROWS[:2] + [{"session_id": "a", "delay": 1, "hash_ids": [8], "input_length": 4,
                         "output_length": 2}]
# Attention DP 2: prefills arriving while the other rank decodes.
DP_ROWS = [_row("a", 0, [1, 2], 8, 8), _row("b", 1, [3, 4], 8, 8), _row("c", 3, [5, 6], 8, 4),
           _row("d", 4, [7, 8], 8, 4)]



def synth(**changes: Any) -> Scenario:
    """Two synthetic sessions in a closed loop of one, each prompt (10 tokens, 3 out) led by
    round(0.5 * 3 blocks) = 2 blocks of one prefix family: a later turn is a fresh 10-token
    prompt reusing those 8 tokens, in both engines."""
    syn = {"input_tokens": 10, "output_tokens": 3, "request_count": 2,
           "shared_prefix_ratio": 0.5, "num_prefix_groups": 1,
           "load": {"replay_concurrency": 1}, **changes}
    return {"kind": "probe", "seed": 0, "block_size": 4, "trace_format": "mooncake",
            "rank": _rank(), "workers": 1, "dp": 1, "synthetic": syn, "rows": []}


Probe = tuple[str, Callable[[], Scenario], Callable[[], Scenario]]
PROBES: list[Probe] = [
    ("rank.num_gpu_blocks", agg, lambda: agg(num_gpu_blocks=6)),
    ("rank.block_size", lambda: agg(num_gpu_blocks=6),
     lambda: agg(num_gpu_blocks=6, block_size=8)),
    ("rank.max_model_len", agg, lambda: agg(max_model_len=12)),
    ("rank.max_num_seqs", agg, lambda: agg(max_num_seqs=1)),
    ("rank.max_num_batched_tokens", agg, lambda: agg(max_num_batched_tokens=4)),
    ("rank.prefill_schedule_interval", lambda: agg(DP_ROWS, dp=2, max_num_seqs=4),
     lambda: agg(DP_ROWS, dp=2, max_num_seqs=4, prefill_schedule_interval=3)),
    ("rank.enable_prefix_caching", agg, lambda: agg(enable_prefix_caching=False)),
    ("rank.enable_chunked_prefill", lambda: agg(CHUNK_ROWS, max_num_batched_tokens=16),
     lambda: agg(CHUNK_ROWS, max_num_batched_tokens=16, enable_chunked_prefill=False)),
    ("rank.speedup_ratio", agg, lambda: agg(speedup_ratio=2.0)),
    ("rank.decode_speedup_ratio", agg, lambda: agg(decode_speedup_ratio=1.5)),
    ("rank.preemption_mode", lambda: agg(PREEMPT_ROWS, num_gpu_blocks=8, max_num_seqs=3),
     lambda: agg(PREEMPT_ROWS, num_gpu_blocks=8, max_num_seqs=3, preemption_mode="fifo")),
    ("rank.timing_model", agg, lambda: agg(timing_model={"type": "polynomial"})),
    ("rank.native_host_offload", lambda: agg(G2_ROWS, num_gpu_blocks=6), g2),
    ("rank.kv_cache_bytes_per_token", g2, lambda: g2(kv_cache_bytes_per_token=500000)),
    ("rank.kv_transfer_bytes_per_token", pd, lambda: pd(kv_transfer_bytes_per_token=500000)),
    ("rank.kv_transfer_bandwidth", pd, lambda: pd(kv_transfer_bandwidth=4.0)),
    ("rank.kv_transfer_timing_mode", pd, lambda: pd(kv_transfer_timing_mode="full_prompt")),
    ("role.dp_size", agg, lambda: agg(dp=2)),
    ("replay.num_workers", agg, lambda: agg(workers=2)),
    ("replay.num_prefill_workers", pd, lambda: pd(prefill_workers=2)),
    ("replay.num_decode_workers", lambda: pd(num_gpu_blocks=6),
     lambda: pd(decode_workers=2, num_gpu_blocks=6)),
    ("replay.max_sim_time_ms", agg, lambda: {**agg(), "max_sim_time_ms": 10.0}),
    ("replay.arrival_speedup_ratio", agg, lambda: {**agg(), "speedup": 2.0}),
    # 8-token hash blocks on 4-token ranks: the fourth prompt's third block is shared now.
    ("replay.trace_block_size", agg, lambda: {**agg(), "block_size": 8}),
    ("replay.trace_format", lambda: agg(TURN_ROWS),
     lambda: {**agg(TURN_ROWS), "trace_format": "mooncake-delta"}),
    ("replay.router_mode", lambda: {**routed({}, ROUTER_ROWS), "router_mode": "round_robin"},
     lambda: routed({}, ROUTER_ROWS)),
    ("router.overlap_score_credit", lambda: routed({}, ROUTER_ROWS),
     lambda: routed({"overlap_score_credit": 0.0}, ROUTER_ROWS)),
    ("router.prefill_load_scale", lambda: routed({}, ROUTER_ROWS),
     lambda: routed({"prefill_load_scale": 0.2}, ROUTER_ROWS)),
    ("replay.kv_event_lag_ms", lambda: routed({}, ROUTER_ROWS),
     lambda: routed({"kv_event_lag_ms": 50.0}, ROUTER_ROWS)),
    ("synthetic.turns_per_session", synth,
     lambda: synth(turns=3, inter_turn_delay_ms=0.0)),
    ("synthetic.inter_turn_delay_ms", lambda: synth(turns=2, inter_turn_delay_ms=0.0),
     lambda: synth(turns=2, inter_turn_delay_ms=5.0)),
    # Hybrid KV: a 2-block working state per request (admission waits for it, preemptions give
    # it back), and with prefix caching a prefix is reused only where a state checkpoint was kept.
    ("rank.state_cache", agg, lambda: agg(state_cache={"bytes_per_request": 2000000})),
    ("rank.state_cache", lambda: agg(enable_prefix_caching=False),
     lambda: agg(enable_prefix_caching=False, state_cache={"bytes_per_request": 2000000})),
    # A match unit of the block size under prefix caching aligns the states to block slots:
    # prefill chunks end on block boundaries and only the last block's start keeps a state.
    ("rank.prefix_match_unit", lambda: agg(state_cache={"bytes_per_request": 2000000}),
     lambda: agg(state_cache={"bytes_per_request": 2000000}, prefix_match_unit=4)),
    # A unit below the block lets a hit end inside a block (d reuses 10 of a's 11 tokens with
    # a unit of 2, 8 with one of 4): at the page a's prompt cached under a unit alias.
    ("rank.prefix_match_unit",
     lambda: agg(state_cache={"bytes_per_request": 2000000}, prefix_match_unit=4),
     lambda: agg(state_cache={"bytes_per_request": 2000000}, prefix_match_unit=2)),
]

# Accepted and executed by both engines without changing a figure (a probe shows both unmoved).
INERT: list[Probe] = [
    # Tensor parallelism sizes a worker's GPUs for cost models; fixed and polynomial timing (the
    # engine's two) do not read it, in either engine.
    ("role.tensor_parallel_size", lambda: agg(timing_model={"type": "polynomial"}),
     lambda: {**agg(timing_model={"type": "polynomial"}), "tp": 4}),
    # Without prefix caching nothing is matched, so a match unit moves nothing (with it, a unit
    # of the block size and a smaller one are probed above).
    ("rank.prefix_match_unit",
     lambda: agg(enable_prefix_caching=False, state_cache={"bytes_per_request": 2000000}),
     lambda: agg(enable_prefix_caching=False, state_cache={"bytes_per_request": 2000000},
                 prefix_match_unit=2)),
]

# Probed by another test of the suite, on both engines.
PROBED_ELSEWHERE: dict[str, str] = {
    "router.overlap_score_credit_decay":
        "test_router_knobs.py::test_overlap_credit_decays_with_the_prefill_backlog",
    "router.decode_active_request_weight":
        "test_router_knobs.py::test_active_requests_weigh_on_the_cost",
    "router.router_queue_threshold": "test_router_knobs.py::test_router_queue_releases_in_"
                                     "policy_order, test_differential.py (kind kv-queue)",
    "router.router_queue_policy": "test_router_knobs.py::test_router_queue_releases_in_"
                                  "policy_order, test_differential.py (kind kv-queue)",
    "replay.replay_concurrency": "test_differential.py (kind synth: closed loop)",
    "synthetic.input_tokens": "test_differential.py (kind synth)",
    "synthetic.output_tokens": "test_differential.py (kind synth)",
    "synthetic.request_count": "test_differential.py (kind synth)",
    "synthetic.request_rate": "test_differential.py (kind synth: Poisson arrivals)",
    "synthetic.arrival_seed": "test_differential.py (kind synth: Poisson arrivals)",
    "synthetic.arrival_interval_ms": "test_differential.py (kind synth: constant rate)",
    "synthetic.shared_prefix_ratio": "test_differential.py (kind synth)",
    "synthetic.num_prefix_groups": "test_differential.py (kind synth)",
    "replay.agentic_lanes": "test_differential.py (kind agentic)",
    "replay.weka_nested_timestamp_basis": "tests/engine/test_agentic.py::test_the_nested_"
                                          "timestamp_basis_moves_the_subagents_requests and "
                                          "test_agentic_reference.py (cases absolute_json_"
                                          "explicit, absolute_json_as_relative)",
    "replay.execution_model": "test_differential.py (kind agentic: rows projected onto the "
                              "deployment's model)",
    "router.host_cache_hit_weight": "tests/engine/test_engine_g2_reference.py::test_host_"
                                    "credit_and_reported_overlap_match_the_reference",
    "replay.telemetry_options": "test_differential.py (kind telemetry: every sample compared)",
    # The reference applies them to applied_compute_agentic traces only.
    "replay.trace_shared_prefix_ratio": "test_differential.py (kind applied-compute: some "
                                        "sessions share a prefix family)",
    "replay.trace_num_prefix_groups": "test_differential.py (kind applied-compute)",
    # The features that landed with issues 24-27, probed by their difftest kinds (each seed's
    # every request compared with the reference).
    "rank.backend": "test_differential.py (kinds sglang, trtllm)",
    "rank.prefill_decode_interval": "test_differential.py (kind sglang: 0-3)",
    **{f"rank.sglang.{f}": "test_differential.py (kind sglang)"
       for f in ("schedule_policy", "max_prefill_tokens", "chunked_prefill_size",
                 "clip_max_new_tokens", "schedule_conservativeness")},
    "rank.trtllm.capacity_scheduler_policy": "test_differential.py (kind trtllm: half the "
                                             "scenarios)",
    "rank.aic_nextn": "test_differential.py (kind mtp: 1-3)",
    "rank.aic_nextn_accept_rates": "test_differential.py (kind mtp: random rates)",
    "rank.aic_mtp_seed": "test_differential.py (kind mtp: random seeds)",
    "rank.g3_offload": "test_differential.py (kinds g3, g3-kv)",
    "router.disk_cache_hit_weight": "test_differential.py (kind g3-kv)",
    "role.startup_time": "test_differential.py (kind scaling: random start-up delays)",
    "rank.kv_cache_groups": "test_differential.py (kind kv-groups: 1-3 random groups)",
    "rank.kv_cache_capacity_bytes": "test_differential.py (kind kv-groups: random budgets)",
}

# Features the bundled engine does not execute yet (refused at run time, or approximated and
# said so in the report): their issue.
PENDING: dict[str, int] = {
    "replay.planner_config": 27,
}

# Exposed knobs that are no input of the replay's figures, or that carry other rows.
NOT_REPLAY_INPUTS: dict[str, str] = {
    "role.num_gpu_blocks_is_explicit": "whether the rank names its block count (the native "
                                       "reader's bookkeeping), not a setting",
    "replay.extra_engine_args": "the aggregated role's engine args: its fields are the rank.* "
                                "and role.* rows",
    "replay.prefill_engine_args": "the prefill role's engine args (rank.* and role.* rows)",
    "replay.decode_engine_args": "the decode role's engine args (rank.* and role.* rows)",
    "replay.model_name": "names the deployment in the report; no figure depends on it",
    "replay.sla_ttft_ms": "an evaluation threshold applied to the report, not to the replay",
    "replay.sla_itl_ms": "an evaluation threshold applied to the report, not to the replay",
    "replay.sla_e2e_ms": "an evaluation threshold applied to the report, not to the replay",
    "replay.capture_per_request": "whether the report lists requests; the figures are the same",
    "router.router_temperature": "the reference's softmax draw is unseeded (fastrand), so no "
                                 "run can be compared request by request; kvreplay draws from "
                                 "a seeded generator (engine.md, KV router)",
}

# Not yet probed here although the engine executes them (what remains of issue 28 item 4).
UNPROBED: dict[str, str] = {}


def _ids(probe: Probe) -> str:
    return probe[0]


def _relabeled(report: dict[str, Any]) -> dict[str, Any]:
    """Workers renamed in the order they first receive a request (by arrival): the reference
    breaks the first placement tie at random, and the workers are interchangeable."""
    out = copy.deepcopy(report)
    names: dict[Any, int] = {}
    for row in sorted(out["per_request"], key=lambda r: r["arrival_time_ms"]):
        for hop in row.get("routing_history") or []:
            key = (hop.get("pool"), hop["logical_worker_id"])
            hop["logical_worker_id"] = names.setdefault(key, len(names))
    return out


def _figures(report: dict[str, Any]) -> list[tuple[Any, ...]]:
    rows = sorted(report["per_request"], key=lambda r: (r["arrival_time_ms"], r["input_length"]))
    return [tuple(r.get(k) for k in harness.TIME_KEYS + harness.COUNT_KEYS) for r in rows]


@pytest.mark.parametrize("probe", PROBES, ids=_ids)
def test_each_probed_field_changes_kvreplays_replay(probe: Probe) -> None:
    """The probe value gives other per-request figures than the base value."""
    _, base, changed = probe
    assert _figures(harness.run_kvreplay(base())) != _figures(harness.run_kvreplay(changed()))


def _reference_installed() -> None:
    os.environ.setdefault("DYN_LOG", "error")
    pytest.importorskip("dynamo.replay")


@pytest.mark.reference
@pytest.mark.parametrize("probe", PROBES, ids=_ids)
def test_each_probed_field_changes_the_reference_the_same_way(probe: Probe) -> None:
    """At the base and at the probe value, both engines give the same figures, request by
    request (so the field moves them the same way and by the same amount)."""
    _reference_installed()
    _, base, changed = probe
    for make in (base, changed):
        scn = make()
        ref, mine = harness.run_reference(scn), harness.run_kvreplay(scn)
        assert harness.compare(_relabeled(ref), _relabeled(mine)) == []
    assert _figures(harness.run_reference(base())) != _figures(harness.run_reference(changed()))


@pytest.mark.parametrize("probe", INERT, ids=_ids)
def test_each_inert_field_leaves_kvreplays_replay(probe: Probe) -> None:
    """The field is accepted and no per-request figure moves."""
    _, base, changed = probe
    assert _figures(harness.run_kvreplay(base())) == _figures(harness.run_kvreplay(changed()))


@pytest.mark.reference
@pytest.mark.parametrize("probe", INERT, ids=_ids)
def test_each_inert_field_leaves_the_reference_too(probe: Probe) -> None:
    """The reference accepts it, moves no figure either, and agrees with kvreplay."""
    _reference_installed()
    _, base, changed = probe
    ref = harness.run_reference(changed())
    assert harness.compare(ref, harness.run_kvreplay(changed())) == []
    assert _figures(harness.run_reference(base())) == _figures(ref)


def test_every_knob_is_classified() -> None:
    """Each knob of kvreplay.knobs is probed (here or elsewhere), pending with its issue, no
    replay input, or listed as not probed yet; never two of these."""
    probed = {name for name, _, _ in PROBES + INERT}
    tables = [probed, set(PROBED_ELSEWHERE), set(PENDING), set(NOT_REPLAY_INPUTS),
              set(UNPROBED)]
    classified = set().union(*tables)
    assert sum(len(t) for t in tables) == len(classified), "a knob is in two tables"
    exposed = {k.native for k in EXPOSED}
    # NOT_EXPOSED knobs are explained there; the hybrid ones are pending too.
    missing = exposed - classified
    assert not missing, f"exposed knobs neither probed, pending nor explained: {missing}"
    assert not classified - exposed - set(NOT_EXPOSED), "a table names an unknown knob"
    assert all(1 <= issue <= 99 for issue in PENDING.values())
