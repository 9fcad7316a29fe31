"""kv_layout_id: derived for every cluster_shared role, identical across entry-point forms."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kvreplay

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SHARED_PD_ID = '{"backend":"vllm","block_size":4,"bytes_per_token":250000,"tp":1}'

RANK: dict[str, Any] = {
    "backend": "vllm",
    "block_size": 4,
    "kv_cache_bytes_per_token": 250000,
    "num_gpu_blocks": 3,
    "native_host_offload": {"num_host_blocks": 8, "scope": "cluster_shared"},
}


def _ids(document: dict[str, Any]) -> dict[str, str]:
    engine = document["spec"]["engine"]
    roles = {"aggregated": engine} if "rank" in engine else engine
    return {n: r["rank"]["native_host_offload"]["kv_layout_id"] for n, r in roles.items()}


def test_shared_pd_example_gets_the_documented_id() -> None:
    """Both roles of the shared P/D example carry the compact sorted JSON identity."""
    native = json.loads(kvreplay.compile_config(EXAMPLES / "agentx-g2-shared-pd.yaml").emitted())
    assert _ids(native) == {"prefill": SHARED_PD_ID, "decode": SHARED_PD_ID}


def test_shared_aggregated_example_id_names_its_layout() -> None:
    """The 2x2 shared aggregated example derives its id from block 16, 131072 B/token, TP 1."""
    native = json.loads(kvreplay.compile_config(EXAMPLES / "shared-g2-aggregated.yaml").emitted())
    assert _ids(native) == {
        "aggregated": '{"backend":"vllm","block_size":16,"bytes_per_token":131072,"tp":1}'
    }


def test_flat_and_nested_engine_args_derive_the_same_id() -> None:
    """The flat and nested Python forms yield the same derived id (the reference gap closed)."""
    flat = kvreplay.spec_from_engine_args(prefill_engine_args=dict(RANK, tensor_parallel_size=1),
                                          decode_engine_args=dict(RANK))
    nested = kvreplay.spec_from_engine_args(
        prefill_engine_args={"rank": RANK, "tensor_parallel_size": 1},
        decode_engine_args={"rank": RANK},
    )
    assert flat.ok and nested.ok
    assert _ids(flat.native()) == _ids(nested.native()) == {"prefill": SHARED_PD_ID,
                                                           "decode": SHARED_PD_ID}


def test_reference_form_with_engine_key_is_nested_too() -> None:
    """`{"engine": rank}` (the reference normalizer's own form) is accepted as nested."""
    result = kvreplay.spec_from_engine_args(engine_args={"engine": RANK})
    assert _ids(result.native()) == {"aggregated": SHARED_PD_ID}


def test_explicit_id_survives_unchanged() -> None:
    """An explicit id is kept even when it differs from the derived one, in both forms."""
    g2 = dict(RANK["native_host_offload"], kv_layout_id="team-layout-7")
    rank = dict(RANK, native_host_offload=g2)
    for args in (rank, {"rank": rank}):
        result = kvreplay.spec_from_engine_args(engine_args=args)
        assert _ids(result.native()) == {"aggregated": "team-layout-7"}


def test_tp_and_context_parallelism_change_the_id() -> None:
    """TP is part of the identity, and an explicit DCP (even 1) joins it."""
    tp2 = kvreplay.spec_from_engine_args(engine_args=dict(RANK, tensor_parallel_size=2))
    dcp = kvreplay.spec_from_engine_args(engine_args=dict(RANK, decode_context_parallel_size=1))
    assert json.loads(_ids(tp2.native())["aggregated"])["tp"] == 2
    assert json.loads(_ids(dcp.native())["aggregated"])["dcp"] == 1


def test_local_scope_gets_no_derived_id() -> None:
    """dp_rank_local pools are private: no layout id is derived for them."""
    rank = dict(RANK, native_host_offload={"num_host_blocks": 8})
    native = kvreplay.spec_from_engine_args(engine_args=rank).native()
    assert "kv_layout_id" not in native["spec"]["engine"]["rank"]["native_host_offload"]
