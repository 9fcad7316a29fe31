"""Linting a path that may hold a sweep file: the one entry `kvreplay lint` calls per file.

Light on purpose (lint starts fast): the sweep planner is imported only for sweep files.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvreplay.compiler.documents import compile_loaded, load_text, looks_like_sweep
from kvreplay.compiler.pipeline import Compiled, RuleRunner
from kvreplay.compiler.reading import read_config_text


def compile_document(path: str, *, overrides: Sequence[str] = (),
                     rules: RuleRunner | None = None) -> Compiled:
    """A config or native spec compiled (as `compile_path` does), or a sweep file planned: its
    findings as a `Compiled` of kind "sweep" without a spec."""
    text, problems = read_config_text(path, path)
    if text is None:
        return Compiled(path, "unknown", None, None, tuple(problems), None)
    kind, loaded = load_text(text, path)
    if kind == "yaml" and looks_like_sweep(loaded.data):
        from kvreplay.sweep.plan import plan_sweep

        plan = plan_sweep(loaded, rules=rules, overrides=overrides, emit=False)
        return Compiled(path, "sweep", None, None, plan.diagnostics, text)
    return compile_loaded(kind, loaded, overrides=overrides, rules=rules)


