"""Config / compiled-output pairs for `compile --check-pairs`: the project configuration's
`compile` table first, else the sibling convention (x.yaml or x.yml beside x.json, where the
YAML is recognized as a kvreplay config). A file of either side selects its pair."""

from __future__ import annotations

import os
from collections.abc import Iterable

import attrs

from kvreplay.cli.output import same_file
from kvreplay.cli.selection import is_ours
from kvreplay.cli.settings import Resolver
from kvreplay.cli.settings_file import display

_YAML = (".yaml", ".yml")


@attrs.frozen
class Pair:
    """A config and the file it compiles to, as paths to show (and type) from the cwd."""

    config: str
    output: str


def configured(resolver: Resolver) -> list[Pair]:
    """Every `compile` pair of the project configuration found from the current folder."""
    return [Pair(display(c), display(o)) for c, o in resolver.for_cwd().pairs()]


def _sibling(path: str) -> Pair | None:
    base, ext = os.path.splitext(path)
    if ext in _YAML:
        output = base + ".json"
        if os.path.isfile(output) and not same_file(output, path) and is_ours(path):
            return Pair(path, output)
    elif ext == ".json":
        for suffix in _YAML:
            config = base + suffix
            if os.path.isfile(config) and is_ours(config):
                return Pair(config, path)
    return None


def pairs_of(files: Iterable[str], resolver: Resolver) -> tuple[list[Pair], list[str]]:
    """The pairs the files belong to (each once, in order) and the files that belong to none."""
    found: dict[tuple[str, str], Pair] = {}
    alone: list[str] = []
    for path in files:
        here = os.path.normpath(os.path.abspath(path))
        mine = [Pair(display(c), display(o)) for c, o in resolver.for_path(path).pairs()
                if here in (c, o)]
        if not mine:
            sibling = _sibling(path)
            mine = [sibling] if sibling else []
        if not mine:
            alone.append(path)
        for pair in mine:
            key = (os.path.abspath(pair.config), os.path.abspath(pair.output))
            found.setdefault(key, pair)
    return list(found.values()), alone
