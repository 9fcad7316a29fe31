"""Expanding lint arguments into files: files, directories (recursively) and globs."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable

import attrs

CONFIG_SUFFIXES = (".yaml", ".yml", ".json")
_SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", "venv",
                        ".tox", ".mypy_cache", ".pytest_cache", ".ruff_cache"})


@attrs.frozen
class Target:
    """A file to lint, or an argument that matched nothing (reported as unreadable)."""

    path: str
    missing: bool = False


def _walk(folder: str) -> list[str]:
    found: list[str] = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        found.extend(os.path.join(root, f) for f in sorted(files)
                     if f.endswith(CONFIG_SUFFIXES))
    return found


def expand(arguments: Iterable[str]) -> list[Target]:
    """Targets in argument order, directories walked in sorted order, each file once."""
    seen: set[str] = set()
    targets: list[Target] = []

    def add(path: str) -> None:
        key = os.path.normpath(path)
        if key not in seen:
            seen.add(key)
            targets.append(Target(path))

    for argument in arguments:
        if os.path.isdir(argument):
            for path in _walk(argument):
                add(path)
        elif os.path.lexists(argument):
            add(argument)
        elif glob.has_magic(argument):
            matches = sorted(glob.glob(argument, recursive=True))
            files = [m for m in matches if os.path.isfile(m)]
            if not files:
                targets.append(Target(argument, missing=True))
            for path in files:
                add(path)
        else:
            targets.append(Target(argument, missing=True))
    return targets
