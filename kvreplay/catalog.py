"""Every diagnostic ID kvreplay can report: the one catalog behind --select/--ignore, `kvreplay
explain` and SARIF's rule list (kvreplay.rule_docs adds the help text and examples)."""

from __future__ import annotations

from functools import cache

from kvreplay import HOMEPAGE
from kvreplay.codes import CodeInfo

DOCS = f"{HOMEPAGE}/blob/main/docs"

_TRACE_NO_EXAMPLE = ("`kvreplay run` finds it in a trace file or the traffic it replays; "
                     "`kvreplay lint` never reports it")

_CATEGORY_TITLES = {
    "file": "Reading files",
    "yaml": "YAML",
    "json": "JSON (native specs)",
    "schema": "Schema (structure, types, names)",
    "config": "Config lowering",
    "native": "Native spec shape",
    "sweep": "Sweep files (`kvreplay sweep`)",
    "lint": "Lint",
    "trace": "Traces and workloads (`kvreplay run`)",
}


def builtin_codes() -> list[CodeInfo]:
    """The codes outside the support matrix: kvreplay.codes plus the trace/workload readers'."""
    from kvreplay.codes import CODES
    from kvreplay.engine.traces.rules import FIXES, RULES, SEVERITIES

    trace = [CodeInfo(code, _sentence(summary), "trace", FIXES[code],
                      SEVERITIES.get(code, "error"), _TRACE_NO_EXAMPLE)
             for code, summary in RULES.items()]
    return [*CODES.values(), *trace]


def _sentence(text: str) -> str:
    first = text.split(" ", 1)[0]
    head = text if "_" in first else text[:1].upper() + text[1:]
    return head if head.endswith(".") else head + "."


@cache
def catalog() -> dict[str, tuple[str, str, str | None]]:
    """Rule ID -> (short description, default severity, help URI)."""
    from kvreplay.rules import catalog as matrix_catalog

    out: dict[str, tuple[str, str, str | None]] = {
        info.code: (info.summary, info.severity, f"{DOCS}/diagnostics.md#{info.code.lower()}")
        for info in builtin_codes()
    }
    for rule_id, (summary, severity) in matrix_catalog().items():
        out[rule_id] = (summary, severity, f"{DOCS}/support-matrix.md#{rule_id.lower()}")
    return out


def render_codes_markdown() -> str:
    """docs/diagnostics.md: every non-matrix code, by category (a test keeps the file fresh)."""
    lines = [
        "# Diagnostic codes",
        "",
        "Every finding names a stable code. The support-matrix rules (G2-BACKEND, POOL-LAYOUT,",
        "...) are listed in [support-matrix.md](support-matrix.md); this page lists the others.",
        "Codes are a public contract: they are never renamed or reused. `kvreplay explain CODE`",
        "shows a code with a failing and a passing example where a config can show one.",
        "Generated (`python -m kvreplay.catalog > docs/diagnostics.md`).",
        "",
    ]
    codes = builtin_codes()
    for category, title in _CATEGORY_TITLES.items():
        lines += [f"## {title}", "", "| code | severity | meaning | fix |",
                  "| --- | --- | --- | --- |"]
        lines += [f'| <a id="{c.code.lower()}"></a>`{c.code}` | {c.severity} | {c.summary} '
                  f'| {c.fix} |' for c in codes if c.category == category]
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(render_codes_markdown(), end="")
