"""Rank and traffic knobs set in YAML change what the bundled engine does, as derived by hand."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kvreplay
from kvreplay.api import run_spec

BASE: dict[str, Any] = {
    "engine": {"model": "meta-llama/Llama-3.1-8B", "workers": {"aggregated": {
        "timing": {"type": "fixed", "prefill_ms": 20, "decode_ms": 5}}}},
    "traffic": {"source": {"type": "synthetic", "input_tokens": 1024, "output_tokens": 1},
                "load": {"type": "concurrency", "concurrency": 1}, "stop": {"requests": 4}},
}


def _run(tmp_path: Path, **changes: Any) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        node = doc
        keys = dotted.split("__")
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = value
    compiled = kvreplay.compile_config(doc)
    assert compiled.ok, [d.message for d in compiled.diagnostics]
    outcome = run_spec(compiled, base_dir=tmp_path)
    assert outcome.report is not None, (outcome.error, outcome.refusals)
    return outcome.report


def test_single_turn_prefix_families_are_reused(tmp_path: Path) -> None:
    """One family, half of each 1024-token prompt (8 of 16 blocks of 64): requests run one at a
    time, so the first computes the family prefix and the three others reuse its 512 tokens."""
    report = _run(tmp_path, traffic__source__shared_prefix_ratio=0.5,
                  traffic__source__prefix_groups=1)
    assert [r["reused_input_tokens"] for r in report["per_request"]] == [0, 512, 512, 512]
    assert report["summary"]["prefix_cache_reused_ratio"] == 3 * 512 / (4 * 1024)


def test_without_prefix_families_nothing_is_reused(tmp_path: Path) -> None:
    """The control: unique prompts share no block."""
    report = _run(tmp_path)
    assert [r["reused_input_tokens"] for r in report["per_request"]] == [0, 0, 0, 0]


def test_speedup_ratio_divides_pass_durations(tmp_path: Path) -> None:
    """A one-token request's TTFT is its prefill pass: 20 ms, 10 ms at speedup 2."""
    plain = _run(tmp_path)
    fast = _run(tmp_path, engine__workers__aggregated__timing__speedup_ratio=2.0)
    assert [r["ttft_ms"] for r in plain["per_request"]] == [20.0] * 4
    assert [r["ttft_ms"] for r in fast["per_request"]] == [10.0] * 4


def test_sglang_options_are_executed(tmp_path: Path) -> None:
    """The bundled engine runs sglang's own scheduler: its chunk size splits a 1024-token prompt
    in two prefill passes of 20 ms (40 ms TTFT, 20 with the default 8192), and nothing is
    listed as approximated."""
    report = _run(tmp_path, engine__backend="sglang",
                  engine__workers__aggregated__scheduler={
                      "sglang": {"schedule_policy": "lpm", "prefill_decode_interval": 2,
                                 "chunked_prefill_size": 512}})
    assert [r["ttft_ms"] for r in report["per_request"]] == [40.0] * 4
    assert report["meta"]["approximations"] == []
    plain = _run(tmp_path, engine__backend="sglang")
    assert [r["ttft_ms"] for r in plain["per_request"]] == [20.0] * 4
