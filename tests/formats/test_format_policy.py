"""`--format auto` and colour resolution: pure functions of the terminal flag and environment."""

from __future__ import annotations

import pytest

from kvreplay.formats.policy import resolve_auto, use_color


@pytest.mark.parametrize(
    ("is_tty", "env", "expected"),
    [
        (True, {}, "text"),
        (True, {"GITHUB_ACTIONS": "true"}, "text"),
        (False, {}, "concise"),
        (False, {"GITHUB_ACTIONS": "true"}, "github"),
        (False, {"GITHUB_ACTIONS": "false"}, "concise"),
        (False, {"GITHUB_ACTIONS": "TRUE"}, "concise"),
        (False, {"CI": "true"}, "concise"),
    ],
)
def test_resolve_auto(is_tty: bool, env: dict[str, str], expected: str) -> None:
    """A terminal gets text; GitHub Actions (exactly `true`) gets github; anything else concise."""
    assert resolve_auto(is_tty, env) == expected


@pytest.mark.parametrize(
    ("is_tty", "flag", "env", "expected"),
    [
        (True, False, {}, True),
        (False, False, {}, False),
        (True, True, {}, False),
        (True, False, {"NO_COLOR": "1"}, False),
        (True, False, {"NO_COLOR": ""}, True),
        (False, False, {"FORCE_COLOR": "1"}, True),
        (False, False, {"FORCE_COLOR": "0"}, False),
        (True, False, {"FORCE_COLOR": "0"}, True),
        (False, False, {"FORCE_COLOR": ""}, False),
        (True, False, {"NO_COLOR": "x", "FORCE_COLOR": "1"}, False),
        (False, True, {"FORCE_COLOR": "1"}, False),
        (True, False, {"TERM": "dumb"}, False),
        (False, False, {"TERM": "dumb", "FORCE_COLOR": "1"}, True),
    ],
)
def test_use_color(is_tty: bool, flag: bool, env: dict[str, str], expected: bool) -> None:
    """--no-color, then NO_COLOR, then FORCE_COLOR, then TERM=dumb, then the terminal decide."""
    assert use_color(is_tty, flag, env) is expected
