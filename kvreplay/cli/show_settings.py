"""`kvreplay lint --show-settings [PATH]`: the settings that apply to PATH and where each came
from, as TOML that could be pasted into kvreplay.toml (or JSON with `--format json`)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from kvreplay.cli import exits
from kvreplay.cli.settings import Resolver, Settings
from kvreplay.cli.settings_file import KEYS, display
from kvreplay.io.display import escape_inline
from kvreplay.io.output import write_stdout

_ALIGN = 40  # source comments line up, except after longer rows (inline tables)


def show(resolver: Resolver, path: str, args: argparse.Namespace) -> int:
    settings = resolver.for_path(path)
    if settings["format"] == "json":
        write_stdout(render_json(settings, path))
    else:
        write_stdout(render_toml(settings, path))
    return exits.OK


def _plain(kind: str, value: Any) -> Any:
    """A resolved value (tables are tuples of pairs) as a JSON-ready value."""
    if kind in ("per-file", "pairs"):
        return {k: list(v) if isinstance(v, tuple) else v for k, v in value}
    return list(value) if isinstance(value, tuple) else value


def render_json(settings: Settings, path: str) -> str:
    document = {
        "path": path,
        "project": display(settings.project.path) if settings.project else None,
        "settings": {k.name: {"value": _plain(k.kind, settings[k.name]),
                              "source": settings.sources[k.name]} for k in KEYS},
    }
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    return "[" + ", ".join(_toml(v) for v in value) + "]"


def render_toml(settings: Settings, path: str) -> str:
    project = display(settings.project.path) if settings.project else "none"
    # Comments hold paths as given: shown terminal-safe (the values are JSON-quoted, ASCII).
    lines = [f"# settings for {escape_inline(path)} (project configuration: "
             f"{escape_inline(project)})"]
    rows = [(f"{k.name} = {_toml(_plain(k.kind, settings[k.name]))}", settings.sources[k.name])
            for k in KEYS]
    width = min(max(len(row) for row, _ in rows), _ALIGN)
    lines += [f"{row:<{width}}  # {escape_inline(source)}" for row, source in rows]
    return "\n".join(lines) + "\n"
