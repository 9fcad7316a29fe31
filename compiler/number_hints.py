"""The hint for a string where a number belongs: what would parse, derived from the text itself.

`"8192"` is a number in quotes; `"20ms"` is a number with a unit the key's name already gives
(`prefill_ms`), or a different one that converts; `1,000` has digit separators; `four` holds no
number at all. Each gets the value that would be read, never a guess.
"""

from __future__ import annotations

import re

_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_PLAIN = re.compile(_NUMBER)
_WITH_UNIT = re.compile(rf"({_NUMBER})\s*([A-Za-zµ%/]+(?:/[A-Za-z]+)?)")
_GROUPED = re.compile(r"[-+]?\d{1,3}(?:([,_ ])\d{3})(?:\1\d{3})*(?:\.\d+)?")
_WORDS = {w: i for i, w in enumerate(["zero", "one", "two", "three", "four", "five", "six",
                                       "seven", "eight", "nine", "ten", "eleven", "twelve"])}

# Units a key's name ends with, and the spellings of each that a value may carry, with the
# factor that converts them into the key's unit.
_TIME = {"us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1e3, "sec": 1e3, "secs": 1e3, "second": 1e3,
         "seconds": 1e3, "min": 6e4, "h": 3.6e6}
_KEY_UNITS: tuple[tuple[str, str, dict[str, float]], ...] = (
    ("_ms", "ms", _TIME),
    ("_seconds", "s", {u: f / 1e3 for u, f in _TIME.items()}),
    ("_gbps", "GB/s", {"gb/s": 1.0, "gbps": 1.0, "gbs": 1.0, "mb/s": 1e-3, "mbps": 1e-3,
                       "tb/s": 1e3}),
    ("_gb_per_second", "GB/s", {"gb/s": 1.0, "gbps": 1.0, "gbs": 1.0, "mb/s": 1e-3,
                                "mbps": 1e-3, "tb/s": 1e3}),
    ("bytes", "bytes", {"b": 1.0, "bytes": 1.0, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
                        "KiB": 2.0**10, "MiB": 2.0**20, "GiB": 2.0**30, "TiB": 2.0**40}),
)
# Suffixes that scale a count: which factor is meant (1000 or 1024) is not for kvreplay to guess.
_SCALES = frozenset({"k", "K", "m", "M", "g", "G", "b", "B", "Ki", "Mi", "Gi", "KB", "kb"})


def number_hint(key: str, text: str, *, integer: bool) -> str:
    """What to write instead of the string `text` for the number at `key`."""
    stripped = text.strip()
    if _PLAIN.fullmatch(stripped):
        return f"remove the quotes to write a number: `{stripped}`"
    grouped = _GROUPED.fullmatch(stripped)
    if grouped:
        digits = stripped.replace(grouped.group(1), "")
        return f"write the number without digit separators: `{digits}`"
    unit = _WITH_UNIT.fullmatch(stripped)
    if unit:
        return _unit_hint(key, unit.group(1), unit.group(2), integer=integer)
    if stripped.lower() in _WORDS:
        return f"`{stripped}` is a word, not a number: write it in digits, `" \
            f"{_WORDS[stripped.lower()]}`"
    if not re.search(r"\d", stripped):
        return f"`{stripped}` holds no number: write one in digits"
    return "write a plain number: digits, with an optional `.` and exponent"


def _unit_hint(key: str, number: str, unit: str, *, integer: bool) -> str:
    own = next(((name, factors) for suffix, name, factors in _KEY_UNITS
                if key.endswith(suffix) or key.startswith(suffix + "_")), None)
    if own is None and unit in _SCALES:
        return f"write the whole number in digits: kvreplay reads no `{unit}` suffix"
    if own is None:
        return f"write the number alone, without `{unit}`: `{number}`"
    name, factors = own
    factor = factors[unit] if unit in factors else factors.get(unit.lower())
    if factor is None:
        return f"write the number alone, in {name} (`{key}` is in {name}); `{unit}` is not a " \
            "unit kvreplay converts"
    if factor == 1.0:
        return f"write the number alone: `{number}` (`{key}` is in {name} already)"
    value = float(number) * factor
    shown = str(int(value)) if value.is_integer() and (integer or abs(value) < 1e15) \
        else repr(value)
    return f"write it in {name}, the unit of `{key}`: {number} {unit} is `{shown}`"
