"""Comparing two run reports: summary deltas, a per-request join, CI gates (docs/cli.md).

Pure functions over report dicts: `load_report` reads and checks a file, `compare_reports`
gives a `Comparison`, `parse_gate` / `evaluate_gates` decide the CI verdict, and
`kvreplay.compare.formats` renders text, JSON or GitHub annotations.
"""

from __future__ import annotations

from kvreplay.compare.gates import Gate, GateError, GateResult, evaluate_gates, parse_gate
from kvreplay.compare.model import Comparison, FigureDelta, compare_reports
from kvreplay.report_file import ReportInputError, load_report

__all__ = [
    "Comparison",
    "FigureDelta",
    "Gate",
    "GateError",
    "GateResult",
    "ReportInputError",
    "compare_reports",
    "evaluate_gates",
    "load_report",
    "parse_gate",
]
