"""The shipped sweep files run: every point ends ok or skipped, and a best point is chosen."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from sweep_support import invoke

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples" / "sweeps").glob("*.yaml"))


def test_there_are_example_sweeps() -> None:
    """docs/sweeps.md shows two shipped sweep files."""
    assert {p.name for p in EXAMPLES} >= {"kv-router-capacity.yaml", "g2-host-blocks.yaml"}


PINNED = "mtp-draft-depth"  # its results are pinned below (the run checked once, there)


@pytest.mark.parametrize("path", [p for p in EXAMPLES if p.stem != PINNED], ids=lambda p: p.stem)
def test_example_sweep_runs(path: Path, tmp_path: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
    """`kvreplay sweep EXAMPLE -o DIR --html` exits 0 with a best point, no failed row, and a
    page that shows that best point."""
    _check_example_sweep(path, tmp_path, capsys)


def _check_example_sweep(path: Path, tmp_path: Path,
                         capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    ran = invoke(capsys, "sweep", str(path), "-o", str(tmp_path), "-j", "1", "--no-progress",
                 "--html")
    assert ran.code == 0, ran.err
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert {r["status"] for r in rows} <= {"ok", "skipped"}
    best = json.loads((tmp_path / "best.json").read_text())["best"]
    assert best is not None
    assert f"page: {tmp_path / 'sweep.html'}" in ran.out
    html = (tmp_path / "sweep.html").read_text()
    data = json.loads(re.search(r'id="kvreplay-data">(.*?)</script>', html, re.S).group(1))
    assert data["best"]["point"] == best["point"]
    return rows


def test_mtp_sweep_results_are_pinned(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      json_snapshot: Any) -> None:
    """mtp-draft-depth runs as the other examples do, and its answer is pinned: per point the
    parameters, the SLA verdict and the figures it turns on; the best point is two workers
    drafting 3 tokens at high acceptance, as the sweep file's comment says."""
    rows = _check_example_sweep(EXAMPLES[0].parent / f"{PINNED}.yaml", tmp_path, capsys)
    table = [{"point": r["point"], "parameters": r["parameters"], "sla_ok": r["sla_ok"],
              **{k: r["figures"][k] for k in ("gpu_hours", "p90_tpot_ms", "p90_ttft_ms",
                                             "mean_tpot_ms")}} for r in rows]
    assert json.dumps(table, indent=1, sort_keys=True) + "\n" == json_snapshot
    best = json.loads((tmp_path / "best.json").read_text())["best"]
    assert rows[best["point"]]["parameters"] == {
        "engine.workers.aggregated.parallelism.replicas": 2,
        "engine.workers.aggregated.speculation.num_speculative_tokens": 3,
        "engine.workers.aggregated.speculation.acceptance_rates": [0.9, 0.8, 0.7]}
    plain = [r for r in rows if r["parameters"].get(
        "engine.workers.aggregated.speculation", 0) is None]
    assert len(plain) == 3 and not any(r["sla_ok"] for r in plain)


def test_the_base_digest_is_the_spec_digest_of_the_base(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """g2-host-blocks' point 0 is the base as it is (`{}`): its spec digest is sweep.json's
    base_digest; the sweep file is named as given, with its digest."""
    import hashlib
    import os

    path = next(p for p in EXAMPLES if p.name == "g2-host-blocks.yaml")
    given = os.path.relpath(path)
    ran = invoke(capsys, "sweep", given, "-o", str(tmp_path), "-j", "1", "--no-progress", "-q")
    assert ran.code == 0, ran.err
    manifest = json.loads((tmp_path / "sweep.json").read_text())
    first = json.loads((tmp_path / "results.jsonl").read_text().splitlines()[0])
    assert manifest["base_digest"] == first["spec_digest"]
    assert manifest["sweep"] == os.path.normpath(given)
    assert manifest["sweep_digest"] == hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    assert manifest["traces"] == [{"trace": "traces/g2-restore-mooncake.jsonl",
                                   "digest": first["trace_digest"]}]


def test_docs_show_the_shipped_example() -> None:
    """The sweep file in docs/sweeps.md is examples/sweeps/kv-router-capacity.yaml's data."""
    import re

    from ruamel.yaml import YAML

    docs = Path(__file__).resolve().parents[2] / "docs" / "sweeps.md"
    block = re.findall(r"```yaml\n(.*?)```", docs.read_text(encoding="utf-8"), re.S)[0]
    shipped = next(p for p in EXAMPLES if p.name == "kv-router-capacity.yaml")
    assert YAML(typ="safe").load(block) == YAML(typ="safe").load(shipped.read_text())


def test_the_router_example_picks_no_point_that_rejects_requests(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """kv-router-capacity: with 200 blocks of 512 tokens two prompts (120,633 and 102,869
    tokens) can never fit and are rejected, so no blocks=200 point meets the SLA (default
    `max_rejected: 0`); best.json, the table, the summary line and the page say why."""
    path = next(p for p in EXAMPLES if p.name == "kv-router-capacity.yaml")
    ran = invoke(capsys, "sweep", str(path), "-o", str(tmp_path), "-j", "1", "--no-progress",
                 "--html")
    assert ran.code == 0, ran.err
    best = json.loads((tmp_path / "best.json").read_text())
    blocks = "engine.workers.aggregated.kv_cache.capacity.blocks"
    assert best["best"]["parameters"][blocks] == 1000
    assert best["runner_up"]["parameters"][blocks] == 1000
    assert best["sla"]["rejected_requests"] == {"max": 0}
    why = "2 rejected: prompt larger than the KV cache (max 102,400 tokens)"
    assert why in best["explanation"] and why in ran.out
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    small = [r for r in rows if r["parameters"].get(blocks) == 200]
    assert small and all(r["sla_ok"] is False and r["rejections"] == why
                         and r["figures"]["rejected_requests"] == 2 for r in small)
    assert why in (tmp_path / "results.csv").read_text()
    html = (tmp_path / "sweep.html").read_text()
    assert "rejected requests" in html and "prompt larger than the KV cache" in html
