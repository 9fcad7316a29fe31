"""Which of the files found are linted. A file named on the command line always is (unless
`--force-exclude`, for pre-commit, which names every staged file). A file found by walking a
folder is linted when it is not excluded by the settings nor ignored by git, and is named by
the project configuration (`include`, a `compile` pair) or recognized by its content."""

from __future__ import annotations

import os
from collections.abc import Iterable

import attrs

from kvreplay.cli import globs
from kvreplay.cli.discovery import CONFIG_SUFFIXES, Target, expand
from kvreplay.cli.settings import Resolver, Settings

EXCLUDED = "excluded by the settings"
GITIGNORED = "ignored by .gitignore"
UNRECOGNIZED = "not a kvreplay config"


@attrs.frozen
class Skipped:
    path: str
    reason: str


@attrs.frozen
class Selection:
    """The files to lint (in order), the ones passed over and why, and notes for --verbose."""

    targets: tuple[Target, ...]
    skipped: tuple[Skipped, ...]
    notes: tuple[str, ...]


def named(settings: Settings, path: str) -> bool:
    """Named by the project configuration: matches `include` or is a side of a `compile` pair."""
    if globs.any_matches(settings["include"], settings.relative(path)):
        return True
    here = os.path.normpath(os.path.abspath(path))
    return any(here in pair for pair in settings.pairs())


def is_ours(path: str) -> bool:
    """Recognized by content; a file that cannot be read counts (linting it says why)."""
    from kvreplay.cli.recognize import recognize

    try:
        return recognize(path) is not None
    except OSError:
        return True


def select(arguments: Iterable[str], resolver: Resolver, *,
           force_exclude: bool = False) -> Selection:
    found = expand(arguments)
    skipped: dict[str, str] = {}
    named_files: set[str] = set()
    pending: list[Target] = []  # to check against .gitignore and content
    for target in found:
        if target.missing or (target.explicit and not force_exclude):
            continue
        settings = resolver.for_path(target.path)
        is_named = named(settings, target.path)
        if not is_named and not target.path.endswith(CONFIG_SUFFIXES):
            # not YAML or JSON: a walked one is not even counted
            skipped[target.path] = UNRECOGNIZED if target.explicit else ""
        elif globs.any_matches(settings["exclude"], settings.relative(target.path)):
            skipped[target.path] = EXCLUDED
        else:
            if is_named:
                named_files.add(target.path)
            pending.append(target)
    notes: list[str] = []
    asked = [t.path for t in pending if resolver.for_path(t.path)["respect-gitignore"]]
    if asked:
        from kvreplay.cli.gitignore import ignored

        ignored_paths, notes = ignored(asked)
        skipped.update(dict.fromkeys(ignored_paths, GITIGNORED))
    for target in pending:
        if target.path not in skipped and target.path not in named_files \
                and not is_ours(target.path):
            skipped[target.path] = UNRECOGNIZED
    return Selection(
        targets=tuple(t for t in found if t.path not in skipped),
        skipped=tuple(Skipped(t.path, skipped[t.path]) for t in found
                      if skipped.get(t.path)),
        notes=tuple(notes))
