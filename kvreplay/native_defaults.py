"""The native engine's defaults: what a rank field means when a native spec leaves it out.

Read from the reference normalizer's output for a bare rank (`{"backend": ...}`); shared by the
compiler (reading native JSON and the Python API) and the engine, which must agree on them.
"""

from __future__ import annotations

from typing import Any

BACKEND_BLOCK_SIZE: dict[str, int] = {"vllm": 64, "sglang": 1, "trtllm": 32}
NUM_GPU_BLOCKS = 16384

RANK_DEFAULTS: dict[str, Any] = {
    "backend": "vllm",
    "num_gpu_blocks": NUM_GPU_BLOCKS,
    "max_num_seqs": 256,
    "max_num_batched_tokens": 8192,
    "max_model_len": None,
    "enable_prefix_caching": True,
    "enable_chunked_prefill": True,
    "prefill_schedule_interval": 1,
    "prefill_decode_interval": 0,
    "preemption_mode": "lifo",
    "speedup_ratio": 1.0,
    "decode_speedup_ratio": 1.0,
    "kv_cache_bytes_per_token": None,
    "kv_transfer_bytes_per_token": None,
    "kv_transfer_bandwidth": None,
    "kv_transfer_timing_mode": "full_prompt",
    "timing_model": {"type": "polynomial"},
}


def block_size_default(backend: str) -> int:
    return BACKEND_BLOCK_SIZE.get(backend, 64)

# `native_host_offload` (G2) fields a native spec may leave out (reference 1.6.1).
HOST_OFFLOAD_DEFAULTS: dict[str, Any] = {
    "scope": "dp_rank_local",
    "d2h_bandwidth_gbps": 32.0,
    "h2d_bandwidth_gbps": 32.0,
    "shared_d2h_bandwidth_gbps": 80.0,
    "shared_h2d_bandwidth_gbps": 80.0,
    "latency_to_first_byte_ms": 0.0,
    "kv_layout_id": None,
}
