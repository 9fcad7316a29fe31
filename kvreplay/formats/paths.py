"""File paths as CI tools want them: relative to the repository root, with forward slashes.

Pure string work on the running OS's path flavour (no file system, no current directory):
the caller passes the root and, when it differs, the directory relative paths were given from.
"""

from __future__ import annotations

import os.path
from pathlib import PurePath


def root_relative(path: str, root: str | None, cwd: str | None = None) -> tuple[str, bool]:
    """`(posix_path, is_relative)`: `path` relative to `root` when it lies inside it.

    Relative `path`s (and a relative `root`) are taken from `cwd` (default: `root`). Without a
    root (or with a relative root and no `cwd`), a relative path is only normalised
    (`./a/../b` -> `b`) and an absolute one is returned as is. A path outside `root` comes back
    absolute.
    """
    given = PurePath(path)
    if root is None or (cwd is None and not PurePath(root).is_absolute()):
        if given.is_absolute():
            return given.as_posix(), False
        return PurePath(os.path.normpath(path)).as_posix(), True
    base = resolve_root(root, cwd)
    start = PurePath(os.path.normpath(cwd)) if cwd is not None else base
    absolute = PurePath(os.path.normpath(start / given))
    try:
        return absolute.relative_to(base).as_posix(), True
    except ValueError:
        return absolute.as_posix(), False


def resolve_root(root: str, cwd: str | None = None) -> PurePath:
    """The root, normalised, and taken from `cwd` when it is relative (`--root .`)."""
    if cwd is not None:
        return PurePath(os.path.normpath(PurePath(cwd) / root))
    return PurePath(os.path.normpath(root))
