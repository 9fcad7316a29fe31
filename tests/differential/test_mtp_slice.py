"""MTP parity on a Mooncake slice (issue 25): the first 200 rows of the conversation trace on
two aggregated workers of each backend, polynomial timing, 512-token blocks, drafting 2 tokens
at 0.8 / 0.6; every request's figures equal the reference's (skipped without it)."""

from __future__ import annotations

import json
from pathlib import Path

import harness
import pytest

pytestmark = pytest.mark.reference

TRACES = Path(__file__).resolve().parents[2] / "examples" / "traces"
SLICE = TRACES / "mooncake-conversation-200.jsonl"


@pytest.mark.parametrize("backend", ["vllm", "sglang", "trtllm"])
def test_mtp_on_the_mooncake_slice_matches_the_reference(backend: str) -> None:
    """Per request (times, reuse, admissions) and summary, as harness.compare checks them."""
    pytest.importorskip("dynamo.replay")
    rows = [json.loads(line) for line in SLICE.read_text(encoding="utf-8").splitlines()]
    for i, row in enumerate(rows):  # one request per session: none waits for another
        row["session_id"] = f"r{i}"
    rank = {"backend": backend, "block_size": 512, "num_gpu_blocks": 400, "max_num_seqs": 64,
            "max_num_batched_tokens": 8192, "enable_chunked_prefill": True,
            "timing_model": {"type": "polynomial"}, "aic_nextn": 2,
            "aic_nextn_accept_rates": "0.8,0.6", "aic_mtp_seed": 7}
    scn = {"kind": "mtp", "seed": 0, "block_size": 512, "trace_format": "mooncake",
           "rank": rank, "workers": 2, "dp": 1, "rows": rows}
    status, details = harness.check(scn)
    assert (status, details[:5]) == ("match", [])
