"""`render` dispatches to the format modules, and importing the package stays light."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kvreplay.formats import FORMAT_NAMES, FileResult, render
from kvreplay.formats.concise import render_concise
from kvreplay.formats.github import render_github
from kvreplay.formats.json import render_json
from kvreplay.formats.sarif import render_sarif
from kvreplay.formats.text import render_text


def test_render_matches_each_format(results: tuple[FileResult, ...]) -> None:
    """render(name, ...) gives exactly what the format's own function gives."""
    assert render("text", results, color=True) == render_text(results, color=True)
    assert render("concise", results) == render_concise(results)
    assert render("json", results) == render_json(results)
    assert render("sarif", results, root="/r", version="1") == render_sarif(
        results, root="/r", version="1"
    )
    assert render("github", results, root="/r") == render_github(results, root="/r")
    assert FORMAT_NAMES == ("text", "concise", "json", "sarif", "github")


@pytest.mark.parametrize("name", ["auto", "xml", ""])
def test_unknown_format_is_an_error(name: str, results: tuple[FileResult, ...]) -> None:
    """Names outside FORMAT_NAMES (including unresolved `auto`) raise ValueError."""
    with pytest.raises(ValueError, match="format"):
        render(name, results)


def test_text_path_imports_no_heavy_modules() -> None:
    """Rendering text or concise does not import json, rich or the SARIF writer."""
    code = (
        "import sys\n"
        "from kvreplay.formats import FileResult, render\n"
        "render('text', [FileResult('a', 'x', ())]); render('concise', [])\n"
        "heavy = ('json', 'rich', 'kvreplay.formats.sarif', 'kvreplay.formats.json')\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
