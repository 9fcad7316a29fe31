"""Planning a sweep: validate the sweep file, load its base config, expand the grid and the
explicit points, and compile every point through the normal pipeline (schema, model, lowering,
support matrix). Findings are located in the sweep file: a swept value's own problems point at
the value, through source-map overlays, as `--set` values do.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import os
from collections.abc import Sequence
from typing import Any

import attrs

from kvreplay.compiler.documents import looks_like_sweep
from kvreplay.compiler.overrides import apply_overrides, assign, from_argument
from kvreplay.compiler.pipeline import (
    Compiled,
    RuleRunner,
    compile_native_loaded,
    compile_yaml_loaded,
    looks_like_native,
)
from kvreplay.compiler.source import Loaded, Path, SourceMap
from kvreplay.schema.diagnostics import Diagnostic, Severity, has_errors, sort_unique
from kvreplay.schema.frozen import evolve
from kvreplay.schema.json_schemas import ValidMemo, remembering
from kvreplay.schema.suggest import hint_for
from kvreplay.sweep.checks import (
    TRACE_KEYS,
    numeric_figures,
    path_problem,
    split_path,
    subtree,
)
from kvreplay.sweep.model import REJECTED, Bound, Objective, Point, Setting, SweepPlan, Trace
from kvreplay.sweep.schema import DEFAULT_OBJECTIVE, MAX_POINTS


def spec_digest(native_text: str) -> str:
    """The name of a point's spec: the first 16 hex digits of the SHA-256 of its native JSON."""
    return hashlib.sha256(native_text.encode("utf-8")).hexdigest()[:16]


@attrs.frozen
class _Base:
    kind: str  # "yaml" | "native"
    loaded: Loaded
    folder: str  # where its own trace paths resolve
    compiled: Compiled


class _Findings:
    """Diagnostics located in the sweep file."""

    def __init__(self, source: SourceMap) -> None:
        self.source = source
        self.out: list[Diagnostic] = []
        self._subtrees: dict[Path, SourceMap] = {}

    def subtree(self, where: Path) -> SourceMap:
        """The source map of the sweep file's value at `where` (made once: points share it)."""
        found = self._subtrees.get(where)
        if found is None:
            found = self._subtrees[where] = subtree(self.source, where)
        return found

    def add(self, rule: str, message: str, where: Path, *, key: bool = False,
            hint: str | None = None, severity: Severity = "error") -> None:
        self.out.append(Diagnostic(rule, severity, message, self.source.span(where, key=key),
                                   hint=hint))


def plan_sweep(loaded: Loaded, *, rules: RuleRunner | None,
               overrides: Sequence[str] = (), emit: bool = True) -> SweepPlan:
    """Every finding about a loaded sweep file and, when it has no error, its points (with
    their native JSON and spec digest, unless `emit` is false: lint needs only findings)."""
    from kvreplay.compiler.validate import prune, validate

    file = loaded.source.file or "<sweep>"
    found = _Findings(loaded.source)
    found.out.extend(loaded.diagnostics)
    if loaded.data is None:
        return SweepPlan(file, loaded.text, tuple(sort_unique(found.out)))
    validation = validate(loaded.data, loaded.source, "sweep")
    found.out.extend(validation.diagnostics)
    data = prune(loaded.data, validation.prune)
    if not isinstance(data, dict):
        return SweepPlan(file, loaded.text, tuple(sort_unique(found.out)))
    folder = os.path.dirname(os.path.abspath(file))
    memo = ValidMemo()  # the base's valid subtrees, which the points share (validated once)
    with remembering(memo):
        base = _base(data, loaded, folder, found, overrides)
    memo.recording = False
    sla, objective, max_rejected = _goals(data, found)
    settings = _settings(data, found, base.kind if base else "yaml")
    traces = _traces(data, base, folder, found) if base is not None else ()
    plan = SweepPlan(file, loaded.text, (), axes=_axes(settings), traces=traces, sla=sla,
                     objective=objective, max_rejected=max_rejected, overrides=tuple(overrides),
                     base_digest=spec_digest(base.compiled.emitted()) if base else None)
    grid = [axis for axis in settings if axis[0] == "grid"]
    count = _count(grid) + sum(1 for axis in settings if axis[0] == "points")
    if count == 0 and not has_errors(found.out):
        where: Path = ("grid",) if "grid" in data else ("points",) if "points" in data else ()
        found.add("SWEEP-EMPTY", "the sweep has no point: give `grid` values or `points`",
                  where, key=True, hint="`points: [{}]` runs the base config as it is")
    if count > MAX_POINTS:
        found.add("SWEEP-TOO-LARGE", f"the sweep has {count:,} points, more than "
                  f"{MAX_POINTS:,}; split it into several sweep files", ("grid",), key=True)
    if base is None or has_errors(found.out):
        return attrs.evolve(plan, diagnostics=tuple(sort_unique(found.out)))
    with remembering(memo):
        points = [_compile_point(n, chosen, base, rules, found, emit=emit)
                  for n, chosen in enumerate(_expand(settings))]
    return attrs.evolve(plan, points=tuple(points), diagnostics=tuple(sort_unique(found.out)))


def _base(data: dict[str, Any], loaded: Loaded, folder: str, found: _Findings,
          overrides: Sequence[str]) -> _Base | None:
    """The base config, loaded once (with the command's `--set` overrides), checked alone
    without the support matrix: a swept value may be what makes it valid."""
    from kvreplay.compiler.documents import load_text
    from kvreplay.compiler.reading import read_config_text

    given = data.get("base")
    if isinstance(given, dict):
        base_loaded = Loaded(given, subtree(loaded.source, ("base",)), loaded.text or "")
        kind, base_folder = ("native" if looks_like_native(given) else "yaml"), folder
    elif isinstance(given, str):
        path = os.path.join(folder, given)
        shown = os.path.join(os.path.dirname(found.source.file or ""), given)
        text, problems = read_config_text(path, shown)
        if text is None:
            found.add("SWEEP-BASE", f"cannot read the base config {given}: "
                      f"{problems[0].message}", ("base",), hint=problems[0].hint)
            return None
        kind, base_loaded = load_text(text, shown)
        base_folder = os.path.dirname(os.path.abspath(path))
        if looks_like_sweep(base_loaded.data):
            found.add("SWEEP-BASE", f"the base {given} is a sweep file, not a config", ("base",))
            return None
    else:
        return None
    base_loaded = apply_overrides(base_loaded, overrides)
    compiled = (compile_native_loaded if kind == "native" else compile_yaml_loaded)(base_loaded)
    errors = [d for d in compiled.diagnostics if d.severity == "error"]
    if errors and all(from_argument(d.span) for d in errors):
        found.out.extend(errors)  # the command's own --set: its findings as lint prints them
        return None
    if errors or compiled.spec is None:
        first = errors[0] if errors else None
        at = "" if first is None else f" (first: {_where(first)} {first.rule} {first.message})"
        found.add("SWEEP-BASE", f"the base config is not valid: {len(errors)} error(s){at}",
                  ("base",), hint="`kvreplay lint` the base config for every finding")
        return None
    return _Base(kind, base_loaded, base_folder, compiled)


def _where(d: Diagnostic) -> str:
    return f"{d.span.file}:{d.span.line}:" if d.span.line is not None else f"{d.span.file}:"


def _goals(data: dict[str, Any], found: _Findings) -> tuple[tuple[Bound, ...], Objective, int]:
    figures = numeric_figures()
    bounds: list[Bound] = []
    sla = data.get("sla") or {}
    for figure, limits in sla.items():
        if figure == "max_rejected":
            continue
        if figure == REJECTED:
            found.add("SWEEP-SLA", f"bound `{REJECTED}` with `max_rejected` (the rejected "
                      "requests a point may have, default 0)", ("sla", figure), key=True,
                      hint=f"write `max_rejected: {_allowed(limits)}` under `sla`")
            continue
        if figure not in figures:
            found.add("SWEEP-FIGURE", f"`{figure}` is not a summary figure of the report",
                      ("sla", figure), key=True, hint=hint_for(figure, figures, "figures"))
            continue
        if "max" in limits and "min" in limits and limits["min"] > limits["max"]:
            found.add("SWEEP-SLA", f"no value meets `{figure}`: its min {limits['min']:g} is "
                      f"above its max {limits['max']:g}", ("sla", figure), key=True,
                      hint="swap them, or drop one")
            continue
        bounds.extend(Bound(figure, op, float(limits[op])) for op in ("max", "min")
                      if op in limits)
    given = data.get("objective") or DEFAULT_OBJECTIVE
    sense, figure = next(iter(given.items()))
    if figure not in figures:
        found.add("SWEEP-FIGURE", f"`{figure}` is not a summary figure of the report",
                  ("objective", sense), hint=hint_for(figure, figures, "figures"))
    return (tuple(bounds), Objective(figure, "maximize" if sense == "maximize" else "minimize"),
            int(sla.get("max_rejected", 0)))


def _allowed(limits: Any) -> str:
    value = limits.get("max") if isinstance(limits, dict) else None
    return f"{int(value)}" if isinstance(value, int | float) and value >= 0 else "N"


Axis = tuple[str, Any, list[Setting]]  # ("grid", path, values) or ("points", index, settings)


def _settings(data: dict[str, Any], found: _Findings, kind: str) -> list[Axis]:
    """The grid's axes and the explicit points, as settings with their places; every dotted
    path is checked against the base's schema (SWEEP-PATH at the key)."""
    from kvreplay.compiler.validate import load_schema

    schema = load_schema("native" if kind == "native" else "config")

    def checked(text: str, where: Path) -> bool:
        parts = split_path(text)
        if parts is None:
            found.add("SWEEP-PATH", f"`{text}` is not a dotted path like a.b.c", where, key=True)
            return False
        if parts[: len(TRACE_KEYS[kind])] == TRACE_KEYS[kind]:
            found.add("SWEEP-PATH", f"`{text}` cannot be swept: list trace files under "
                      "`traces`, and every point runs on each", where, key=True)
            return False
        problem = path_problem(schema, parts)
        if problem is not None:
            message, valid = problem
            found.add("SWEEP-PATH", f"`{text}` is not a config path: {message}", where,
                      key=True, hint=hint_for(parts[-1], valid, "keys") if valid else None)
            return False
        return True

    axes: list[Axis] = []
    for text, values in (data.get("grid") or {}).items():
        if checked(text, ("grid", text)):
            axes.append(("grid", text, [Setting(text, v, ("grid", text, i))
                                        for i, v in enumerate(values)]))
    for n, point in enumerate(data.get("points") or []):
        ok = [checked(text, ("points", n, text)) for text in point]
        if all(ok):
            axes.append(("points", n, [Setting(text, v, ("points", n, text))
                                       for text, v in point.items()]))
    return axes


def _count(grid: list[Axis]) -> int:
    count = 1 if grid else 0
    for _, _, values in grid:
        count *= len(values)
    return count


def _expand(axes: list[Axis]) -> list[tuple[Setting, ...]]:
    """The grid's cartesian product (the first path varying slowest, values in file order),
    then the explicit points in file order."""
    grid = [values for kind, _, values in axes if kind == "grid"]
    points: list[tuple[Setting, ...]] = [tuple(c) for c in itertools.product(*grid)] \
        if grid else []
    points.extend(tuple(values) for kind, _, values in axes if kind == "points")
    return points


def _axes(axes: list[Axis]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for _, _, settings in axes:
        for s in settings:
            seen.setdefault(s.path, None)
    return tuple(seen)


def _traces(data: dict[str, Any], base: _Base, folder: str,
            found: _Findings) -> tuple[Trace, ...]:
    """The sweep's traces (relative to the sweep file) or the base's own (relative to it)."""
    traffic = base.compiled.native().get("traffic") or {}
    is_trace = traffic.get("source_type") == "trace"
    given = data.get("traces")
    if given:
        if not is_trace:
            found.add("SWEEP-TRACES", "`traces` needs a base config whose traffic source is a "
                      "trace (traffic.source.type: trace)", ("traces",), key=True)
            return ()
        return tuple(Trace(t, os.path.normpath(os.path.join(folder, t))) for t in given)
    own = traffic.get("trace_paths") or [] if is_trace else []
    return tuple(Trace(t, os.path.normpath(os.path.join(base.folder, t))) for t in own[:1])


def _compile_point(index: int, settings: tuple[Setting, ...], base: _Base,
                   rules: RuleRunner | None, found: _Findings, *, emit: bool = True) -> Point:
    """Apply the settings to the base, sharing what they leave alone, and compile it; classify
    what went wrong."""
    data = dict(base.loaded.data)
    source = evolve(base.loaded.source, overlays=list(base.loaded.source.overlays))
    point = Point(index, settings, "ok")
    for s in settings:
        parts = split_path(s.path) or ()
        _unshare(data, parts)
        blocked = assign(data, parts, s.value, remove=s.value is None)
        if blocked is not None:
            message = f"`{'.'.join(map(str, blocked))}` is not a mapping in the base config"
            found.add("SWEEP-POINT-INVALID", f"{point.label()}: {message}", s.where)
            return attrs.evolve(point, status="invalid", message=message)
        if s.value is not None:
            source.overlays.append((parts, found.subtree(s.where)))
    loaded = Loaded(data, source, base.loaded.text)
    compiled = (compile_native_loaded if base.kind == "native" else compile_yaml_loaded)(
        loaded, rules)
    errors = [d for d in compiled.diagnostics if d.severity == "error"]
    matrix = _matrix_rules()
    invalid = [d for d in errors if d.rule not in matrix]
    here = settings[0].where[:2] if settings else ("points", index)
    if invalid or compiled.spec is None:
        for d in invalid:
            if d.span.file == found.source.file and d.span.line is not None:
                found.out.append(d)  # the swept value's own problem, at the value
            else:
                found.add("SWEEP-POINT-INVALID", f"{point.label()} is not a valid config: "
                          f"{_where(d)} {d.rule} {d.message}", here, key=True)
        first = invalid[0] if invalid else None
        return attrs.evolve(point, status="invalid", rules=tuple(sorted({d.rule for d in invalid})),
                            message=None if first is None else first.message)
    if errors:
        ids = tuple(sorted({d.rule for d in errors}))
        first = errors[0]
        span = first.span if first.span.file == found.source.file and first.span.line \
            else found.source.span(here, key=True)
        found.out.append(Diagnostic(
            "SWEEP-POINT-SKIPPED", "warning", f"{point.label()} violates {', '.join(ids)} "
            f"({first.message}); `kvreplay sweep` skips it", span))
        return attrs.evolve(point, status="skipped", rules=ids, message=first.message)
    if not emit:
        return point
    native = compiled.emitted()
    return attrs.evolve(point, native=native, spec_digest=spec_digest(native))


def _unshare(data: dict[str, Any], parts: Sequence[str | int]) -> None:
    """Copy the mappings along `parts` (below the already copied `data`) so that assigning at
    `parts` changes this point only: every other subtree stays the base's own object."""
    node = data
    for part in parts[:-1]:
        child = node.get(str(part))
        if not isinstance(child, dict):
            return
        node[str(part)] = child = dict(child)
        node = child


@functools.cache
def _matrix_rules() -> frozenset[str]:
    from kvreplay.rules import catalog

    return frozenset(catalog())

