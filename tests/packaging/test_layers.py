"""The layers hold: import-linter checks pyproject's contracts over the installed layout."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _lint(*added: str) -> subprocess.CompletedProcess[str]:
    found = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert found or shutil.which("lint-imports"), "import-linter is missing: pip install -e .[test]"
    command = [sys.executable, str(REPO / "tools" / "lint_imports.py"), "--no-logo"]
    command += [f"--add={item}" for item in added]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def test_the_layers_are_kept() -> None:
    """schema <- rules <- compiler, schema <- engine, all <- the application: no import goes up,
    the engine imports neither the compiler nor the rules, only the CLI imports the CLI."""
    done = _lint()
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Contracts: 2 kept, 0 broken." in done.stdout


@pytest.mark.parametrize(("module", "imported"), [
    ("schema/probe.py", "kvreplay.rules"),         # the schema imports nothing of kvreplay
    ("rules/probe.py", "kvreplay.compiler.lower"),  # the rules run below the compiler
    ("engine/probe.py", "kvreplay.compiler"),       # the engine reads native JSON only
    ("engine/probe.py", "kvreplay.rules.runner"),
    ("compiler/probe.py", "kvreplay.api"),          # nothing below imports the application
    ("sweep/probe.py", "kvreplay.cli.exits"),       # sweeps write through kvreplay.io
    ("io/probe.py", "kvreplay.sweep"),
])
def test_an_import_upward_breaks_a_contract(module: str, imported: str) -> None:
    """The contracts are live: one module that imports against the layers fails the check."""
    done = _lint(f"{module}=import {imported}\n")
    assert done.returncode == 1, done.stdout[-4000:]
    importer = "kvreplay." + module.removesuffix(".py").replace("/", ".")
    assert f"{importer} -> {imported} (l.1)" in done.stdout


def test_a_module_outside_the_layers_breaks_the_contract() -> None:
    """Every module of kvreplay sits in a layer: a new one must be placed in pyproject."""
    done = _lint("newcomer.py=\n")
    assert done.returncode == 1
    assert "kvreplay.newcomer" in done.stdout
