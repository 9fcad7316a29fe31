"""Estimating KV bytes per token (`bytes_per_token: auto`) for models kvreplay knows.

bytes per token of one tensor-parallel shard = 2 (K and V) * layers * kv_heads_per_shard *
head_dim * dtype bytes, with kv_heads_per_shard = max(1, kv_heads // tp) (heads are replicated
when TP exceeds them). Architectures are read from each model's public config.json; the KV dtype is
assumed bf16 (2 bytes), vLLM's default for these checkpoints. Unknown models give None: then
`auto` is unknown and rules that need the value say so (G2-BYTES).
"""

from __future__ import annotations

import attrs


@attrs.frozen
class KvShape:
    layers: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int = 2


# model id (lower case) -> shape, from the model's config.json
# (num_hidden_layers, num_key_value_heads, head_dim or hidden_size / num_attention_heads).
KNOWN_MODELS: dict[str, KvShape] = {
    "meta-llama/llama-3.1-8b": KvShape(32, 8, 128),
    "meta-llama/llama-3.1-8b-instruct": KvShape(32, 8, 128),
    "meta-llama/llama-3.1-70b": KvShape(80, 8, 128),
    "meta-llama/llama-3.1-70b-instruct": KvShape(80, 8, 128),
    "qwen/qwen3-8b": KvShape(36, 8, 128),
    "qwen/qwen3-32b": KvShape(64, 8, 128),
}


def estimate_bytes_per_token(model: str | None, tp: int) -> int | None:
    """KV bytes per token of one TP shard, or None when the model is not known."""
    if not model:
        return None
    shape = KNOWN_MODELS.get(model.strip().lower())
    if shape is None:
        return None
    per_shard = max(1, shape.kv_heads // max(tp, 1))
    return 2 * shape.layers * per_shard * shape.head_dim * shape.dtype_bytes
