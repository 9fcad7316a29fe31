"""kvreplay.rules: the support matrix as rules (rules/*.rules), their language and their runner.

Public API (imported lazily, so `import kvreplay.rules` costs nothing until used):

- run_rules(spec, origin, *, select=None, ignore=None) -> list[Diagnostic]   (a RuleRunner)
- make_runner(select=None, ignore=None) -> Runner      (a RuleRunner with only those rules on)
- select_rules(select=None, ignore=None) -> tuple[str, ...]   (enabled IDs; ValueError if unknown)
- rule_ids() -> tuple[str, ...]
- catalog() -> {rule ID: (short description, severity)};  rule_infos() -> {rule ID: RuleInfo}
- render_matrix(format="markdown" | "json") -> str
- RuleFileError (malformed rule files: file:line:col, expected tokens)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

_LAZY = {
    "run_rules": "kvreplay.rules.runner",
    "make_runner": "kvreplay.rules.runner",
    "select_rules": "kvreplay.rules.runner",
    "rule_ids": "kvreplay.rules.runner",
    "Runner": "kvreplay.rules.runner",
    "catalog": "kvreplay.rules.registry",
    "rule_infos": "kvreplay.rules.registry",
    "RuleInfo": "kvreplay.rules.registry",
    "render_matrix": "kvreplay.rules.matrix",
    "RuleFileError": "kvreplay.rules.errors",
    "Problem": "kvreplay.rules.errors",
}

if TYPE_CHECKING:
    from kvreplay.rules.errors import Problem, RuleFileError
    from kvreplay.rules.matrix import render_matrix
    from kvreplay.rules.registry import RuleInfo, catalog, rule_infos
    from kvreplay.rules.runner import Runner, make_runner, rule_ids, run_rules, select_rules

__all__ = [
    "Problem",
    "RuleFileError",
    "RuleInfo",
    "Runner",
    "catalog",
    "make_runner",
    "render_matrix",
    "rule_ids",
    "rule_infos",
    "run_rules",
    "select_rules",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kvreplay.rules' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
