"""Config / compiled-output pairs for `compile --check-pairs`: the project configuration's
`compile` table first, else the sibling convention (x.yaml or x.yml beside x.json, where the
YAML is recognized as a kvreplay config). A file of either side selects its pair.

A pair writes only below its project root (the project configuration's folder; for a sibling
pair without one, the folder of the pair): `refuse_unsafe` refuses pairs whose output resolves
outside it (through a symlink) or that share one output file, at the setting that makes them."""

from __future__ import annotations

import os
from collections.abc import Iterable

import attrs

from kvreplay.cli.selection import is_ours
from kvreplay.cli.settings import Resolver, Settings
from kvreplay.cli.settings_file import RULE, ProjectFile, SettingsError, display
from kvreplay.io.output import OutputError, inside, same_file
from kvreplay.schema.diagnostics import Diagnostic

_YAML = (".yaml", ".yml")


@attrs.frozen
class Pair:
    """A config and the file it compiles to, as paths to show (and type) from the cwd; the
    folder its output must stay in, and the project configuration that sets it (None for a
    sibling pair)."""

    config: str
    output: str
    root: str
    project: ProjectFile | None = None
    key: str | None = None  # the pair's key in the `compile` table, as written


def _configured(settings: Settings) -> list[Pair]:
    project = settings.project
    if project is None:
        return []
    keys = [config for config, _ in settings["compile"]]
    return [Pair(display(c), display(o), project.root, project, key)
            for (c, o), key in zip(settings.pairs(), keys, strict=True)]


def configured(resolver: Resolver) -> list[Pair]:
    """Every `compile` pair of the project configuration found from the current folder."""
    return _configured(resolver.for_cwd())


def _sibling(path: str, settings: Settings) -> Pair | None:
    base, ext = os.path.splitext(path)
    root = settings.project.root if settings.project else os.path.dirname(os.path.abspath(path))
    if ext in _YAML:
        output = base + ".json"
        if os.path.isfile(output) and not same_file(output, path) and is_ours(path):
            return Pair(path, output, root)
    elif ext == ".json":
        for suffix in _YAML:
            config = base + suffix
            if os.path.isfile(config) and is_ours(config):
                return Pair(config, path, root)
    return None


def pairs_of(files: Iterable[str], resolver: Resolver) -> tuple[list[Pair], list[str]]:
    """The pairs the files belong to (each once, in order) and the files that belong to none."""
    found: dict[tuple[str, str], Pair] = {}
    alone: list[str] = []
    for path in files:
        here = os.path.normpath(os.path.abspath(path))
        settings = resolver.for_path(path)
        mine = [pair for pair in _configured(settings)
                if here in (os.path.abspath(pair.config), os.path.abspath(pair.output))]
        if not mine:
            sibling = _sibling(path, settings)
            mine = [sibling] if sibling else []
        if not mine:
            alone.append(path)
        for pair in mine:
            key = (os.path.abspath(pair.config), os.path.abspath(pair.output))
            found.setdefault(key, pair)
    return list(found.values()), alone


def refuse_unsafe(pairs: list[Pair]) -> None:
    """Raise for the first pair that must not be written (a SettingsError at its setting, an
    OutputError for a sibling pair): an output that resolves outside its project root, or one
    file that two pairs write (or that is the config of another pair) under different names."""
    for n, pair in enumerate(pairs):
        real, root = os.path.realpath(pair.output), os.path.realpath(pair.root)
        if not inside(real, root):
            where = (f"the project root (the folder of {display(pair.project.path)})"
                     if pair.project is not None else f"the folder of the pair, {root}")
            raise _error(pair, f"the output `{pair.output}` leads to {real}, outside {where} "
                         "(through a symlink)")
        for other in pairs[:n]:
            if same_file(pair.output, other.output):
                raise _error(pair, f"`{pair.config}` and `{other.config}` write the same "
                             f"file ({pair.output} is {other.output}): each --fix would "
                             "rewrite it twice")
        for other in pairs:
            if other is not pair and same_file(pair.output, other.config):
                raise _error(pair, f"the output `{pair.output}` of `{pair.config}` is the "
                             f"config {other.config} of another pair")


def _error(pair: Pair, message: str) -> SettingsError | OutputError:
    if pair.project is None or pair.key is None:
        return OutputError(f"refusing to write {pair.output}: {message}")
    project = pair.project
    found = Diagnostic(RULE, "error", message, project.span("compile", pair.key))
    return SettingsError(display(project.path), project.text, [found])
