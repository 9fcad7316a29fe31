"""Reporters: pure functions from per-file lint results to the text of one `--format`.

`render(name, results, ...)` dispatches to one format module, imported only when used. Each
format module also has its own `render_<name>` function. Reporters never read the environment,
write anything or decide exit codes; `policy` holds the two small choices the CLI makes first
(which format `auto` means, whether to colour).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kvreplay.formats.policy import resolve_auto, use_color
from kvreplay.formats.result import FileResult, Summary, summarize

if TYPE_CHECKING:
    from kvreplay.formats.sarif import Catalog

FORMAT_NAMES: tuple[str, ...] = ("text", "concise", "json", "sarif", "github")

__all__ = [
    "FORMAT_NAMES",
    "FileResult",
    "Summary",
    "render",
    "resolve_auto",
    "summarize",
    "use_color",
]


def render(
    format_name: str,
    results: Sequence[FileResult],
    *,
    color: bool = False,
    root: str | None = None,
    cwd: str | None = None,
    catalog: Catalog | None = None,
    version: str | None = None,
    information_uri: str | None = None,
) -> str:
    """The output of one format for these results; `auto` must be resolved by the caller first.

    `color` applies to `text`; `root`/`cwd` to `sarif` and `github` (repo-relative paths);
    `catalog`, `version` and `information_uri` to `sarif`. Other formats ignore them.
    """
    if format_name == "text":
        from kvreplay.formats.text import render_text

        return render_text(results, color=color)
    if format_name == "concise":
        from kvreplay.formats.concise import render_concise

        return render_concise(results)
    if format_name == "json":
        from kvreplay.formats.json import render_json

        return render_json(results)
    if format_name == "sarif":
        from kvreplay.formats.sarif import render_sarif

        return render_sarif(
            results,
            catalog=catalog,
            version=version,
            root=root,
            cwd=cwd,
            information_uri=information_uri,
        )
    if format_name == "github":
        from kvreplay.formats.github import render_github

        return render_github(results, root=root, cwd=cwd)
    known = ", ".join(FORMAT_NAMES)
    raise ValueError(
        f"unknown output format {format_name!r} (known: {known}; resolve 'auto' first)"
    )
