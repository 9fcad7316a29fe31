"""The public entry point: refusals, progress, interruption, the time cap, run facts."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from engine_support import ListWorkload, native, native_pd, rank, record_dict, request

import kvreplay.engine as engine
from kvreplay.engine import (
    EngineConfigError,
    Interrupted,
    Unsupported,
    approximations,
    read_engine_spec,
    refusals,
    run_native,
)


def small_workload() -> ListWorkload:
    return ListWorkload([request(i, 10.0 * i, 8, 20, [1, i + 2]) for i in range(6)])


def test_public_names_load_lazily() -> None:
    """Every advertised name resolves; unknown names raise AttributeError."""
    for name in engine.__all__:
        assert getattr(engine, name) is not None
    with pytest.raises(AttributeError):
        engine.no_such_name  # noqa: B018


def test_unsupported_features_are_refused_by_name() -> None:
    """N-gram speculation and the planner each produce a refusal naming the feature (G2 and
    agentic warmup run; MTP too: test_engine_mtp.py; G3: test_engine_g3.py); run_native raises
    Unsupported with all of them before simulating, and the document's typed spec gets the same
    refusals."""
    g2 = {"num_host_blocks": 8, "d2h_bandwidth_gbps": 1.0, "h2d_bandwidth_gbps": 1.0}
    doc = native_pd(rank(native_host_offload=g2), rank())
    doc["spec"]["engine"]["decode"]["speculation"] = {
        "kind": "ngram", "num_speculative_tokens": 2, "acceptance_rates": [0.5]}
    doc["spec"]["adapters"]["scaling"] = {"provider": "planner", "config": {}}
    doc["traffic"]["agentic_warmup"] = True
    found = refusals(doc)
    assert not any("G2" in message or "agentic" in message for message in found)
    for word in ("ngram", "planner"):
        assert sum(word in message for message in found) == 1, word
    assert refusals(read_engine_spec(doc)) == found
    with pytest.raises(Unsupported) as caught:
        run_native(doc, workload=small_workload())
    assert caught.value.refusals == found


def test_unreadable_documents_have_no_refusals() -> None:
    """A document that does not read gets no refusal (reading it reports the problem)."""
    doc = native(rank(g3_offload={"scope": "x"}))
    assert refusals(doc) == []
    with pytest.raises(EngineConfigError, match="/spec/engine/rank/g3_offload"):
        run_native(doc, workload=small_workload())


def test_supported_documents_have_no_refusals() -> None:
    """A plain aggregated or disaggregated vLLM document runs as is."""
    assert refusals(native(rank())) == []
    assert refusals(native_pd(rank(), rank())) == []


def test_non_vllm_backends_run_their_own_schedulers() -> None:
    """SGLang and TensorRT-LLM run their own schedulers, aggregated or disaggregated (SGLang's
    handoff destination first): nothing is approximated."""
    for backend in ("sglang", "trtllm"):
        for doc in (native(rank(backend=backend)),
                    native_pd(rank(backend=backend), rank(backend=backend))):
            assert approximations(doc) == []
            assert run_native(doc, workload=small_workload()).facts.approximations == []


def test_bad_documents_raise_config_errors() -> None:
    """Unknown policies and malformed values are named in an EngineConfigError."""
    doc = native(rank())
    doc["spec"]["adapters"]["placement"]["provider"] = "random"
    with pytest.raises(EngineConfigError, match="random"):
        run_native(doc, workload=small_workload())
    doc = native(rank(block_size=0))
    with pytest.raises(EngineConfigError, match="block_size"):
        run_native(doc, workload=small_workload())


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d["spec"]["engine"]["rank"].update(enable_prefix_caching="no"),
     "/spec/engine/rank/enable_prefix_caching: 'no' is not of type 'boolean'"),
    (lambda d: d["spec"]["engine"]["rank"].update(blok_size=8),
     "/spec/engine/rank: Additional properties are not allowed ('blok_size' was unexpected)"),
    (lambda d: d["spec"]["engine"]["rank"].update(block_size=8.0),
     "/spec/engine/rank/block_size: 8.0 is not of type 'integer'"),
    (lambda d: d["spec"]["topology"].pop("workers"),
     "/spec/topology: no `workers` pool for role 'aggregated'"),
    (lambda d: d["spec"]["topology"].update(kind="disaggregated"),
     "/spec/engine: topology kind 'disaggregated' needs the roles prefill, decode; found "
     "aggregated"),
], ids=["no-coercion", "unknown-key", "float-integer", "missing-pool", "roles-vs-kind"])
def test_documents_are_read_strictly_with_json_pointers(edit: Any, message: str) -> None:
    """No coercion and no unknown keys: the first problem is named by its JSON pointer."""
    doc = native(rank())
    edit(doc)
    with pytest.raises(EngineConfigError) as caught:
        run_native(doc, workload=small_workload())
    assert str(caught.value) == message


def test_a_named_aggregated_role_is_read() -> None:
    """`"engine": {"aggregated": ROLE}` is the same deployment as `"engine": ROLE`."""
    plain = native(rank(block_size=4, num_gpu_blocks=64))
    named = copy.deepcopy(plain)
    named["spec"]["engine"] = {"aggregated": named["spec"]["engine"]}
    runs = [run_native(d, workload=small_workload()) for d in (plain, named)]
    assert [p.block_size for r in runs for p in r.facts.pools] == [4, 4]
    assert [record_dict(r) for r in runs[0].records] == [record_dict(r) for r in runs[1].records]


def test_missing_rank_fields_take_native_defaults() -> None:
    """A bare rank is vLLM with block 64, 16384 blocks and polynomial timing."""
    doc = native({"backend": "vllm"})
    result = run_native(doc, workload=small_workload())
    (pool,) = result.facts.pools
    assert (pool.block_size, pool.num_gpu_blocks) == (64, 16384)
    assert all(r.terminal_status == "completed" for r in result.records)


def test_progress_reports_simulated_time_and_fraction() -> None:
    """progress gets (sim_time_ms, fraction) ending at the last event with fraction 1."""
    calls: list[tuple[float, float | None]] = []
    result = run_native(native(rank()), workload=small_workload(),
                        progress=lambda t, f: calls.append((t, f)))
    assert calls[-1] == (result.facts.end_ms, 1.0)
    assert [t for t, _ in calls] == sorted(t for t, _ in calls)


def test_should_stop_interrupts_with_the_partial_result() -> None:
    """should_stop turning true stops between events with Interrupted carrying records so far."""
    polls = [0]

    def stop() -> bool:
        polls[0] += 1
        return polls[0] > 5

    with pytest.raises(Interrupted) as caught:
        run_native(native(rank()), workload=small_workload(), should_stop=stop)
    partial = caught.value.partial
    assert 0 < len(partial.records) <= 6
    assert any(r.terminal_status is None for r in partial.records)


def test_time_cap_stops_the_run() -> None:
    """max_sim_time_ms 27: arrivals after it never enter; unfinished requests keep status None."""
    reqs = [request(0, 0.0, 4, 10, [2]), request(1, 5.0, 5, 3, [1, 3]),
            request(2, 30.0, 6, 3, [4, 5])]
    result = run_native(native(rank(num_gpu_blocks=20), max_sim_time_ms=27.0),
                        workload=ListWorkload(reqs))
    first, second = result.records
    assert first.terminal_status is None
    assert (second.terminal_status, second.terminal_time_ms) == ("completed", 26.0)
    assert result.facts.stopped_at_time_cap
    assert result.facts.requests_released == 2


def test_same_inputs_same_records_and_facts() -> None:
    """Two runs of one document and workload give identical records and facts."""
    doc = native(rank(num_gpu_blocks=12), workers=2, router="kv_router")
    a = run_native(copy.deepcopy(doc), workload=small_workload())
    b = run_native(copy.deepcopy(doc), workload=small_workload())
    assert [record_dict(r) for r in a.records] == [record_dict(r) for r in b.records]
    assert a.facts.to_dict() == b.facts.to_dict()


def test_run_facts_describe_pools() -> None:
    """Facts list each pool with its workers and GPUs per worker (DP x TP x PP)."""
    doc = native_pd(rank(), rank())
    doc["spec"]["engine"]["prefill"]["dp_size"] = 2
    doc["spec"]["engine"]["decode"]["tensor_parallel_size"] = 4
    doc["spec"]["topology"]["decode"]["initial_workers"] = 3
    facts = run_native(doc, workload=small_workload()).facts
    pools: dict[str, Any] = {p.name: p for p in facts.pools}
    assert (pools["prefill"].workers, pools["prefill"].gpus_per_worker) == (1, 2)
    assert (pools["decode"].workers, pools["decode"].gpus_per_worker) == (3, 4)
    assert facts.mode == "disaggregated"
    assert facts.committed_prefill_tokens > 0


@pytest.mark.parametrize("shape", ["aggregated", "disaggregated"])
def test_a_finished_run_is_freed_without_the_cyclic_collector(shape: str) -> None:
    """Once run() returns, nothing but the caller holds the simulation (no reference cycle
    through its event handlers or its handoff): it is freed at once, with the pools, caches
    and block identities it built, before the report is made."""
    import gc
    import weakref

    from kvreplay.engine.loop import Simulation

    doc = native(rank()) if shape == "aggregated" else native_pd(rank(), rank())
    sim = Simulation(read_engine_spec(doc), small_workload())
    gone = weakref.ref(sim)
    enabled = gc.isenabled()
    gc.disable()
    try:
        result = sim.run()
        del sim
        assert gone() is None
    finally:
        if enabled:
            gc.enable()
    assert len(result.records) == 6
