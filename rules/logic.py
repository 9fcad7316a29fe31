"""Three-valued (Kleene) logic for the rules language: True, False, and None for unknown.

A comparison, membership test or function that reads an unknown value (None in the Spec) is
unknown; `not` keeps unknown; `and` is False if any operand is False, else unknown if any is
unknown, else True; `or` is True if any operand is True, else unknown if any is unknown, else
False. A check reports a finding only when its condition is True: no rule fires on a guess.
Presence tests (`has`, `is null`) are always decided. The generated rule code inlines `and`,
`or`, `not` and comparisons; quantifiers over roles call these helpers.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")


def any3(values: Iterable[bool | None]) -> bool | None:
    unknown = False
    for v in values:
        if v is True:
            return True
        if v is None:
            unknown = True
    return None if unknown else False


def every3(values: Iterable[bool | None]) -> bool | None:
    unknown = False
    for v in values:
        if v is False:
            return False
        if v is None:
            unknown = True
    return None if unknown else True


def not3(value: bool | None) -> bool | None:
    return None if value is None else not value


def pairs(items: tuple[T, ...]) -> list[tuple[T, T]]:
    """Unordered pairs in order: (a, b) with a before b."""
    return list(itertools.combinations(items, 2))
