"""`kvreplay completion bash|zsh|fish`: scripts generated from the parser that really complete
(bash sourced and driven through COMP_WORDS; fish through `complete -C` when installed)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kvreplay.cli.completion import describe
from kvreplay.cli.main import build_parser

BASH_DRIVER = """
source "$1"
shift
COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); COMPREPLY=()
_kvreplay
printf '%s\\n' "${COMPREPLY[@]}"
"""


def _bash(script: Path, cwd: Path, *words: str) -> list[str]:
    done = subprocess.run(["bash", "--norc", "-c", BASH_DRIVER, "driver", str(script), *words],
                          capture_output=True, text=True, cwd=cwd, timeout=60, check=True)
    return sorted(line for line in done.stdout.splitlines() if line)


@pytest.fixture
def scripts(cli: Callable[..., Any], tmp_path: Path) -> dict[str, Path]:
    out = {}
    for shell in ("bash", "zsh", "fish"):
        ran = cli("completion", shell)
        assert ran.code == 0 and ran.err == ""
        out[shell] = tmp_path / f"kvreplay.{shell}"
        out[shell].write_text(ran.out)
    return out


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completes_commands_options_values_and_files(scripts: dict[str, Path],
                                                          tmp_path: Path) -> None:
    """Subcommands, options, option choices, rule IDs, nested commands and files."""
    (tmp_path / "deploy").mkdir()
    bash = scripts["bash"]
    assert _bash(bash, tmp_path, "kvreplay", "li") == ["lint"]
    assert _bash(bash, tmp_path, "kvreplay", "lint", "--fo") == ["--force-exclude", "--format"]
    assert "sarif" in _bash(bash, tmp_path, "kvreplay", "lint", "--format", "")
    assert _bash(bash, tmp_path, "kvreplay", "lint", "--select", "G3-R") == ["G3-REQUIRES-G2"]
    assert _bash(bash, tmp_path, "kvreplay", "trace", "") == ["convert"]
    assert _bash(bash, tmp_path, "kvreplay", "trace", "convert", "--basis", "r") == ["relative"]
    assert _bash(bash, tmp_path, "kvreplay", "--debug", "lint", "--strict", "dep") == ["deploy"]
    assert _bash(bash, tmp_path, "kvreplay", "schema", "") == ["config", "native", "report",
                                                               "sweep"]
    assert _bash(bash, tmp_path, "kvreplay", "completion", "f") == ["fish"]


@pytest.mark.skipif(shutil.which("fish") is None, reason="needs fish")
def test_fish_completes(scripts: dict[str, Path], tmp_path: Path) -> None:
    """fish offers the same subcommands, option values and nested commands."""
    def complete(line: str) -> list[str]:
        done = subprocess.run(["fish", "--no-config", "-c",
                               f"source {scripts['fish']}; complete -C '{line}'"],
                              capture_output=True, text=True, cwd=tmp_path, timeout=60,
                              check=True)
        return sorted(row.split("\t")[0] for row in done.stdout.splitlines())

    assert complete("kvreplay li") == ["lint"]
    assert complete("kvreplay lint --format s") == ["sarif"]
    assert complete("kvreplay trace ") == ["convert"]
    assert complete("kvreplay trace convert --basis r") == ["relative"]


@pytest.mark.skipif(shutil.which("zsh") is None, reason="needs zsh")
def test_zsh_script_parses(scripts: dict[str, Path]) -> None:
    """The zsh script is valid zsh (`zsh -n`) and defines one function per command."""
    subprocess.run(["zsh", "-n", str(scripts["zsh"])], check=True, timeout=60)
    text = scripts["zsh"].read_text()
    for command in describe(build_parser()).walk():
        name = "_".join(("_kvreplay", *command.path))
        assert f"{name}() {{" in text


def test_every_option_is_in_every_script(scripts: dict[str, Path]) -> None:
    """Each option of each (sub)command appears in each shell's script."""
    for command in describe(build_parser()).walk():
        for option in command.options:
            for flag in option.flags:
                for shell, script in scripts.items():
                    text = script.read_text()
                    word = f"-l {flag[2:]}" if shell == "fish" and flag.startswith("--") \
                        else f"-s {flag[1:]}" if shell == "fish" else flag
                    assert word in text, (shell, command.path, flag)


def test_every_argument_has_help_and_every_command_examples() -> None:
    """`--help` of each command (and of `trace convert`) ends with examples, every positional
    and option says what it is, and the top-level help has three examples and the docs link."""
    import argparse

    from kvreplay import HOMEPAGE
    from kvreplay.cli.main import build_parser

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        assert parser.epilog and parser.epilog.startswith("examples"), path
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*path, name))
            else:
                assert action.help, (path, action.option_strings or action.dest)

    parser = build_parser()
    walk(parser, ())
    top = parser.format_help()
    assert top.split("examples:", 1)[1].count("\n  kvreplay ") == 3
    assert f"{HOMEPAGE}/blob/main/docs/cli.md" in top
