"""Settings globs match as .gitignore patterns do, relative to the settings file's folder."""

from __future__ import annotations

import pytest

from kvreplay.cli.globs import matches


@pytest.mark.parametrize(("pattern", "path", "expected"), [
    ("vendor", "a/vendor/x.yaml", True),          # a name matches at any depth
    ("*.tmp.yaml", "a/b/c.tmp.yaml", True),
    ("deploy/*.yaml", "deploy/a.yaml", True),     # with a `/`: anchored at the folder
    ("deploy/*.yaml", "x/deploy/a.yaml", False),
    ("deploy/*.yaml", "deploy/sub/a.yaml", False),  # `*` stays within one component
    ("deploy/**/*.yaml", "deploy/a.yaml", True),
    ("deploy/**/*.yaml", "deploy/s/t/a.yaml", True),
    ("deploy/old", "deploy/old/a.yaml", True),    # a folder covers what is below it
    ("/deploy/", "deploy/a.yaml", True),
    ("cfg-[ab].yaml", "cfg-b.yaml", True),
    ("cfg-[!ab].yaml", "cfg-b.yaml", False),
    ("cfg-?.yaml", "cfg-10.yaml", False),
    ("deploy/*.yaml", "../deploy/a.yaml", False),  # outside the folder: anchored never match
])
def test_glob_semantics(pattern: str, path: str, expected: bool) -> None:
    """Names, anchors, `*`, `**`, `?`, classes and folders."""
    assert matches(pattern, path) is expected
