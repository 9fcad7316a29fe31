"""Project-configuration globs (`include`, `exclude`, `per-file-ignores`), matched as .gitignore
matches: relative to the folder of the file that sets them, `*` and `?` within one path
component, `**` across components, a pattern without `/` matches a name at any depth, and a
pattern that matches a folder matches everything below it."""

from __future__ import annotations

import functools
import os
import re


@functools.cache
def _regex(pattern: str) -> re.Pattern[str]:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1:end]
            negate = body[:1] == "!"
            body = re.escape(body[1:] if negate else body).replace("\\-", "-")
            out.append(f"[{'^' if negate else ''}{body}]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))


def relative(path: str, root: str) -> str:
    """`path` relative to `root`, with `/` separators (starts with `../` when outside it)."""
    return os.path.relpath(os.path.abspath(path), os.path.abspath(root)).replace(os.sep, "/")


def matches(pattern: str, relpath: str) -> bool:
    """Whether `relpath` (relative to the pattern's folder) or a folder above it matches."""
    anchored = "/" in pattern.rstrip("/")
    regex = _regex(pattern.strip("/"))
    parts = relpath.split("/")
    if anchored:
        return any(regex.fullmatch("/".join(parts[:n])) for n in range(1, len(parts) + 1))
    return any(regex.fullmatch(part) for part in parts if part not in ("", ".", ".."))


def any_matches(patterns: tuple[str, ...], relpath: str) -> bool:
    return any(matches(p, relpath) for p in patterns)
