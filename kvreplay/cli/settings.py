"""Resolved settings: the command line over the closest project configuration over the defaults.

Each linted file takes its settings from the project configuration closest to it (searched
upward from its folder); options that concern the whole run (`format`) come from the one found
from the current folder. `--config PATH` uses that file for everything; `--isolated` none.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import Any

import attrs

from kvreplay.cli import globs
from kvreplay.cli.rule_select import split_patterns
from kvreplay.cli.settings_file import (
    KEYS,
    RULE,
    ProjectFile,
    SettingsError,
    display,
    find,
    load,
)
from kvreplay.schema.diagnostics import Diagnostic, Span

COMMAND_LINE = "command line"
DEFAULT = "default"


@attrs.frozen
class Settings:
    """The settings for one file or folder, and where each value came from."""

    project: ProjectFile | None
    values: Mapping[str, Any]
    sources: Mapping[str, str]  # key -> "default" | "file:line" | "command line" (or two, joined)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @property
    def root(self) -> str:
        return self.project.root if self.project else os.getcwd()

    def relative(self, path: str) -> str:
        return globs.relative(path, self.root)

    def ignored_rules(self, path: str) -> tuple[str, ...]:
        """`ignore` plus the `per-file-ignores` whose glob matches `path`."""
        relpath = self.relative(path)
        extra = [rule for pattern, rules in self.values["per-file-ignores"]
                 if globs.matches(pattern, relpath) for rule in rules]
        return (*self.values["ignore"], *extra)

    def pairs(self) -> list[tuple[str, str]]:
        """The `compile` pairs as absolute, normalized paths (config, output)."""
        return [(os.path.normpath(os.path.join(self.root, config)),
                 os.path.normpath(os.path.join(self.root, output)))
                for config, output in self.values["compile"]]


def _from_file(raw: Any) -> Any:
    if isinstance(raw, dict):
        return tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in raw.items())
    return tuple(raw) if isinstance(raw, list) else raw


def command_line(args: argparse.Namespace) -> dict[str, Any]:
    """The settings given as options (absent ones are not there)."""
    given: dict[str, Any] = {}
    if getattr(args, "select", None):
        given["select"] = tuple(split_patterns(args.select))
    if getattr(args, "ignore", None):
        given["ignore"] = tuple(split_patterns(args.ignore))
    for key, attribute in (("strict", "strict"), ("format", "format"),
                           ("respect-gitignore", "respect_gitignore")):
        if getattr(args, attribute, None) is not None:
            given[key] = getattr(args, attribute)
    return given


class Resolver:
    """Settings per folder, loaded once each; a broken project file raises SettingsError."""

    def __init__(self, cli: Mapping[str, Any], *, config: str | None = None,
                 isolated: bool = False) -> None:
        self.cli = dict(cli)
        self.isolated = isolated
        self.forced: ProjectFile | None = None
        self.forced_path = config
        self.cache: dict[str, ProjectFile | None] = {}
        self.settings: dict[str, Settings] = {}
        if config is not None:
            if not os.path.isfile(config):
                raise SettingsError(config, None, [_missing(config)])
            self.forced = load(config)
            if self.forced is None:  # a pyproject.toml without the table: the defaults
                self.forced = ProjectFile(os.path.abspath(config), {}, {})

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Resolver:
        return cls(command_line(args), config=getattr(args, "config_file", None),
                   isolated=getattr(args, "isolated", False))

    def project_for(self, folder: str) -> ProjectFile | None:
        if self.isolated:
            return None
        if self.forced_path is not None:
            return self.forced
        return find(folder, self.cache)

    def for_folder(self, folder: str) -> Settings:
        key = os.path.abspath(folder)
        if key not in self.settings:
            self.settings[key] = self._resolve(self.project_for(key))
        return self.settings[key]

    def for_path(self, path: str) -> Settings:
        """The settings of a file (or of a folder, for the files below it)."""
        folder = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
        return self.for_folder(folder)

    def for_cwd(self) -> Settings:
        return self.for_folder(os.getcwd())

    def _resolve(self, project: ProjectFile | None) -> Settings:
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        for key in KEYS:
            value, source = key.default, DEFAULT
            if project is not None and key.name in project.values:
                value, source = _from_file(project.values[key.name]), \
                    project.where(key.name)
            if key.name in self.cli:
                given = self.cli[key.name]
                if key.name == "ignore" and source != DEFAULT:  # the command line adds to it
                    value, source = (*value, *given), f"{source}, {COMMAND_LINE}"
                else:
                    value, source = given, COMMAND_LINE
            values[key.name], sources[key.name] = value, source
        return Settings(project, values, sources)


def _missing(path: str) -> Diagnostic:
    return Diagnostic(RULE, "error",
                      "--config names no such file (or not a regular file)",
                      Span(file=display(path)))
