"""Which files git ignores, asked of git itself (`git check-ignore --stdin`), so nested
.gitignore files, .git/info/exclude and core.excludesFile all count exactly as git counts them.
Outside a git work tree, or without git, nothing is ignored (as ruff and ripgrep do)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable

from kvreplay.cli.upward import closest

# Variables a git hook exports that would point git at another repository or index.
_HOOK_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_PREFIX")


def work_tree(folder: str, cache: dict[str, str | None]) -> str | None:
    """The work tree containing `folder` (the first ancestor with a `.git` entry), or None."""
    return closest(folder, cache, _git_entry)


def _git_entry(folder: str) -> str | None:
    return folder if os.path.lexists(os.path.join(folder, ".git")) else None


def ignored(paths: Iterable[str]) -> tuple[set[str], list[str]]:
    """The given paths that git ignores, and notes on what could not be asked (for --verbose)."""
    trees: dict[str, list[str]] = {}
    cache: dict[str, str | None] = {}
    for path in paths:
        tree = work_tree(os.path.dirname(os.path.abspath(path)), cache)
        if tree is not None:
            trees.setdefault(tree, []).append(path)
    found: set[str] = set()
    notes: list[str] = []
    env = {k: v for k, v in os.environ.items() if k not in _HOOK_VARIABLES}
    for tree, members in sorted(trees.items()):
        names = {os.path.relpath(os.path.abspath(p), tree): p for p in members}
        try:
            done = subprocess.run(
                ["git", "-C", tree, "check-ignore", "--stdin", "-z"],
                input="\0".join(names).encode("utf-8", "surrogateescape") + b"\0",
                capture_output=True, env=env, timeout=60, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            notes.append(f".gitignore not applied in {tree}: cannot run git ({exc})")
            continue
        if done.returncode not in (0, 1):
            message = done.stderr.decode("utf-8", "replace").strip().splitlines()
            notes.append(f".gitignore not applied in {tree}: git check-ignore failed "
                         f"({message[-1] if message else done.returncode})")
            continue
        for name in done.stdout.decode("utf-8", "surrogateescape").split("\0"):
            if name in names:
                found.add(names[name])
    return found, notes
