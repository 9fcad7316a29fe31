"""Hybrid KV with MTP: a state cache on a rank that decodes with MTP runs (docs/engine.md,
"Hybrid KV"); the reference's figures are pinned by tests/differential/cases/hybrid-mtp-*.json."""

from __future__ import annotations

import json
from pathlib import Path

from kvreplay.engine.capabilities import refusals

CASES = Path(__file__).parent.parent / "differential" / "cases"


def test_a_state_cache_with_mtp_is_not_refused() -> None:
    """`run` executes a state cache on an MTP rank: no refusal names it."""
    import sys

    sys.path.insert(0, str(CASES.parent))
    import harness

    case = json.loads((CASES / "hybrid-mtp-burst-never-fits-rejected.json").read_text())
    native = harness.native_document(case["scenario"], "trace.jsonl")
    rank = native["spec"]["engine"]["rank"]
    assert rank["state_cache"] and rank["aic_nextn"] == 2
    assert refusals(native) == []
