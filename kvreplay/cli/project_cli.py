"""The project-configuration options shared by `lint` and `compile`, and their error path."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # kept out of start-up
    from kvreplay.cli.settings import Resolver
    from kvreplay.cli.settings_file import SettingsError


def add_project_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", dest="config_file", metavar="TOML", default=None,
                        help="use this kvreplay.toml or pyproject.toml for every file (no search)")
    parser.add_argument("--isolated", action="store_true",
                        help="ignore every project configuration file")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="say which files were skipped and why")


def add_walk_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--respect-gitignore", action=argparse.BooleanOptionalAction,
                        default=None, help="skip files .gitignore ignores when walking folders "
                        "(default: on)")
    parser.add_argument("--force-exclude", action="store_true",
                        help="treat named files like walked ones: skip excluded, ignored and "
                        "unrecognized files (for pre-commit)")


def report_settings_error(exc: SettingsError, args: argparse.Namespace) -> None:
    """The findings with their code frame and hint, wherever stderr goes (they are few, and
    the hint is the fix)."""
    import os
    import sys

    from kvreplay.formats import FileResult, render, use_color
    from kvreplay.io.output import write_stderr

    color = use_color(sys.stderr.isatty(), args.no_color, os.environ)
    write_stderr(render("text", [FileResult(exc.file, exc.text, tuple(exc.diagnostics))],
                        color=color))


def resolver_or_error(args: argparse.Namespace) -> Resolver | None:
    """The settings resolver for this run; None (reported, exit 2) when a file is broken."""
    from kvreplay.cli.settings import Resolver
    from kvreplay.cli.settings_file import SettingsError

    try:
        return Resolver.from_args(args)
    except SettingsError as exc:
        report_settings_error(exc, args)
        return None
