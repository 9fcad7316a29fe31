"""Which rules a run reports: `select` / `ignore` patterns, as on the command line and in the
project configuration. A pattern is a rule ID, a prefix ending at a `-` (`G2` is every `G2-*`
rule, `AGX-G2` every `AGX-G2-*`) or a glob (`TRAFFIC-*`)."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence

from kvreplay.cli import exits


def split_patterns(values: Iterable[str]) -> list[str]:
    """Repeated and comma-separated values as one list of patterns."""
    return [p.strip() for v in values for p in v.split(",") if p.strip()]


def pattern_matches(pattern: str, rule: str) -> bool:
    return rule == pattern or rule.startswith(pattern + "-") or fnmatch.fnmatchcase(rule, pattern)


def unknown_patterns(patterns: Sequence[str], known: Iterable[str]) -> list[str]:
    """The patterns that name no known rule (usage errors, with a did-you-mean hint)."""
    names = sorted(known)
    return [p for p in patterns if not any(pattern_matches(p, n) for n in names)]


def keeps(rule: str, select: Sequence[str], ignore: Sequence[str]) -> bool:
    """Reported when selected (an empty `select` selects all) and not ignored; unreadable input
    is never filtered away."""
    if rule in exits.IO_RULES:
        return True
    if select and not any(pattern_matches(p, rule) for p in select):
        return False
    return not any(pattern_matches(p, rule) for p in ignore)
