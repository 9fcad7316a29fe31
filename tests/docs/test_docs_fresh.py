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
