"""A restored request stuck behind the connector's head on a shared G2 pool (docs/engine.md,
"G3: the tier below G2"): with G3 below, the reference tries it first (regression case
g3-restored-request-admitted-before-connector-head); without G3 the reference aborts the run
("an effect-free zero-duration pass"), and kvreplay ends it with a located ReplayStalled."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import harness
import pytest

from kvreplay.engine.errors import ReplayStalled

CASE = Path(__file__).parent / "cases" / "g3-restored-request-admitted-before-connector-head.json"


def test_without_g3_the_stall_names_the_restore_behind_the_head() -> None:
    """The same rows on G2 alone: r111 heads the connector queue waiting for the G1 blocks
    r585's completed restore holds; the error names both."""
    scn = copy.deepcopy(json.loads(CASE.read_text())["scenario"])
    del scn["rank"]["g3_offload"]
    with pytest.raises(ReplayStalled, match=r"r585 on agg worker 1 rank 0: its G2 restore "
                       r"completed, and it waits in the connector queue behind r111"):
        harness.run_kvreplay(scn)


@pytest.mark.reference
def test_the_reference_aborts_the_same_rows_without_g3() -> None:
    """The reference refuses to finish the G2-only rows (skipped without it)."""
    pytest.importorskip("dynamo.replay")
    scn = copy.deepcopy(json.loads(CASE.read_text())["scenario"])
    del scn["rank"]["g3_offload"]
    with pytest.raises(Exception, match="effect-free zero-duration pass"):
        harness.run_reference(scn)
