"""Hybrid KV cache options (models with state layers, e.g. Mamba / linear-attention hybrids):
one class for the config model (`kv_cache.state_cache`), the native rank (`state_cache`) and the
Spec, so they cannot disagree on a field."""

from __future__ import annotations

import attrs

from kvreplay.schema.schema_facts import described, positive

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
