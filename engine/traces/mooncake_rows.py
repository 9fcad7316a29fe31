"""One Mooncake row: field checks with a diagnostic per problem, and the checked row."""

from __future__ import annotations

import operator
import re
from collections.abc import Sequence
from itertools import compress, count, repeat
from typing import Any

from kvreplay.engine.traces.jsonl import json_type, locate, shown
from kvreplay.engine.traces.rules import diag
from kvreplay.schema.diagnostics import Diagnostic

MAX_TOKENS = 10_000_000  # per prompt or output; the same bound the native schema puts on lengths
MAX_TIME_MS = 1e15  # about 31,700 years: beyond this, float milliseconds lose sub-ms precision
MAX_HASH_ID = (1 << 64) - 1
MAX_TOKEN_ID = (1 << 32) - 1
_SURROGATE = re.compile("[\ud800-\udfff]")

KNOWN_FIELDS = frozenset({
    "timestamp", "input_length", "output_length", "hash_ids", "session_id", "request_id", "delay",
    "output_token_ids", "priority", "strict_priority", "policy_class",
})


class MooncakeRow:
    """A checked row. `hash_ids` and `output_token_ids` are tuples; lengths are resolved."""

    __slots__ = ("delay", "hash_ids", "input_length", "line", "output_length",
                 "output_token_ids", "request_id", "session_id", "timestamp")

    def __init__(self, line: int, timestamp: float | None, input_length: int, output_length: int,
                 hash_ids: tuple[int, ...], session_id: str | None, request_id: str | None,
                 delay: float | None, output_token_ids: tuple[int, ...] | None) -> None:
        self.line = line
        self.timestamp = timestamp
        self.input_length = input_length
        self.output_length = output_length
        self.hash_ids = hash_ids
        self.session_id = session_id
        self.request_id = request_id
        self.delay = delay
        self.output_token_ids = output_token_ids


class _RowCheck:
    """Collects the diagnostics of one row, locating each field in the line's text."""

    def __init__(self, text: str, file: str, line: int) -> None:
        self.text = text
        self.file = file
        self.line = line
        self.found: list[Diagnostic] = []

    def report(self, rule: str, key: str, message: str, index: int | None = None) -> None:
        where = locate(self.text, key, index)
        column, end = where if where is not None else (None, None)
        path = f"$.{key}" if index is None else f"$.{key}[{index}]"
        self.found.append(diag(rule, message, file=self.file, path=path, line=self.line,
                               column=column, end_column=end))

    def missing(self, key: str, why: str = "") -> None:
        message = f"required field `{key}` is missing{why}"
        self.found.append(diag("TRACE-MISSING", message, file=self.file, path="$",
                               line=self.line, column=1))

    def integer(self, obj: dict[str, Any], key: str, low: int, high: int,
                *, required: bool = False) -> int | None:
        if key not in obj or obj[key] is None:
            if required:
                self.missing(key)
            return None
        value = obj[key]
        if type(value) is not int:
            self.report("TRACE-FIELD", key,
                        f"`{key}` must be an integer, found {json_type(value)} {shown(value)}")
            return None
        if not low <= value <= high:
            self.report("TRACE-VALUE", key,
                        f"`{key}` must be an integer in {low}..{high}, found {shown(value)}")
            return None
        return value

    def number(self, obj: dict[str, Any], key: str, low: float, high: float) -> float | None:
        if key not in obj or obj[key] is None:
            return None
        value = obj[key]
        if type(value) not in (int, float):
            self.report("TRACE-FIELD", key,
                        f"`{key}` must be a number, found {json_type(value)} {shown(value)}")
            return None
        # Compared before any float(): exact for integers of any size, False for NaN.
        if not low <= value <= high:
            where = locate(self.text, key)
            found = self.text[where[0] - 1: where[1] - 1] if where is not None else shown(value)
            if len(found) > 40:
                found = f"{found[:16]}...{found[-8:]} ({len(found):,} characters)"
            self.report("TRACE-VALUE", key,
                        f"`{key}` must be a finite number in {low:g}..{high:g}, found {found}")
            return None
        return float(value)

    def string(self, obj: dict[str, Any], key: str) -> str | None:
        if key not in obj or obj[key] is None:
            return None
        value = obj[key]
        if not isinstance(value, str):
            self.report("TRACE-FIELD", key,
                        f"`{key}` must be a string, found {json_type(value)} {shown(value)}")
            return None
        surrogate = _SURROGATE.search(value)
        if surrogate is not None:
            # JSON allows the escape, but no UTF-8 report or transcript could hold it.
            self.report("TRACE-VALUE", key,
                        f"`{key}` holds a lone UTF-16 surrogate "
                        f"(\\u{ord(surrogate.group()):04x}), which is not valid text")
            return None
        return value

    def int_list(self, obj: dict[str, Any], key: str, high: int, what: str,
                 *, required: bool = False) -> tuple[int, ...] | None:
        if key not in obj or obj[key] is None:
            if required:
                self.missing(key)
            return None
        values = obj[key]
        if not isinstance(values, list):
            self.report("TRACE-FIELD", key,
                        f"`{key}` must be an array of {what}, found {json_type(values)}")
            return None
        bad = _first_bad(values, high)
        if bad is not None:
            i, wrong_type = bad
            if wrong_type:
                self.report("TRACE-FIELD", key, f"`{key}[{i}]` must be an integer ({what}), "
                            f"found {json_type(values[i])} {shown(values[i])}", index=i)
            else:
                self.report("TRACE-VALUE", key, f"`{key}[{i}]` must be in 0..{high}, found "
                            f"{shown(values[i])}", index=i)
            return None
        return tuple(values)


def check_row(obj: dict[str, Any], text: str, *, file: str, line: int,
              block_size: int) -> tuple[MooncakeRow | None, list[Diagnostic]]:
    """The checked row, or None with every problem found in it."""
    c = _RowCheck(text, file, line)
    hash_ids = c.int_list(obj, "hash_ids", MAX_HASH_ID, "hash ids", required=True)
    output_length = c.integer(obj, "output_length", 0, MAX_TOKENS, required=True)
    input_length = c.integer(obj, "input_length", 1, MAX_TOKENS)
    timestamp = c.number(obj, "timestamp", -MAX_TIME_MS, MAX_TIME_MS)
    delay = c.number(obj, "delay", 0.0, MAX_TIME_MS)
    session_id = c.string(obj, "session_id")
    request_id = c.string(obj, "request_id")
    output_token_ids = c.int_list(obj, "output_token_ids", MAX_TOKEN_ID, "token ids")
    c.integer(obj, "priority", -(1 << 31), (1 << 31) - 1)
    c.integer(obj, "strict_priority", 0, MAX_TOKEN_ID)
    c.string(obj, "policy_class")

    if hash_ids is not None:
        capacity = len(hash_ids) * block_size
        if not hash_ids:
            c.report("TRACE-VALUE", "hash_ids",
                     "`hash_ids` must hold at least one hash id, found an empty array")
        elif input_length is not None and input_length > capacity:
            c.report("TRACE-CAPACITY", "input_length",
                     f"`input_length` {input_length} exceeds the {capacity} tokens that "
                     f"{len(hash_ids)} hash id(s) cover at trace_block_size {block_size}")
        elif input_length is None and capacity > MAX_TOKENS:
            c.report("TRACE-VALUE", "hash_ids",
                     f"{len(hash_ids)} hash ids at trace_block_size {block_size} make a "
                     f"{capacity}-token prompt, more than {MAX_TOKENS}")
    if (output_token_ids is not None and output_length is not None
            and len(output_token_ids) != output_length):
        c.report("TRACE-VALUE", "output_token_ids",
                 f"`output_token_ids` must hold output_length = {output_length} token ids, found "
                 f"{len(output_token_ids)}")
    if c.found or hash_ids is None or output_length is None:
        return None, c.found
    resolved_input = input_length if input_length is not None else len(hash_ids) * block_size
    return MooncakeRow(line, timestamp, resolved_input, output_length, hash_ids, session_id,
                       request_id, delay, output_token_ids), []


def _first_bad(values: list[Any], high: int) -> tuple[int, bool] | None:
    """(index, is it the type) of the first item that is not an integer in 0..high, or None.

    Checked at C speed (map/compress, min/max): a row can hold millions of hash ids.
    """
    typed = len(values)  # items before the first non-integer
    if not set(map(type, values)) <= {int}:
        typed = next(compress(count(), map(operator.is_not, map(type, values), repeat(int))))
    ints = values[:typed] if typed < len(values) else values
    firsts = []
    if ints and min(ints) < 0:
        firsts.append(next(compress(count(), map(operator.lt, ints, repeat(0)))))
    if ints and max(ints) > high:
        firsts.append(next(compress(count(), map(operator.gt, ints, repeat(high)))))
    if firsts:
        return min(firsts), False
    return (typed, True) if typed < len(values) else None


def unknown_fields(obj: dict[str, Any]) -> Sequence[str]:
    return [key for key in obj if key not in KNOWN_FIELDS]
