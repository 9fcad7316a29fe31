"""The `kvreplay` console script."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    raise SystemExit(0)
