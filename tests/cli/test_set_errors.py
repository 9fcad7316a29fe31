"""`--set` arguments that do not parse are usage errors (exit 2, no findings) on every command."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
CONFIG = str(REPO / "examples" / "g2-restore-mooncake.yaml")


@pytest.mark.parametrize(("argument", "says"), [
    ("engine.workers=[[[", "the value is not valid YAML: while parsing a flow node"),
    ("engine.model={a: 1", "the value is not valid YAML"),
    ("engine.model=a\n---\nb", "it holds more than one YAML document"),
    ("engine.model=a\x01b", "the value is not valid YAML"),
    ('engine.model="\\ud800"', "lone UTF-16 surrogate"),
    (".".join(["a"] * 1000) + "=1", "the path has 1000 keys; a config nests at most 200"),
    ("scaling.config=" + "[" * 300 + "]" * 300, "deeper than 200 levels"),
    ("engine.mo\x01del=1", "a key of the path holds a control character"),
    ("engine.m\udcffodel=1", "the argument is not valid UTF-8 text"),
    ("engine..model=1", "the path must be dotted keys"),
])
@pytest.mark.parametrize("command", ["lint", "compile", "run"])
def test_unparsable_set_is_a_usage_error(cli: Callable[..., Any], command: str, argument: str,
                                         says: str) -> None:
    """Exit 2 with one message on stderr; no finding, no traceback, nothing on stdout."""
    ran = cli(command, CONFIG, "--set", argument)
    assert ran.code == 2 and ran.out == ""
    assert says in ran.err and "TOPO-ROLES" not in ran.err and "internal error" not in ran.err
    assert len(ran.err) < 400


def test_a_value_that_parses_but_is_refused_is_a_finding(cli: Callable[..., Any]) -> None:
    """A value that is one YAML value but not allowed (NaN) stays a finding at the argument."""
    ran = cli("lint", "--format", "concise", CONFIG, "--set", "engine.model=.nan")
    assert ran.code == 1
    assert ran.out.startswith("--set engine.model=.nan:1:20: error YAML-NON-FINITE")


def test_a_bad_set_is_a_usage_error_even_when_the_file_is_broken(cli: Callable[..., Any],
                                                                 tmp_path: Path) -> None:
    """The argument is checked whatever the document: a YAML syntax error does not hide it."""
    broken = tmp_path / "broken.yaml"
    broken.write_text("a: [\n")
    ran = cli("lint", str(broken), "--set", "engine.workers=[[[")
    assert ran.code == 2 and "the value is not valid YAML" in ran.err
