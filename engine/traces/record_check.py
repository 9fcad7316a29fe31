"""Typed reads of one JSON line's (nested) fields, each problem a located TRACE-* diagnostic.

The readers of the converted formats (Dynamo request traces, Applied Compute agentic sessions)
check their records with it: a finding names the file, the line, the columns of the value
(`jsonl.locate_path`) and its JSON path (`$.request.replay.input_length`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from kvreplay.engine.traces.jsonl import json_type, locate_path, shown
from kvreplay.engine.traces.rules import diag
from kvreplay.schema.diagnostics import Diagnostic

U64 = (1 << 64) - 1
# A value's problem: the rule and what the value must be, or None.
Problem = tuple[str, str] | None


class RecordCheck:
    """The findings of one line (`prefix`: where the record's object sits in the line)."""

    def __init__(self, text: str, file: str, line: int, prefix: tuple[str, ...] = ()) -> None:
        self.text = text
        self.file = file
        self.line = line
        self.prefix = prefix
        self.found: list[Diagnostic] = []

    def report(self, rule: str, keys: tuple[str, ...], message: str,
               index: int | None = None) -> None:
        full = self.prefix + keys
        where = locate_path(self.text, full, index) if full else None
        column, end = where if where is not None else (1, None)
        path = "$" + "".join(f".{k}" for k in full) + ("" if index is None else f"[{index}]")
        self.found.append(diag(rule, message, file=self.file, path=path, line=self.line,
                               column=column, end_column=end))

    def _name(self, keys: tuple[str, ...]) -> str:
        return ".".join(keys)

    def mapping(self, obj: dict[str, Any], keys: tuple[str, ...], *,
                required: bool = True) -> dict[str, Any] | None:
        def bad(value: Any) -> Problem:
            return None if isinstance(value, dict) else ("TRACE-FIELD", "an object")

        value: dict[str, Any] | None = self._field(obj, keys, bad, required)
        return value

    def integer(self, obj: dict[str, Any], keys: tuple[str, ...], low: int, high: int, *,
                required: bool = False) -> int | None:
        def bad(value: Any) -> Problem:
            if type(value) is not int:
                return "TRACE-FIELD", "an integer"
            return None if low <= value <= high else ("TRACE-VALUE", f"an integer in {low}..{high}")

        value: int | None = self._field(obj, keys, bad, required)
        return value

    def number(self, obj: dict[str, Any], keys: tuple[str, ...], low: float, high: float, *,
               required: bool = False) -> float | None:
        value = self._field(obj, keys, _number(low, high), required)
        return None if value is None else float(value)

    def string(self, obj: dict[str, Any], keys: tuple[str, ...], *, required: bool = False,
               nonempty: bool = False) -> str | None:
        def bad(value: Any) -> Problem:
            return None if isinstance(value, str) else ("TRACE-FIELD", "a string")

        value: str | None = self._field(obj, keys, bad, required)
        if value is None:
            return None
        if nonempty and not value.strip():
            self.report("TRACE-VALUE", keys, f"`{self._name(keys)}` must be non-empty")
            return None
        if any(0xD800 <= ord(ch) <= 0xDFFF for ch in value):
            self.report("TRACE-VALUE", keys, f"`{self._name(keys)}` holds a lone UTF-16 "
                        "surrogate, which is not valid text")
            return None
        return value

    def int_list(self, obj: dict[str, Any], keys: tuple[str, ...], low: int, high: int, *,
                 required: bool = False) -> list[int] | None:
        def bad(item: Any) -> Problem:
            if type(item) is not int:
                return "TRACE-FIELD", "an integer"
            return None if low <= item <= high else ("TRACE-VALUE", f"in {low}..{high}")

        value = self._list(obj, keys, bad, required)
        return None if value is None else list(value)

    def number_list(self, obj: dict[str, Any], keys: tuple[str, ...], low: float, high: float, *,
                    required: bool = False) -> list[float] | None:
        value = self._list(obj, keys, _number(low, high), required)
        return None if value is None else [float(item) for item in value]

    def _field(self, obj: dict[str, Any], keys: tuple[str, ...], bad: Callable[[Any], Problem],
               required: bool) -> Any:
        """The value at `keys` if it passes `bad` (a rule and what it must be, or None)."""
        value = obj.get(keys[-1])
        if value is None:
            if required:
                self.report("TRACE-MISSING", keys[:-1],
                            f"required field `{self._name(keys)}` is missing")
            return None
        problem = bad(value)
        if problem is None:
            return value
        rule, must = problem
        found = f"{json_type(value)} {shown(value)}" if rule == "TRACE-FIELD" else shown(value)
        self.report(rule, keys, f"`{self._name(keys)}` must be {must}, found {found}")
        return None

    def _list(self, obj: dict[str, Any], keys: tuple[str, ...], bad: Callable[[Any], Problem],
              required: bool) -> list[Any] | None:
        """The array at `keys`, each item passing `bad`."""
        def not_list(value: Any) -> Problem:
            return None if isinstance(value, list) else ("TRACE-FIELD", "an array")

        value = self._field(obj, keys, not_list, required)
        if value is None:
            return None
        for i, item in enumerate(value):
            problem = bad(item)
            if problem is not None:
                rule, must = problem
                found = f"{json_type(item)} {shown(item)}" if rule == "TRACE-FIELD" else shown(item)
                self.report(rule, keys, f"`{self._name(keys)}[{i}]` must be {must}, found {found}",
                            index=i)
                return None
        return list(value)


def _number(low: float, high: float) -> Callable[[Any], Problem]:
    def bad(value: Any) -> Problem:
        if type(value) not in (int, float):
            return "TRACE-FIELD", "a number"
        if math.isfinite(value) and low <= value <= high:
            return None
        return "TRACE-VALUE", f"a finite number in {low:g}..{high:g}"

    return bad
