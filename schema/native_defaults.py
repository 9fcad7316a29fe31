"""The native engine's defaults: what a native field means when a native spec leaves it out.

Read from the reference normalizer's output for a bare rank (`{"backend": ...}`); the native
model's fields (schema/native_model.py) and the config model's take their defaults from here,
so the compiler, the engine and both schemas agree on them. Defaults that depend on something
(the backend, the role) are functions. tests/compiler/test_defaults_drift.py checks them against
the model, the committed schemas and, where it is installed, the reference normalizer.
"""

from __future__ import annotations

from typing import Any, Literal

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

# The running-sequence cap that kvreplay's config gives a role that sets none (a prefill worker
# runs one prompt at a time); the native default (RANK_DEFAULTS) is the rest.
ROLE_MAX_NUM_SEQS: dict[str, int] = {"prefill": 1}

# The `sglang` and `trtllm` blocks of a rank (written out for ranks of that backend).
SGLANG_DEFAULTS: dict[str, Any] = {
    "schedule_policy": "fifo",
    "max_prefill_tokens": 16384,
    "chunked_prefill_size": 8192,
    "clip_max_new_tokens": 4096,
    "schedule_conservativeness": 1.0,
}
TRTLLM_DEFAULTS: dict[str, Any] = {"capacity_scheduler_policy": "guaranteed_no_evict"}

# Tokens per hash id of a Mooncake trace whose config states none (weka and agentic_mooncake
# traces carry their own).
TRACE_BLOCK_SIZE = 512

# Native traffic when a document has none: synthetic 1024 in / 128 out, 10 in flight, 100
# requests (the config's traffic defaults).
TRAFFIC_DEFAULTS: dict[str, Any] = {
    "source_type": "synthetic",
    "input_tokens": 1024,
    "output_tokens": 128,
    "cached_prefix_tokens": 0,
    "load_type": "concurrency",
    "concurrency": 10,
    "stop_requests": 100,
}


def block_size_default(backend: str) -> int:
    return BACKEND_BLOCK_SIZE.get(backend, 64)


def load_type_default(source_type: str) -> Literal["trace_timestamps", "concurrency"]:
    """The arrival process of a source that names none: recorded times for traces."""
    return "trace_timestamps" if source_type == "trace" else "concurrency"


def max_num_seqs_default(role: str) -> int:
    default: int = RANK_DEFAULTS["max_num_seqs"]
    return ROLE_MAX_NUM_SEQS.get(role, default)


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

# `g3_offload` fields a native spec may leave out (reference 1.6.1; `scope` has no default).
G3_OFFLOAD_DEFAULTS: dict[str, Any] = {
    "latency_to_first_byte_ms": 0.1,
    "read_bandwidth_gbps": 10.0,
    "write_bandwidth_gbps": 10.0,
    "shared_read_bandwidth_gbps": 80.0,
    "shared_write_bandwidth_gbps": 80.0,
}

# The KV router's knobs (`adapters.placement.config`), left out: the same in YAML `router`.
ROUTER_DEFAULTS: dict[str, Any] = {
    "kv_event_lag_ms": 0.0,
    "host_cache_hit_weight": 0.75,
    "overlap_score_credit": 1.0,
    "prefill_load_scale": 1.0,
    "temperature": 0.0,
    "seed": 0,
    "overlap_score_credit_decay": 0.0,
    "decode_active_request_weight": 0.0,
    "disk_cache_hit_weight": 0.25,
    "queue_threshold": None,
    "queue_policy": "fcfs",
}
