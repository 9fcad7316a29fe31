"""kv_layout_id: the identity of how a role stores KV, which shared-pool participants must share."""

from __future__ import annotations

import json


def derive_layout_id(
    backend: str,
    block_size: int,
    bytes_per_token: int | None,
    tp: int,
    pcp: int | None = None,
    dcp: int | None = None,
) -> str:
    """Compact sorted JSON of backend/block_size/bytes_per_token/tp (native-json.md).

    Explicitly set prefill/decode context parallelism also changes the layout (config.md: an
    explicit value, even 1, differs from unset), so it joins the identity only when set.
    """
    identity: dict[str, object] = {
        "backend": backend,
        "block_size": block_size,
        "bytes_per_token": bytes_per_token,
        "tp": tp,
    }
    if pcp is not None:
        identity["pcp"] = pcp
    if dcp is not None:
        identity["dcp"] = dcp
    return json.dumps(identity, sort_keys=True, separators=(",", ":"))
