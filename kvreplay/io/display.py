"""Terminal-safe text: user-controlled strings must not move the cursor, recolour or reorder output.

Paths, messages and hints can quote file content. Before they reach a terminal, every character
that is not printable (controls, escape sequences, bidi overrides, lone surrogates from undecodable
file names, line breaks) is shown as a Python-style backslash escape, so each finding stays on its
lines and looks the same everywhere.
"""

from __future__ import annotations

_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def escape_inline(text: str) -> str:
    """`text` with each non-printable character as `\\n`, `\\x1b`, `\\u202e`... escapes."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    short = _SHORT.get(ch)
    if short is not None:
        return short
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"
