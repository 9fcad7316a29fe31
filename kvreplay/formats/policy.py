"""The two choices made before rendering: what `--format auto` means, and whether to colour."""

from __future__ import annotations

from collections.abc import Mapping


def resolve_auto(is_tty: bool, env: Mapping[str, str]) -> str:
    """`text` on a terminal; otherwise `github` inside GitHub Actions, else `concise`."""
    if is_tty:
        return "text"
    if env.get("GITHUB_ACTIONS") == "true":
        return "github"
    return "concise"


def use_color(is_tty: bool, no_color_flag: bool, env: Mapping[str, str]) -> bool:
    """Colour on a terminal unless switched off; the strongest signal wins, in this order.

    `--no-color`, then `NO_COLOR` (any non-empty value disables, no-color.org), then
    `FORCE_COLOR` (any non-empty value except `0` enables, even when piped), then
    `TERM=dumb` (disables), then whether the output is a terminal.
    """
    if no_color_flag or env.get("NO_COLOR", ""):
        return False
    force = env.get("FORCE_COLOR", "")
    if force and force != "0":
        return True
    if env.get("TERM") == "dumb":
        return False
    return is_tty
