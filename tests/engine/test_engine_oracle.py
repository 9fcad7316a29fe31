"""The exact prefix-reuse oracle over the Mooncake trace slices (one rank, a cache that never
evicts); the expected figures are measured in tests/cases/mooncake/README.md."""

from __future__ import annotations

import json
from pathlib import Path

from engine_support import ListWorkload, native, request

from kvreplay.engine import prefix_hit_blocks, run_native


def hash_rows(path: Path) -> list[list[int]]:
    with path.open() as f:
        return [json.loads(line)["hash_ids"] for line in f]


def test_prefix_hits_on_a_hand_made_trace() -> None:
    """Hits are each row's longest common prefix with all earlier rows, one block per id."""
    rows = [[1, 2, 3], [1, 2, 4], [1, 5], [2, 3], [1, 2, 4, 6]]
    assert prefix_hit_blocks(rows) == (0 + 2 + 1 + 0 + 3, 14)


def test_conversation_trace_prefix_hits(conversation_trace: Path) -> None:
    """Conversation slice (2,000 rows): 15771 of 54559 blocks are prefix hits."""
    assert prefix_hit_blocks(hash_rows(conversation_trace)) == (15771, 54559)


def test_synthetic_trace_prefix_hits(synthetic_trace: Path) -> None:
    """Synthetic slice (1,000 rows): 4007 of 23787 blocks are prefix hits."""
    assert prefix_hit_blocks(hash_rows(synthetic_trace)) == (4007, 23787)


def test_one_rank_with_room_for_everything_reaches_the_oracle(conversation_trace: Path) -> None:
    """With one rank whose pool never evicts and one output token, the engine's realized reuse
    equals the oracle's hit blocks minus the recomputed final block of each fully hit prompt."""
    with conversation_trace.open() as f:
        rows = [json.loads(line) for _, line in zip(range(300), f, strict=False)]
    reqs = [request(i, float(i), len(r["hash_ids"]) * 512, 1, r["hash_ids"], block_size=512)
            for i, r in enumerate(rows)]
    doc = native({"backend": "vllm", "block_size": 512, "num_gpu_blocks": 100_000,
                  "timing_model": {"type": "fixed", "prefill_ms": 0.5, "decode_ms": 0.1}})
    records = run_native(doc, workload=ListWorkload(reqs)).records
    hits, _ = prefix_hit_blocks(r["hash_ids"] for r in rows)
    full_hits = 0
    seen: set[tuple[int, ...]] = set()
    for r in rows:
        ids = tuple(r["hash_ids"])
        if all(ids[:k] in seen for k in range(1, len(ids) + 1)):
            full_hits += 1
        seen.update(ids[:k] for k in range(1, len(ids) + 1))
    assert sum(r.reused_input_tokens for r in records) == (hits - full_hits) * 512
