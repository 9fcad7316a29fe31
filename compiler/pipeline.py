"""The compile pipeline: source text -> positions -> schema -> model -> Spec (-> rules) -> JSON."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs

from kvreplay.compiler.source import Loaded
from kvreplay.compiler.unknown import forget_refused, refused_paths
from kvreplay.schema.diagnostics import Diagnostic, has_errors, sort_unique
from kvreplay.schema.origin import Origin
from kvreplay.schema.spec import Spec

# Loader findings that replaced a value by null: the schema must not report those values again.
_VALUE_PROBLEMS = frozenset({"YAML-NON-FINITE", "YAML-NON-JSON", "YAML-TAG", "YAML-ALIAS",
                             "YAML-SYNTAX", "JSON-NON-FINITE"})

# Rules are plugged in by the caller (kvreplay.rules), keeping this module free of the DSL.
RuleRunner = Callable[[Spec, Origin], Sequence[Diagnostic]]


@attrs.frozen
class Compiled:
    """What compiling one document produced: the Spec (when modelled), its origin and findings."""

    file: str | None
    kind: str  # "yaml" | "native" | "python"
    spec: Spec | None
    origin: Origin | None
    diagnostics: tuple[Diagnostic, ...]
    text: str | None = None
    # The native document, emitted on first use (one per Compiled: run, compile and the
    # sweep all read it).
    _native: list[dict[str, Any]] = attrs.field(factory=list, init=False, repr=False,
                                                eq=False, hash=False)

    @property
    def ok(self) -> bool:
        return self.spec is not None and not has_errors(self.diagnostics)

    def native(self) -> dict[str, Any]:
        """The canonical native document of the spec (emitted once; shared: do not change it)."""
        from kvreplay.compiler.emit import to_native

        if self.spec is None:
            raise ValueError("no spec: the document could not be modelled")
        if not self._native:
            self._native.append(to_native(self.spec))
        return self._native[0]

    def emitted(self) -> str:
        from kvreplay.compiler.emit import dumps

        return dumps(self.native())


def looks_like_native(data: Any) -> bool:
    """Native specs are JSON objects with a top-level `spec` (configs have `engine`)."""
    return isinstance(data, dict) and "spec" in data and "engine" not in data


def compile_yaml_loaded(loaded: Loaded, rules: RuleRunner | None = None) -> Compiled:
    from kvreplay.compiler.convert import structure_config
    from kvreplay.compiler.lower import lower, yaml_origin
    from kvreplay.compiler.validate import prune, validate

    diagnostics = list(loaded.diagnostics)
    if loaded.data is None:
        return Compiled(loaded.source.file, "yaml", None, None, tuple(sort_unique(diagnostics)),
                        loaded.text)
    bad = [_path_of(d) for d in diagnostics if d.rule in _VALUE_PROBLEMS]
    validation = validate(loaded.data, loaded.source, "config", [b for b in bad if b])
    diagnostics.extend(validation.diagnostics)
    repaired = prune(_drop_nulls_at(loaded.data, bad), validation.prune)
    if not isinstance(repaired, dict) or not isinstance(repaired.get("engine"), dict):
        return Compiled(loaded.source.file, "yaml", None, None, tuple(sort_unique(diagnostics)),
                        loaded.text)
    config, problems = structure_config(repaired, loaded.source.file)
    diagnostics.extend(problems)
    if config is None:
        return Compiled(loaded.source.file, "yaml", None, None, tuple(sort_unique(diagnostics)),
                        loaded.text)
    origin = yaml_origin(loaded.source, config)
    spec, lowering = lower(config, origin)
    diagnostics.extend(lowering)
    if rules is not None:
        diagnostics.extend(rules(forget_refused(spec, origin, refused_paths(diagnostics)), origin))
    return Compiled(loaded.source.file, "yaml", spec, origin, tuple(sort_unique(diagnostics)),
                    loaded.text)


def compile_native_loaded(loaded: Loaded, rules: RuleRunner | None = None,
                          kind: str = "native") -> Compiled:
    """A native JSON document (or engine args shaped like one) -> Spec, rules and findings."""
    from kvreplay.compiler.native import spec_from_native
    from kvreplay.compiler.validate import prune, validate

    diagnostics = list(loaded.diagnostics)
    file = loaded.source.file
    if loaded.data is None:
        return Compiled(file, kind, None, None, tuple(sort_unique(diagnostics)), loaded.text)
    bad = [_path_of(d) for d in diagnostics if d.rule in _VALUE_PROBLEMS]
    validation = validate(loaded.data, loaded.source, "native", [b for b in bad if b])
    diagnostics.extend(validation.diagnostics)
    repaired = prune(prune(loaded.data, [b for b in bad if b]), validation.prune)
    spec_doc = repaired.get("spec") if isinstance(repaired, dict) else None
    if not isinstance(spec_doc, dict) or not isinstance(spec_doc.get("engine"), dict):
        return Compiled(file, kind, None, None, tuple(sort_unique(diagnostics)), loaded.text)
    spec, origin, shape = spec_from_native(repaired, loaded.source, file)
    diagnostics.extend(shape)
    if rules is not None:
        diagnostics.extend(rules(forget_refused(spec, origin, refused_paths(diagnostics)), origin))
    return Compiled(file, kind, spec, origin, tuple(sort_unique(diagnostics)), loaded.text)


def _path_of(diagnostic: Diagnostic) -> tuple[str | int, ...] | None:
    """The document path a loader diagnostic is about (for skipping duplicate schema errors)."""
    from kvreplay.compiler.source import parse_path

    path = diagnostic.span.path
    return None if path is None else parse_path(path)


def _drop_nulls_at(data: Any, paths: Sequence[tuple[str | int, ...] | None]) -> Any:
    from kvreplay.compiler.validate import prune

    return prune(data, [p for p in paths if p])
