"""`main` builds only the subcommand its argv names (start-up, issue 29): that parser must be
the one the full parser holds, and every other argv must still get the full parser."""

from __future__ import annotations

import argparse

import pytest

from kvreplay.cli.main import COMMANDS, build_parser, command_of


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_commands_table_is_the_full_parsers_subcommands() -> None:
    """COMMANDS lists every subcommand of the full parser, in its help order."""
    assert list(_subcommands(build_parser())) == [name for name, _, _ in COMMANDS]


@pytest.mark.parametrize("name", [name for name, _, _ in COMMANDS])
def test_one_subcommand_parser_is_the_full_parsers(name: str) -> None:
    """build_parser(name) holds that subcommand alone, with the same help and usage."""
    alone = _subcommands(build_parser(name))
    full = _subcommands(build_parser())[name]
    assert list(alone) == [name]
    assert alone[name].format_help() == full.format_help()
    assert alone[name].format_usage() == full.format_usage()


def test_command_of_only_a_leading_subcommand() -> None:
    """A leading subcommand selects its parser; options first, a typo or nothing: all."""
    assert command_of(["run", "spec.json"]) == "run"
    assert command_of(["lint"]) == "lint"
    assert command_of(["--debug", "run", "spec.json"]) is None
    assert command_of(["rnu"]) is None
    assert command_of([]) is None
