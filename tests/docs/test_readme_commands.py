"""The README's two set-up commands are what CI runs: `.ci/run` ends with exactly the README's
install command and its test command, and the test command spreads the suite over the cores."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _setup_commands() -> tuple[str, str]:
    """(install, test): the first two shell blocks of the README's set-up section."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Set up", 1)[1].split("\n## ", 1)[0]
    first, second = re.findall(r"```sh\n(.*?)\n```", section, re.S)[:2]
    install = first.split(" && ", 1)[0]
    return install, second.strip()


def test_ci_runs_the_readmes_install_and_test_commands() -> None:
    """The last line of .ci/run is `INSTALL && TEST`, as the README writes them."""
    install, test = _setup_commands()
    last = (REPO / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    assert last == f"{install} && {test}"
    assert install == "pip install -e '.[test]'"


def test_the_test_command_runs_on_every_core_and_xdist_is_installed_for_it() -> None:
    """`pytest -n auto` needs pytest-xdist, so the test extra carries it."""
    _, test = _setup_commands()
    assert test == "pytest -n auto"
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    extra = pyproject.split("\ntest = [", 1)[1].split("\n]", 1)[0]
    assert '"pytest-xdist' in extra
