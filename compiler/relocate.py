"""A native spec reads its relative trace paths from its own folder (docs/native-json.md), so a
spec written to a file somewhere else than its config has them rewritten for that folder: the
compiled spec finds the same traces wherever it is written, and can be moved with them."""

from __future__ import annotations

import os
from typing import Any


def relocated_trace_paths(native: dict[str, Any], source_dir: str,
                          output_dir: str) -> dict[str, Any]:
    """`native` with each relative trace path read from `source_dir` rewritten relative to
    `output_dir` (the same document when the folders are the same; absolute paths stay)."""
    source_dir, output_dir = os.path.abspath(source_dir), os.path.abspath(output_dir)
    traffic = native.get("traffic")
    given = traffic.get("trace_paths") if isinstance(traffic, dict) else None
    if source_dir == output_dir or not isinstance(given, list):
        return native
    moved = [_relative(p, source_dir, output_dir) if isinstance(p, str) else p for p in given]
    return {**native, "traffic": {**traffic, "trace_paths": moved}}  # type: ignore[dict-item]


def _relative(path: str, source_dir: str, output_dir: str) -> str:
    if os.path.isabs(path):
        return path
    target = os.path.normpath(os.path.join(source_dir, path))
    try:
        moved = os.path.relpath(target, output_dir)
    except ValueError:  # another drive (Windows): no relative path reaches it
        return target
    return moved.replace(os.sep, "/")
