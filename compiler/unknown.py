"""Values the schema refused are unknown to the rules, not the defaults that replaced them.

Validation drops an invalid value so that the rest of the document is still checked, and
lowering then fills in the key's default. A rule must not fire on that default: a bogus
`source_type` is not a `synthetic` source that lacks a stop count, and its root cause is already
reported. So the Spec the rules read has every field that comes from a refused value set to None,
which the rules language reads as unknown (docs/rules.md). Unknown or inapplicable keys refuse
no value: the rules still run on everything else (a misspelt key and a G2-on-SGLang deployment
in one file report both).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Any, TypeVar

from kvreplay.compiler.source import Path, parse_path
from kvreplay.schema.diagnostics import Diagnostic
from kvreplay.schema.frozen import Frozen, evolve, fields_of, is_frozen
from kvreplay.schema.origin import Origin, SpecPath
from kvreplay.schema.spec import Spec

# Findings whose value was dropped (or replaced by null by the loader).
REFUSING = frozenset({"SCHEMA-TYPE", "SCHEMA-ENUM", "SCHEMA-RANGE", "SCHEMA-LENGTH",
                      "SCHEMA-INVALID", "YAML-NON-FINITE", "YAML-NON-JSON", "YAML-TAG",
                      "YAML-ALIAS", "YAML-SYNTAX", "JSON-NON-FINITE"})
# A role's name identifies it (its worker type is the same name): never a refused value.
_KEEP = frozenset({"name", "worker_type"})

T = TypeVar("T", bound=Frozen)


def refused_paths(diagnostics: Iterable[Diagnostic]) -> set[Path]:
    """The document paths whose values the loader or the schema refused."""
    paths = (parse_path(d.span.path) for d in diagnostics
             if d.rule in REFUSING and d.span.path is not None)
    return {p for p in paths if p}


def forget_refused(spec: Spec, origin: Origin, refused: Collection[Path]) -> Spec:
    """The Spec with every field that comes from a refused value set to None."""
    if not refused:
        return spec

    def gone(spec_path: SpecPath, leaf: bool) -> bool:
        source = origin.to_source(spec_path)
        # A refused value at the field or around it; for a leaf built from a whole subtree
        # (capacity -> num_gpu_blocks), a refused value inside it too.
        return any(source[:len(p)] == p or (leaf and p[:len(source)] == source)
                   for p in refused)

    roles = tuple(_forget(role, ("roles", role.name), gone) for role in spec.roles)
    return evolve(_forget(spec, (), gone, skip=("roles",)), roles=roles)


def _forget(value: T, at: SpecPath, gone: Callable[[SpecPath, bool], bool],
            skip: tuple[str, ...] = ()) -> T:
    changes: dict[str, Any] = {}
    for name in fields_of(type(value)):
        if name in _KEEP or name in skip:
            continue
        child = getattr(value, name)
        path = at + (name,)
        nested = is_frozen(type(child))
        if gone(path, not nested):
            changes[name] = None
        elif nested:
            updated = _forget(child, path, gone)
            if updated is not child:
                changes[name] = updated
    return evolve(value, **changes) if changes else value
