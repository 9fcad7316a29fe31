"""Features that landed side by side run together, or are refused by name before the run (never
an AttributeError or KeyError mid-run): the combinations found when merging them (none is refused
now: SGLang P/D under a scaling policy, the last, runs since its draining decode workers keep
their reserved destinations)."""

from __future__ import annotations

from typing import Any

import pytest
from engine_support import ListWorkload, native, native_pd, rank, request

from kvreplay.engine import run_native

SCHEDULE = {"provider": "schedule", "config": {"max_gpus": None, "schedule": [
    {"aggregated": 2, "at_seconds": 0.05, "decode": None, "prefill": None}]}}
SCHEDULE_PD = {"provider": "schedule", "config": {"max_gpus": None, "schedule": [
    {"aggregated": None, "at_seconds": 0.05, "decode": 2, "prefill": 2}]}}


def _sglang() -> dict[str, Any]:
    return rank(backend="sglang", enable_chunked_prefill=True)


G2 = {"num_host_blocks": 8, "d2h_bandwidth_gbps": 1.0, "h2d_bandwidth_gbps": 1.0}
G2_SHARED = {**G2, "scope": "cluster_shared", "kv_layout_id": "t"}
G3 = {"scope": "worker_local", "num_g3_blocks": 16, "read_bandwidth_gbps": 1.0,
      "write_bandwidth_gbps": 1.0}


def _sglang_pd(*, scaling: bool = False) -> dict[str, Any]:
    doc = native_pd(_sglang(), _sglang())
    if scaling:
        doc["spec"]["adapters"]["scaling"] = SCHEDULE_PD
    return doc


def _doc(rank_args: dict[str, Any], *, telemetry: bool = False,
         scaling: bool = False) -> dict[str, Any]:
    doc = native(rank_args)
    if telemetry:
        doc["spec"]["telemetry"] = {"sample_interval_ms": 10.0}
    if scaling:
        doc["spec"]["adapters"]["scaling"] = SCHEDULE
    return doc


@pytest.mark.parametrize("doc", [
    _doc({**rank(), "aic_nextn": 2}), _doc(_sglang()), _doc(rank(), scaling=True),
    _doc(rank(), telemetry=True), _sglang_pd(), _doc(_sglang(), scaling=True),
    _doc({**_sglang(), "aic_nextn": 2}), _sglang_pd(scaling=True)],
    ids=["mtp", "sglang", "scaling", "telemetry", "sglang-pd", "sglang-scaling", "mtp-sglang",
         "sglang-pd-scaling"])
def test_each_feature_alone_runs(doc: dict[str, Any]) -> None:
    """The features of the combinations once refused replay, alone and together (SGLang ranks
    under a scaling policy, aggregated or P/D: difftest kind sglang-pd-scaling)."""
    result = run_native(doc, workload=ListWorkload([request(0, 0.0, 8, 3, [1, 2], 4)]))
    assert [r.terminal_status for r in result.records] == ["completed"]


@pytest.mark.parametrize("rank_args", [
    rank(native_host_offload=G2), rank(native_host_offload=G2_SHARED),
    rank(native_host_offload=G2, g3_offload=G3),
    rank(native_host_offload=G2, g3_offload={**G3, "scope": "cluster_shared"})],
    ids=["g2-local", "g2-shared", "g3-local", "g3-shared"])
def test_g2_and_g3_run_under_a_scaling_policy(rank_args: dict[str, Any]) -> None:
    """G2, private or cluster-shared, and G3 below it replay under a scaling policy (workers
    joining get their pools; difftest kind `scaling` compares them with the reference)."""
    result = run_native(_doc(rank_args, scaling=True, telemetry=True),
                        workload=ListWorkload([request(0, 0.0, 8, 3, [1, 2], 4),
                                               request(1, 0.1, 8, 3, [1, 2], 4)]))
    assert [r.terminal_status for r in result.records] == ["completed", "completed"]
    assert result.facts.scaling is not None and result.facts.host_transfers is not None
    assert result.facts.telemetry is not None
