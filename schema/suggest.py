"""Did-you-mean hints: the nearest valid names, or the whole list when nothing is close."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def nearest(word: str, choices: Iterable[str], limit: int = 2) -> list[str]:
    options = sorted(set(choices))
    lowered = {c.lower(): c for c in options}
    if word.lower() in lowered and lowered[word.lower()] != word:
        return [lowered[word.lower()]]
    return difflib.get_close_matches(word, options, n=limit, cutoff=0.6)


def hint_for(word: str, choices: Iterable[str], what: str = "") -> str | None:
    """`did you mean `x`?`, or `valid <what>: a, b, c` when nothing is close."""
    options = sorted(set(choices))
    close = nearest(word, options)
    if close:
        return "did you mean " + " or ".join(f"`{c}`" for c in close) + "?"
    if not options:
        return None
    label = f"valid {what}: " if what else "valid: "
    return label + ", ".join(f"`{c}`" for c in options)
