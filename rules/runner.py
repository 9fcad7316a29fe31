"""Running the support matrix on a Spec: `run_rules` (a RuleRunner) and per-rule selection."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kvreplay.rules.functions import resolve_keys
from kvreplay.rules.loader import shipped_module
from kvreplay.schema.diagnostics import Diagnostic, Related, Severity, sort_unique
from kvreplay.schema.origin import Origin, SpecPath
from kvreplay.schema.spec import Spec

CheckFn = Callable[[Spec, list[Any]], None]
CompiledRule = tuple[str, Severity, tuple[CheckFn, ...]]


def compiled_rules() -> tuple[CompiledRule, ...]:
    """Every shipped rule as (ID, severity, check functions), in rule-file order."""
    rules: tuple[CompiledRule, ...] = shipped_module()["RULES"]
    return rules


def rule_ids() -> tuple[str, ...]:
    return tuple(r[0] for r in compiled_rules())


def _matches(selector: str, rule_id: str) -> bool:
    """A selector is a rule ID or a prefix of whole dash-separated parts: `AGX-G2`, `G2`, `ALL`."""
    return selector == "ALL" or rule_id == selector or rule_id.startswith(selector + "-")


def select_rules(select: Iterable[str] | None = None,
                 ignore: Iterable[str] | None = None, *, strict: bool = True) -> tuple[str, ...]:
    """The enabled rule IDs: those `select` names (default all) minus those `ignore` names.

    With `strict`, a selector that names no matrix rule raises ValueError (with a did-you-mean
    hint); without it such selectors are left to the caller (e.g. schema codes on a CLI that
    validates every selector against the full catalog itself).
    """
    ids = rule_ids()
    chosen = list(select) if select is not None else ["ALL"]
    dropped = list(ignore) if ignore is not None else []
    for selector in (*chosen, *dropped) if strict else ():
        if not any(_matches(selector, i) for i in ids):
            from kvreplay.schema.suggest import hint_for

            hint = hint_for(selector, ids, "rule IDs")
            raise ValueError(f"unknown rule `{selector}`" + (f": {hint}" if hint else ""))
    return tuple(i for i in ids if any(_matches(c, i) for c in chosen)
                 and not any(_matches(d, i) for d in dropped))


class Runner:
    """A RuleRunner over a fixed set of enabled rules (all of them by default)."""

    def __init__(self, enabled: Iterable[str] | None = None,
                 rules: Sequence[CompiledRule] | None = None) -> None:
        wanted = None if enabled is None else frozenset(enabled)
        pool = compiled_rules() if rules is None else tuple(rules)
        self.rules = tuple(r for r in pool if wanted is None or r[0] in wanted)

    @property
    def enabled(self) -> tuple[str, ...]:
        return tuple(r[0] for r in self.rules)

    def findings(self, spec: Spec) -> list[tuple[str, Severity, tuple[Any, ...]]]:
        """Raw findings (rule, severity, (message, at, hint, related)) without spans."""
        out: list[tuple[str, Severity, tuple[Any, ...]]] = []
        found: list[tuple[Any, ...]] = []
        for rule_id, severity, checks in self.rules:
            for check in checks:
                check(spec, found)
            if found:
                out.extend((rule_id, severity, f) for f in found)
                found = []
        return out

    def __call__(self, spec: Spec, origin: Origin) -> list[Diagnostic]:
        def key(spec_path: SpecPath) -> str:
            return ".".join(str(part) for part in origin.to_source(spec_path))

        diagnostics = []
        for rule_id, severity, (message, at, hint, related) in self.findings(spec):
            diagnostics.append(Diagnostic(
                rule_id, severity, resolve_keys(message, key), origin.span(at),
                hint=None if hint is None else resolve_keys(hint, key),
                related=tuple(Related(resolve_keys(text, key), origin.span(path))
                              for path, text in related),
            ))
        return sort_unique(diagnostics)


def make_runner(select: Iterable[str] | None = None,
                ignore: Iterable[str] | None = None, *, strict: bool = True) -> Runner:
    """A RuleRunner with only the selected rules enabled (for --select / --ignore)."""
    return Runner(select_rules(select, ignore, strict=strict))


@functools.cache
def _every_rule() -> Runner:
    return Runner()


def run_rules(spec: Spec, origin: Origin, *, select: Sequence[str] | None = None,
              ignore: Sequence[str] | None = None) -> list[Diagnostic]:
    """Every enabled matrix finding for a Spec, sorted by position and each reported once."""
    if select is None and ignore is None:
        return _every_rule()(spec, origin)
    return make_runner(select, ignore)(spec, origin)
