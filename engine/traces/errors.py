"""The error a workload cannot be built (or read on) without: its diagnostics say why."""

from __future__ import annotations

from collections.abc import Sequence

from kvreplay.schema.diagnostics import Diagnostic


class WorkloadError(Exception):
    """Raised with every diagnostic found; the run must not start."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics = list(diagnostics)
        errors = [d for d in self.diagnostics if d.severity == "error"]
        first = errors[0] if errors else (self.diagnostics[0] if self.diagnostics else None)
        where = ""
        if first is not None and first.file is not None:
            where = f"{first.file}:{first.line}: " if first.line is not None else f"{first.file}: "
        head = f"{where}{first.rule} {first.message}" if first is not None else "invalid workload"
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(head + more)
