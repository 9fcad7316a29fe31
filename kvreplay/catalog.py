"""Every diagnostic ID kvreplay can report, for --select/--ignore checks and SARIF rule lists."""

from __future__ import annotations

from functools import cache

from kvreplay import HOMEPAGE

DOCS = f"{HOMEPAGE}/blob/main/docs"

# Codes that warn by default (all other built-in codes are errors).
_WARNINGS = frozenset({"LINT-UNUSED-SUPPRESSION"})


@cache
def catalog() -> dict[str, tuple[str, str, str | None]]:
    """Rule ID -> (short description, default severity, help URI)."""
    from kvreplay.codes import CODES
    from kvreplay.rules import catalog as matrix_catalog

    out: dict[str, tuple[str, str, str | None]] = {
        code: (info.summary, "warning" if code in _WARNINGS else "error",
               f"{DOCS}/diagnostics.md#{code.lower()}")
        for code, info in CODES.items()
    }
    for rule_id, (summary, severity) in matrix_catalog().items():
        out[rule_id] = (summary, severity, f"{DOCS}/support-matrix.md#{rule_id.lower()}")
    return out
