"""Project configuration files: `kvreplay.toml` (top-level keys) or the `[tool.kvreplay]` table
of `pyproject.toml`, read with tomllib and checked key by key. A problem is a SETTINGS-INVALID
diagnostic at the key's line (exit 2)."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from typing import Any

import attrs

from kvreplay.cli.toml_lines import Position, key_positions, locate, too_deep
from kvreplay.cli.upward import closest
from kvreplay.schema.diagnostics import Diagnostic, Span

KVREPLAY_TOML = "kvreplay.toml"
PYPROJECT = "pyproject.toml"
RULE = "SETTINGS-INVALID"
LINT_FORMATS = ("auto", "text", "concise", "json", "sarif", "github")
MAX_DEPTH = 200  # the configs' bound (compiler/yaml_errors.py); tomllib recurses a level at a time


@attrs.frozen
class Key:
    """One setting: its kind decides the TOML type it takes and how it is checked."""

    name: str
    kind: str  # globs | rules | bool | format | per-file | pairs
    default: Any
    help: str


KEYS: tuple[Key, ...] = (
    Key("include", "globs", (), "files that are kvreplay configs whatever their content"),
    Key("exclude", "globs", (), "files and folders never linted when walking a folder"),
    Key("respect-gitignore", "bool", True, "skip what .gitignore ignores when walking"),
    Key("select", "rules", (), "report only these rules (IDs, prefixes or globs)"),
    Key("ignore", "rules", (), "do not report these rules"),
    Key("per-file-ignores", "per-file", (), "glob -> rules not reported in matching files"),
    Key("strict", "bool", False, "warnings fail too (exit 1)"),
    Key("format", "format", "auto", "lint output format"),
    Key("compile", "pairs", (), "config -> its compiled native JSON (compile --check-pairs)"),
)
KEYS_BY_NAME = {k.name: k for k in KEYS}


class SettingsError(Exception):
    """A project configuration that cannot be used: its findings and its text (for frames)."""

    def __init__(self, file: str, text: str | None, diagnostics: list[Diagnostic]) -> None:
        super().__init__(diagnostics[0].message if diagnostics else file)
        self.file = file
        self.text = text
        self.diagnostics = diagnostics


@attrs.frozen
class ProjectFile:
    """A project configuration: its absolute path, checked values and where each key is set."""

    path: str
    values: Mapping[str, Any]
    lines: Mapping[str, int]
    text: str | None = None
    positions: dict[tuple[str, ...], Position] = attrs.field(factory=dict)  # table included
    table: tuple[str, ...] = ()  # ("tool", "kvreplay") in a pyproject.toml

    @property
    def root(self) -> str:
        """Paths and globs in the file are relative to its folder."""
        return os.path.dirname(self.path)

    def where(self, key: str) -> str:
        return f"{display(self.path)}:{self.lines.get(key, 1)}"

    def span(self, *path: str) -> Span:
        """Where a key (or an entry of a table, by its path under the table) is set."""
        line, column = locate(self.positions, self.table + path) or (None, None)
        return Span(file=display(self.path), line=line, column=column)


def display(path: str) -> str:
    """A path as messages show it: relative to the current folder when below it."""
    relative = os.path.relpath(path)
    return path if relative.startswith(os.pardir) else relative


def load(path: str) -> ProjectFile | None:
    """The settings of one file; None for a pyproject.toml without `[tool.kvreplay]`."""
    from kvreplay.compiler.reading import read_config_text

    name = display(path)
    text, problems = read_config_text(path, name)
    if text is None:
        raise SettingsError(name, None, problems)
    pyproject = os.path.basename(path) == PYPROJECT
    if pyproject and "kvreplay" not in text:
        return None
    deep = too_deep(text, MAX_DEPTH)
    if deep is not None:
        raise SettingsError(name, text, [_too_deep(name, deep)])
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(name, text, [_syntax(name, exc)]) from None
    except RecursionError:  # past the scan (a string it misread): located at the file only
        raise SettingsError(name, text, [_too_deep(name, None)]) from None
    table: tuple[str, ...] = ("tool", "kvreplay") if pyproject else ()
    data: Any = document.get("tool", {}).get("kvreplay") if pyproject else document
    if data is None:
        return None
    positions = key_positions(text)
    checker = _Checker(name, positions, table)
    if not isinstance(data, dict):
        checker.error(table, f"`{'.'.join(table)}` must be a table, found {_type(data)}")
        raise SettingsError(name, text, checker.found)
    values = {key: value for key, value in data.items() if checker.check(key, value)}
    if checker.found:
        raise SettingsError(name, text, checker.found)
    lines = {key: (locate(positions, table + (key,)) or (1, 1))[0] for key in values}
    return ProjectFile(os.path.abspath(path), values, lines, text, positions, table)


def _too_deep(name: str, where: Position | None) -> Diagnostic:
    line, column = where or (None, None)
    return Diagnostic(RULE, "error", f"TOML nests deeper than {MAX_DEPTH} levels",
                      Span(file=name, line=line, column=column))


def _syntax(name: str, exc: tomllib.TOMLDecodeError) -> Diagnostic:
    message = str(exc)
    match = re.search(r"\s*\(at line (\d+), column (\d+)\)$", message)
    line = column = None
    if match:
        line, column = int(match.group(1)), int(match.group(2))
        message = message[:match.start()]
    return Diagnostic(RULE, "error", f"TOML syntax error: {message}",
                      Span(file=name, line=line, column=column))


def _type(value: object) -> str:
    names = {str: "string", bool: "boolean", int: "integer", float: "float", list: "array",
             dict: "table"}
    return names.get(type(value), "date-time")


class _Checker:
    """Checks settings one key at a time, collecting every problem with its position."""

    def __init__(self, name: str, positions: dict[tuple[str, ...], Position],
                 table: tuple[str, ...]) -> None:
        self.name = name
        self.positions = positions
        self.table = table
        self.found: list[Diagnostic] = []

    def error(self, path: tuple[str, ...], message: str, hint: str | None = None) -> None:
        line, column = locate(self.positions, path) or (None, None)
        self.found.append(Diagnostic(RULE, "error", message,
                                     Span(file=self.name, line=line, column=column), hint=hint))

    def check(self, key: str, value: Any) -> bool:
        path = self.table + (key,)
        spec = KEYS_BY_NAME.get(key)
        before = len(self.found)
        if spec is None:
            from kvreplay.schema.suggest import hint_for  # (difflib) an unknown key only

            where = f"[{'.'.join(self.table)}]" if self.table else self.name
            self.error(path, f"unknown setting `{key}` in {where}",
                       hint_for(key, KEYS_BY_NAME, "settings"))
        elif spec.kind == "bool":
            if not isinstance(value, bool):
                self.error(path, f"`{key}` must be a boolean, found {_type(value)}")
        elif spec.kind == "format":
            if value not in LINT_FORMATS:
                from kvreplay.schema.suggest import hint_for

                self.error(path, f"`{key}` must be one of {', '.join(LINT_FORMATS)}, found "
                           f"{_type(value)} `{value}`", hint_for(str(value), LINT_FORMATS))
        elif spec.kind in ("globs", "rules"):
            self._strings(path, value, rules=spec.kind == "rules")
        elif spec.kind == "per-file":
            if self._table(path, value):
                for pattern, rules in value.items():
                    self._strings(path + (pattern,), rules, rules=True)
        elif spec.kind == "pairs" and self._table(path, value):
            self._pairs(path, value)
        return len(self.found) == before

    def _pairs(self, path: tuple[str, ...], value: dict[str, Any]) -> None:
        """Each pair stays inside the project root; no two share an output, and no output is
        a config (its own or another pair's)."""
        configs = {os.path.normpath(config): config for config in value}
        outputs: dict[str, str] = {}
        for config, output in value.items():
            where = path + (config,)
            if not isinstance(output, str):
                self.error(where, f"the output of `{config}` must be a string (a path), found "
                           f"{_type(output)}")
                continue
            problem = _outside(config, "config") or _outside(output, "output")
            if problem is not None:
                self.error(where, f"`{config}`: {problem}", "paths of a pair are relative to "
                           "the folder of this file, and stay below it")
                continue
            target = os.path.normpath(output)
            if target == os.path.normpath(config):
                self.error(where, f"`{config}` cannot be its own output")
            elif target in configs:
                self.error(where, f"the output of `{config}` is the config `{configs[target]}` "
                           "of another pair")
            elif target in outputs:
                self.error(where, f"`{config}` and `{outputs[target]}` have the same output "
                           f"`{output}`: each --fix would rewrite it twice")
            else:
                outputs[target] = config

    def _table(self, path: tuple[str, ...], value: Any) -> bool:
        if isinstance(value, dict):
            return True
        self.error(path, f"`{path[-1]}` must be a table, found {_type(value)}")
        return False

    def _strings(self, path: tuple[str, ...], value: Any, *, rules: bool) -> None:
        what = "rule IDs" if rules else "globs"
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.error(path, f"`{'.'.join(path[len(self.table):])}` must be an array of "
                       f"strings ({what}), found {_type(value)}")
            return
        if rules:
            from kvreplay.catalog import catalog
            from kvreplay.cli.rule_select import unknown_patterns
            from kvreplay.schema.suggest import hint_for

            for pattern in unknown_patterns(value, catalog()) if value else ():
                self.error(path, f"unknown rule ID `{pattern}`",
                           hint_for(pattern, catalog(), "rule IDs"))


def _outside(path: str, side: str) -> str | None:
    """Why a pair's path leaves the project root (absolute, or `..` above it), or None."""
    if os.path.isabs(path):
        return f"the {side} `{path}` is absolute"
    normal = os.path.normpath(path)
    if normal in (os.curdir, os.pardir) or normal.startswith(os.pardir + os.sep):
        return f"the {side} `{path}` is not a file below the project root"
    return None


def find(folder: str, cache: dict[str, ProjectFile | None]) -> ProjectFile | None:
    """The closest project configuration at or above `folder` (kvreplay.toml before
    pyproject.toml in one folder; a pyproject.toml without `[tool.kvreplay]` does not count)."""
    return closest(folder, cache, _in_folder)


def _in_folder(folder: str) -> ProjectFile | None:
    for name in (KVREPLAY_TOML, PYPROJECT):
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate):
            loaded = load(candidate)
            if loaded is not None:
                return loaded
    return None
