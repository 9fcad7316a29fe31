"""Expanding lint arguments into files: files, directories (recursively) and globs.

Walks never loop: a directory walk does not follow symlinked directories, and a glob's `**`
follows them but enters each physical directory at most once (so a link to an ancestor ends).
"""

from __future__ import annotations

import fnmatch
import glob
import os
import stat
from collections.abc import Iterable, Iterator

import attrs

CONFIG_SUFFIXES = (".yaml", ".yml", ".json")
_SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", "venv",
                        ".tox", ".mypy_cache", ".pytest_cache", ".ruff_cache"})


@attrs.frozen
class Target:
    """A file to lint, or an argument that matched nothing (reported as unreadable).

    `explicit`: named on the command line (or matched by a glob given there), not found by
    walking a folder; walked files are linted only when they are kvreplay configs."""

    path: str
    missing: bool = False
    explicit: bool = True


def _walk(folder: str) -> list[str]:
    """Every file below `folder` (the caller picks the configs among them)."""
    found: list[str] = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        # `lint .` (the default) shows `deploy/a.yaml`, not `./deploy/a.yaml`
        here = "" if root == os.curdir else root
        found.extend(os.path.join(here, f) for f in sorted(files))
    return found


def _names(folder: str) -> list[str]:
    try:
        return sorted(os.listdir(folder or os.curdir))
    except OSError:
        return []


def _is_dir(path: str) -> tuple[int, int] | None:
    """The identity (device, inode) of a directory, following symlinks; None if not one."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return (info.st_dev, info.st_ino) if stat.S_ISDIR(info.st_mode) else None


def _below(folder: str) -> Iterator[str]:
    """`folder` and every directory under it (`**`), hidden ones excluded, each physical
    directory once."""
    seen: set[tuple[int, int]] = set()
    pending = [folder]
    while pending:
        here = pending.pop()
        identity = _is_dir(here or os.curdir)
        if identity is None or identity in seen:
            continue
        seen.add(identity)
        yield here
        children = [os.path.join(here, n) for n in _names(here) if not n.startswith(".")]
        pending.extend(reversed(children))


def _match(base: str, parts: list[str]) -> Iterator[str]:
    """Paths under `base` that match the glob components `parts` (glob's rules for `*`, `?`,
    `[...]`, `**` and hidden names)."""
    if not parts:
        if os.path.lexists(base or os.curdir):
            yield base
        return
    head, rest = parts[0], parts[1:]
    if head == "**":
        for folder in _below(base):
            if rest:
                yield from _match(folder, rest)
            else:
                yield from (os.path.join(folder, n) for n in _names(folder)
                            if not n.startswith("."))
    elif glob.has_magic(head):
        for name in _names(base):
            if (head.startswith(".") or not name.startswith(".")) \
                    and fnmatch.fnmatchcase(name, head):
                yield from _match(os.path.join(base, name), rest)
    elif head:
        yield from _match(os.path.join(base, head), rest)
    else:  # `a//b`
        yield from _match(base, rest)


def glob_files(pattern: str) -> list[str]:
    """What a glob pattern matches, sorted, without repeats: every existing path that is not a
    directory (a FIFO or device among them is reported when read, not skipped)."""
    parts = pattern.split(os.sep)
    literal = 0
    while literal < len(parts) - 1 and not glob.has_magic(parts[literal]):
        literal += 1
    base = os.sep.join(parts[:literal]) or (os.sep if pattern.startswith(os.sep) else "")
    return sorted({p for p in _match(base, parts[literal:])
                   if os.path.exists(p) and not os.path.isdir(p)})


def expand(arguments: Iterable[str]) -> list[Target]:
    """Targets in argument order, directories walked in sorted order, each file once (walked
    files are every file: see kvreplay.cli.selection for which of them are linted)."""
    seen: dict[str, int] = {}
    targets: list[Target] = []

    def add(path: str, explicit: bool = True) -> None:
        key = os.path.normpath(path)
        if key not in seen:
            seen[key] = len(targets)
            targets.append(Target(path, explicit=explicit))
        elif explicit:  # walked first, then named: named wins
            targets[seen[key]] = attrs.evolve(targets[seen[key]], explicit=True)

    for argument in arguments:
        if os.path.isdir(argument):
            for path in _walk(argument):
                add(path, explicit=False)
        elif os.path.lexists(argument):
            add(argument)
        elif glob.has_magic(argument):
            files = glob_files(argument)
            if not files:
                targets.append(Target(argument, missing=True))
            for path in files:
                add(path)
        else:
            targets.append(Target(argument, missing=True))
    return targets
