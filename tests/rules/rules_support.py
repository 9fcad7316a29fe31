"""Helpers for the rules tests: compile rule text to a runner, and build small Specs."""

from __future__ import annotations

from kvreplay.compiler.origin import SourceOrigin
from kvreplay.rules.loader import load
from kvreplay.rules.runner import Runner
from kvreplay.schema.spec import Spec

RULE_HEAD = 'rule T-RULE error {\n  title "t"\n  rationale "r"\n'


def runner_for(text: str, name: str = "rules/test.rules") -> Runner:
    """A runner over rules written in `text` (parsed, checked and compiled without cache)."""
    return Runner(rules=load([(name, text)], use_cache=False)["RULES"])


def path_origin() -> SourceOrigin:
    """An origin that shows Spec paths as they are (no source document)."""
    return SourceOrigin(None, lambda path: tuple(path), file="spec")


def fires(condition: str, spec: Spec, binders: str = "") -> bool:
    text = RULE_HEAD + f"  {binders}\n  when {condition}\n  at mode\n  message \"m\"\n}}\n"
    return bool(runner_for(text).findings(spec))


def truth(condition: str, spec: Spec) -> bool | None:
    """The three-valued value of a condition: True, False, or None when unknown."""
    if fires(condition, spec):
        return True
    if fires(f"not ({condition})", spec):
        return False
    return None
