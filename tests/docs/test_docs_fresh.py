"""Generated documents and schemas are up to date with their sources."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kvreplay.catalog import render_codes_markdown

REPO = Path(__file__).resolve().parents[2]


def test_diagnostics_doc_is_fresh() -> None:
    """docs/diagnostics.md equals what kvreplay.catalog renders."""
    expected = render_codes_markdown()
    assert (REPO / "docs" / "diagnostics.md").read_text(encoding="utf-8") == expected


def test_schemas_are_fresh() -> None:
    """schema/*.schema.json equal what tools/gen_schemas.py generates."""
    done = subprocess.run([sys.executable, str(REPO / "tools" / "gen_schemas.py"), "--check"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout


def test_generated_model_blocks_are_fresh() -> None:
    """Every Frozen class's generated block equals what tools/gen_models.py writes."""
    done = subprocess.run([sys.executable, str(REPO / "tools" / "gen_models.py"), "--check"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr



def test_a_stale_model_block_is_regenerated() -> None:
    """The generator rewrites a block that no longer says what the fields say (one field's
    assignment dropped from Sla's __init__), and leaves a fresh one as it is."""
    sys.path.insert(0, str(REPO / "tools"))
    import gen_models

    from kvreplay.schema import sla

    text = (REPO / "schema" / "sla.py").read_text(encoding="utf-8")
    stale = text.replace('        set_(self, "itl_ms", itl_ms)\n', "")
    assert stale != text
    assert gen_models.render(sla, text) == text
    assert gen_models.render(sla, stale) == text
