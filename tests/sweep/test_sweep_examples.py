"""The shipped sweep files run: every point ends ok or skipped, and a best point is chosen."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sweep_support import invoke

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples" / "sweeps").glob("*.yaml"))


def test_there_are_example_sweeps() -> None:
    """docs/sweeps.md shows two shipped sweep files."""
    assert {p.name for p in EXAMPLES} >= {"kv-router-capacity.yaml", "g2-host-blocks.yaml"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_sweep_runs(path: Path, tmp_path: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
    """`kvreplay sweep EXAMPLE -o DIR` exits 0 with a best point and no failed row."""
    ran = invoke(capsys, "sweep", str(path), "-o", str(tmp_path), "-j", "1", "--no-progress")
    assert ran.code == 0, ran.err
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert {r["status"] for r in rows} <= {"ok", "skipped"}
    assert json.loads((tmp_path / "best.json").read_text())["best"] is not None


def test_docs_show_the_shipped_example() -> None:
    """The sweep file in docs/sweeps.md is examples/sweeps/kv-router-capacity.yaml's data."""
    import re

    from ruamel.yaml import YAML

    docs = Path(__file__).resolve().parents[2] / "docs" / "sweeps.md"
    block = re.findall(r"```yaml\n(.*?)```", docs.read_text(encoding="utf-8"), re.S)[0]
    shipped = next(p for p in EXAMPLES if p.name == "kv-router-capacity.yaml")
    assert YAML(typ="safe").load(block) == YAML(typ="safe").load(shipped.read_text())
