"""Repo-relative paths for CI formats: pure string work, forward slashes."""

from __future__ import annotations

import os

import pytest

from kvreplay.formats.paths import root_relative

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX path flavour")


@pytest.mark.parametrize(
    ("path", "root", "cwd", "expected"),
    [
        ("configs/a.yaml", None, None, ("configs/a.yaml", True)),
        ("./configs/../configs/a.yaml", None, None, ("configs/a.yaml", True)),
        ("/abs/a.yaml", None, None, ("/abs/a.yaml", False)),
        ("configs/a.yaml", "/repo", None, ("configs/a.yaml", True)),
        ("/repo/configs/a.yaml", "/repo", None, ("configs/a.yaml", True)),
        ("/repo/configs/a.yaml", "/repo/", None, ("configs/a.yaml", True)),
        ("a.yaml", "/repo", "/repo/configs", ("configs/a.yaml", True)),
        ("../other/a.yaml", "/repo", "/repo/configs", ("other/a.yaml", True)),
        ("../../a.yaml", "/repo", "/repo/configs", ("/a.yaml", False)),
        ("/elsewhere/a.yaml", "/repo", None, ("/elsewhere/a.yaml", False)),
        ("/repository/a.yaml", "/repo", None, ("/repository/a.yaml", False)),
        ("configs/a.yaml", ".", "/repo", ("configs/a.yaml", True)),
        ("a.yaml", "..", "/repo/configs", ("configs/a.yaml", True)),
        ("/repo/configs/a.yaml", ".", "/repo", ("configs/a.yaml", True)),
        ("./a.yaml", ".", None, ("a.yaml", True)),
    ],
)
def test_root_relative(
    path: str, root: str | None, cwd: str | None, expected: tuple[str, bool]
) -> None:
    """Paths inside the root come back relative to it; others absolute; no file system used."""
    assert root_relative(path, root, cwd) == expected
