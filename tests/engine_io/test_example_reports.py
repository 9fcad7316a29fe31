"""Every example the bundled engine runs has its canonical report pinned byte for byte (meta,
which holds the version and wall-clock figures, aside): a change of any simulated number shows
up in review. Examples the engine still refuses are listed, and must name what they need."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import kvreplay

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))
# Examples the engine refuses (none today), with the capability each names.
REFUSED: dict[str, str] = {}


def canonical(report: dict[str, Any]) -> str:
    from kvreplay.engine.report import dumps_report

    return dumps_report({key: value for key, value in report.items() if key != "meta"})


@pytest.mark.parametrize("path", [p for p in EXAMPLES if p.stem not in REFUSED],
                         ids=lambda p: p.stem)
def test_example_report_is_pinned(path: Path, json_snapshot) -> None:  # type: ignore[no-untyped-def]
    """The report of each runnable example equals the committed snapshot."""
    outcome = kvreplay.run_spec(path)
    assert outcome.ok, (outcome.refusals, outcome.error, outcome.diagnostics)
    assert canonical(outcome.report) == json_snapshot  # type: ignore[arg-type]


def test_every_example_runs() -> None:
    """No example is refused any more (each would be listed in REFUSED with what it needs)."""
    assert not REFUSED
    assert {p.stem for p in EXAMPLES} >= {"agentx-g2-local", "agentx-g2-shared-pd"}


def test_g2_example_restores_eight_tokens_as_engine_md_example_5() -> None:
    """g2-restore-mooncake: the returning prompt restores 8 host tokens at 202 ms (TTFT 4);
    28 of 36 prompt tokens are computed, 36 without G2."""
    report = kvreplay.run_spec(EXAMPLES[0].parent / "g2-restore-mooncake.yaml").report
    assert report is not None
    back = next(p for p in report["per_request"] if p["arrival_time_ms"] == 200.0)
    assert (back["first_admit_ms"], back["ttft_ms"]) == (202.0, 4.0)
    assert back["first_admission_host_reused_input_tokens"] == 8
    assert report["summary"]["committed_prefill_tokens"] == 28
    plain = kvreplay.run_spec(EXAMPLES[0].parent / "g2-restore-mooncake.yaml", overrides=[
        "engine.workers.aggregated.kv_cache.host_offload=null"]).report
    assert plain is not None and plain["summary"]["committed_prefill_tokens"] == 36
    shared = kvreplay.run_spec(EXAMPLES[0].parent / "g2-shared-pd-mooncake.yaml").report
    assert shared is not None
    assert shared["summary"]["g2_domains"] == [
        {"capacity_blocks": 8, "resident_blocks": 6, "used_blocks": 6}]
    assert json.dumps(shared["summary"]["g2_transfers"]["scopes"]) == '["cluster_shared"]'


def test_g3_example_restores_eight_tokens_from_g3() -> None:
    """g3-restore-mooncake: the returning prompt's blocks left G2 but stayed in G3: it is
    admitted at 304.5 ms with 8 tokens restored, all from G3; without G3 it recomputes them."""
    path = EXAMPLES[0].parent / "g3-restore-mooncake.yaml"
    report = kvreplay.run_spec(path).report
    assert report is not None
    back = report["per_request"][-1]
    assert (back["first_admit_ms"], back["first_admission_host_reused_input_tokens"],
            back["first_admission_g3_reused_input_tokens"]) == (304.5, 8, 8)
    g3 = report["summary"]["g3_offload"]
    assert (g3["lookup_hits"], g3["read"]["completed_bytes"]) == (2, 2_000_000)
    plain = kvreplay.run_spec(path, overrides=[
        "engine.workers.aggregated.kv_cache.g3_offload=null"]).report
    assert plain is not None and plain["per_request"][-1]["reused_input_tokens"] == 0
    assert "g3_offload" not in plain["summary"]


def test_mtp_example_speculates_and_pays() -> None:
    """mtp-mooncake: every request decodes speculatively (its row counts steps, drafts and
    accepted drafts; output = steps + accepted), the summary's observed rates are near the
    configured 0.8 and 0.6, and the same run without speculation is slower per token."""
    path = EXAMPLES[0].parent / "mtp-mooncake.yaml"
    report = kvreplay.run_spec(path).report
    assert report is not None
    rows, block = report["per_request"], report["summary"]["speculation"]
    assert all(r["output_length"] == r["speculative_steps"] + r["accepted_draft_tokens"]
               for r in rows)
    rates = [p["acceptance_rate"] for p in block["acceptance_by_position"]]
    assert abs(rates[0] - 0.8) < 0.03 and abs(rates[1] - 0.6) < 0.03
    plain = kvreplay.run_spec(path, overrides=["engine.workers.aggregated.speculation=null"])
    assert plain.report is not None and "speculation" not in plain.report["summary"]
    assert plain.report["summary"]["mean_tpot_ms"] > 1.5 * report["summary"]["mean_tpot_ms"]
