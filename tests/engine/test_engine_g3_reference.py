"""G3 parity with the reference engine (ai-dynamo 1.6.1), skipped when it is not installed:
the scenarios tests/engine/test_engine_g3.py pins give the same per-request figures and the
same `g3_offload` block, and the reference makes the refusals kvreplay makes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from g2_support import per_request_differences, rank, reference_agg, run_agg, write_rows
from test_engine_g3 import G3, ROWS, SHARED, g3_rank

pytestmark = pytest.mark.reference


@pytest.fixture(autouse=True)
def _reference() -> None:
    pytest.importorskip("dynamo.replay")


@pytest.mark.parametrize(("args", "workers"), [
    (g3_rank(), 1), (g3_rank(), 2), (g3_rank(SHARED), 2), (g3_rank(SHARED), 3),
    (g3_rank({**G3, "read_bandwidth_gbps": 0.0, "latency_to_first_byte_ms": 0.0}), 1),
    (g3_rank({**G3, "num_g3_blocks": 1}), 1),
])
def test_same_figures_as_the_reference(args: dict[str, Any], workers: int,
                                       tmp_path: Path) -> None:
    ref = reference_agg(ROWS, args, tmp_path / "rows.jsonl", workers=workers)
    mine = run_agg(ROWS, args, workers=workers)
    assert per_request_differences(ref, mine) == []
    assert mine.facts.g3_offload == ref.summary["g3_offload"]


@pytest.mark.parametrize(("args", "dp"), [(rank(None, g3_offload=dict(G3)), 1), (g3_rank(), 2)])
def test_the_reference_refuses_too(args: dict[str, Any], dp: int, tmp_path: Path) -> None:
    from dynamo.replay import run_trace_replay

    write_rows(ROWS, tmp_path / "rows.jsonl")
    with pytest.raises(Exception, match="g3_offload"):  # ValueError or Exception
        run_trace_replay([str(tmp_path / "rows.jsonl")],
                         extra_engine_args={"engine": args, "dp_size": dp}, num_workers=1,
                         router_mode="round_robin", trace_format="mooncake",
                         trace_block_size=4, capture_per_request=True)
