"""docs/cli.md: every option of every command is documented, the example project configuration
is valid, and every documented command runs (in a copy of examples/) with the exit code and
the output lines the page shows."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import attrs
import pytest

from kvreplay.cli.completion import describe
from kvreplay.cli.main import build_parser, main

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "cli.md"
_EXIT = re.compile(r"\s+#\s*exit\s+(\d+)\s*$")


@attrs.frozen
class Step:
    """One `$ kvreplay ...` line, the exit code noted after it (0 if none), the lines shown."""

    command: str
    code: int
    shown: tuple[str, ...]


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def _steps() -> list[Step]:
    steps: list[Step] = []
    for block in _blocks("console"):
        for line in block.splitlines():
            if line.startswith("$ "):
                match = _EXIT.search(line)
                command = line[2:match.start()] if match else line[2:]
                steps.append(Step(command, int(match.group(1)) if match else 0, ()))
            elif line.strip():
                last = steps[-1]
                steps[-1] = attrs.evolve(last, shown=(*last.shown, line))
    return steps


def _run(command: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run one documented command in this process (`> FILE` is the only shell syntax used)."""
    words = shlex.split(command)
    assert words[0] == "kvreplay", command
    target = None
    if ">" in words:
        words, target = words[:words.index(">")], words[words.index(">") + 1]
    try:
        code = main(words[1:])
    except SystemExit as exc:  # --version and --help, as from a shell
        code = exc.code if isinstance(exc.code, int) else 2
    out, err = capsys.readouterr()
    if target is not None:
        Path(target).write_text(out)
    return code, out + err


def test_every_option_is_documented() -> None:
    """Each option string of each command (and each command) appears in docs/cli.md."""
    text = DOC.read_text(encoding="utf-8")
    for command in describe(build_parser()).walk():
        assert f"kvreplay {' '.join(command.path)}".strip() in text or not command.path
        for option in command.options:
            for flag in option.flags:
                assert re.search(rf"`{re.escape(flag)}[` =]", text), (command.path, flag)


def test_documented_commands_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Each `$ kvreplay` line exits as noted and prints the lines shown under it."""
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    (toml,) = [b for b in _blocks("toml") if b.startswith("# kvreplay.toml")]
    (tmp_path / "kvreplay.toml").write_text(toml)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    steps = _steps()
    assert len(steps) > 20
    for step in steps:
        code, output = _run(step.command, capsys)
        assert code == step.code, (step.command, output)
        assert "Traceback" not in output
        for line in step.shown:
            assert line in output, (step.command, line, output)
