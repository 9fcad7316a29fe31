"""The installed layout of the source folders, built from symlinks (for tools that read a package
from the file system: mypy, import-linter).

pyproject's package-dir installs schema/, compiler/, engine/ and rules/ as kvreplay.schema,
kvreplay.compiler, ...: a tool that walks the `kvreplay` folder would find none of them, so this
builds `<folder>/kvreplay` with each mapped folder linked in its place.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def package_dirs() -> dict[str, str]:
    """pyproject's package-dir: installed package -> source folder."""
    with open(REPO / "pyproject.toml", "rb") as fh:
        found: dict[str, str] = tomllib.load(fh)["tool"]["setuptools"]["package-dir"]
    return found


def _link_entries(source: Path, target: Path) -> None:
    target.mkdir()
    for entry in source.iterdir():
        if entry.name != "__pycache__":
            os.symlink(entry, target / entry.name)


def stage(folder: Path, extra: Mapping[str, str] | None = None) -> Path:
    """`folder/kvreplay`: the kvreplay folder's entries and each mapped folder, linked.

    `extra` adds modules that the repository does not have ({"engine/probe.py": text}, a path
    inside the installed package): their folder is then rebuilt from links instead of linked.
    """
    package = folder / "kvreplay"
    _link_entries(REPO / "kvreplay", package)
    sources = {name.removeprefix("kvreplay."): REPO / source
               for name, source in package_dirs().items() if name != "kvreplay"}
    for name, source in sources.items():
        os.symlink(source, package / name)
    for path, text in (extra or {}).items():
        parts = Path(path).parts
        here, real = package, REPO / "kvreplay"
        for part in parts[:-1]:
            real = sources[part] if here == package and part in sources else real / part
            here = here / part
            if here.is_symlink():
                here.unlink()
                _link_entries(real, here)
        (here / parts[-1]).write_text(text, encoding="utf-8")
    return package
