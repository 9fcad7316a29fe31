"""Interop with the reference native normalizer: every emitted rank is one of its fixed points."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import kvreplay

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


def _roles(native: dict[str, Any]) -> dict[str, dict[str, Any]]:
    engine = native["spec"]["engine"]
    return {"aggregated": engine} if "rank" in engine else engine


@pytest.mark.reference
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_reference_normalizer_returns_what_kvreplay_wrote(path: Path) -> None:
    """For each role, the normalizer accepts the descriptor and echoes every written value."""
    core = pytest.importorskip("dynamo._core")
    native = kvreplay.compile_config(path, matrix=False).native()
    for name, role in _roles(native).items():
        descriptor = {
            "engine": role["rank"],
            "dp_size": role["dp_size"],
            "tensor_parallel_size": role["tensor_parallel_size"],
            "num_gpu_blocks_is_explicit": role["num_gpu_blocks_is_explicit"],
        }
        normalized = core._normalize_mocker_config(descriptor)
        for key, value in role["rank"].items():
            assert normalized["engine"].get(key, "<absent>") == value, (name, key)
        for key in ("dp_size", "tensor_parallel_size", "num_gpu_blocks_is_explicit"):
            assert normalized[key] == descriptor[key], (name, key)


@pytest.mark.reference
def test_reference_executes_nested_shared_g2_built_by_the_python_api() -> None:
    """A nested-form shared-G2 P/D spec built through the API runs end to end on the reference."""
    replay = pytest.importorskip("dynamo.replay")
    rank = {
        "backend": "vllm", "block_size": 4, "kv_cache_bytes_per_token": 250000,
        "num_gpu_blocks": 3, "max_num_seqs": 1, "max_num_batched_tokens": 16,
        "timing_model": {"type": "fixed", "prefill_ms": 2.0, "decode_ms": 1.0},
        "native_host_offload": {"num_host_blocks": 8, "scope": "cluster_shared",
                                "d2h_bandwidth_gbps": 1.0, "h2d_bandwidth_gbps": 1.0},
    }
    result = kvreplay.spec_from_engine_args(prefill_engine_args={"rank": rank},
                                            decode_engine_args={"rank": rank})
    assert result.ok, result.diagnostics
    roles = _roles(result.native())
    trace = Path(__file__).resolve().parents[2] / "examples" / "traces" / "weka-g2-restore.jsonl"
    report = replay.run_trace_replay(
        [str(trace)],
        prefill_engine_args={"engine": roles["prefill"]["rank"]},
        decode_engine_args={"engine": roles["decode"]["rank"]},
        num_prefill_workers=1, num_decode_workers=1,
        trace_format="weka", execution_model="synthetic-model", agentic_lanes=1,
    )
    assert report.summary["completed_requests"] == 4
    assert [d["capacity_blocks"] for d in report.summary["g2_domains"]] == [8]


@pytest.mark.reference
def test_reference_normalizer_reads_escaped_control_characters(tmp_path: Path) -> None:
    """A native spec whose kv_layout_id holds DEL, C1 controls, U+2028/2029 and bidi controls
    compiles to text holding them only as \\uXXXX escapes; the rank read back from that text is
    what the normalizer echoes, the original string included."""
    import json

    core = pytest.importorskip("dynamo._core")
    active = "\x1b\x7f\x85\x9b\u2028\u2029\u061c\u200f\u202e\u2066\u2069"
    layout = f"layout{active}[2J"
    native = json.loads(kvreplay.compile_config(
        EXAMPLES[0].parent / "shared-g2-aggregated.yaml", matrix=False).emitted())
    native["spec"]["engine"]["rank"]["native_host_offload"]["kv_layout_id"] = layout
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(native, ensure_ascii=False), encoding="utf-8")
    compiled = kvreplay.compile_config(path, matrix=False)
    text = compiled.emitted()
    assert not any(ch in text for ch in active), text
    role = json.loads(text)["spec"]["engine"]
    assert role["rank"]["native_host_offload"]["kv_layout_id"] == layout
    normalized = core._normalize_mocker_config({
        "engine": role["rank"], "dp_size": role["dp_size"],
        "tensor_parallel_size": role["tensor_parallel_size"],
        "num_gpu_blocks_is_explicit": role["num_gpu_blocks_is_explicit"]})
    assert normalized["engine"]["native_host_offload"]["kv_layout_id"] == layout
