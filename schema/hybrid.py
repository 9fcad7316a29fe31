"""Hybrid KV cache options (models with state layers, e.g. Mamba / linear-attention hybrids):
one class for the config model (`kv_cache.state_cache`), the native rank (`state_cache`) and the
Spec, so they cannot disagree on a field."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from kvreplay.schema.schema_facts import choice, described, items, positive, text

# A state larger than 2**53 bytes cannot be checked exactly against a byte capacity.
STATE_BYTES_MAX = 2**53


@described("A per-request recurrent state held beside the paged KV cache (the reference's "
           "state cache; vLLM only, aggregated, G1 only).",
           required=["bytes_per_request"])
@attrs.frozen
class StateCache:
    bytes_per_request: int | None = positive(
        None, "Bytes of one request's working state, taken from the rank's KV byte capacity.",
        STATE_BYTES_MAX)


# The reference's bound on a group's page bytes and on the byte capacity they share.
GROUP_BYTES_MAX = 2**53
GROUPS_MAX = 64


@described("One KV cache group of a hybrid model (the reference's `kv_cache_groups` entry): "
           "its layers keep pages of `block_size_tokens` tokens, each charged `page_size_bytes` "
           "of the rank's byte capacity; a sliding window frees the pages that fell out of it.",
           required=["name", "kind", "num_layers", "block_size_tokens", "page_size_bytes"])
@attrs.frozen
class KvCacheGroup:
    name: str | None = text(None, "The group's name (unique on the rank).", 256, 1)
    kind: Literal["attention", "convolution"] | None = choice(
        None, "`attention` (full history, or a sliding window) or `convolution` (needs a "
        "sliding_window).")
    num_layers: int | None = positive(None, "Layers in the group (informational: the page "
                                      "bytes are the whole group's).", 2**32 - 1)
    block_size_tokens: int | None = positive(None, "Tokens per page of this group.", 2**32 - 1)
    page_size_bytes: int | None = positive(
        None, "Bytes one page of this group takes from the rank's byte capacity.",
        GROUP_BYTES_MAX)
    sliding_window: int | None = positive(
        None, "Tokens of history the group keeps (unset: the full history); pages wholly "
        "before it are freed.", 2**32 - 1, nullable=True)


def kv_cache_groups_field() -> Any:
    """The rank's (and the config's) list of KV cache groups."""
    return items(None, "KV cache groups of a hybrid model sharing the byte capacity "
                 "(kv_cache_capacity_bytes); vLLM aggregated, prefix caching off, G1 only.",
                 1, GROUPS_MAX)
