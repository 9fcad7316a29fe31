"""The closest folder at or above a start that has something (a project file, a `.git`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def closest(folder: str, cache: dict[str, T | None], probe: Callable[[str], T | None]) -> T | None:
    """What `probe` finds in `folder` or its nearest ancestor (None: nowhere up to the root);
    every folder visited is cached with the answer, so sibling lookups stop early."""
    folder = os.path.abspath(folder)
    visited: list[str] = []
    found: T | None = None
    while True:
        if folder in cache:
            found = cache[folder]
            break
        visited.append(folder)
        found = probe(folder)
        if found is not None:
            break
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    for seen in visited:
        cache[seen] = found
    return found
