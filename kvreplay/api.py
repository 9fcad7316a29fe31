"""The public Python API: load, compile and lint configs; build specs from native engine args.

    >>> import kvreplay
    >>> result = kvreplay.compile_config("examples/agentx-g2-local.yaml")
    >>> result.ok, result.emitted()[:1]
    (True, '{')

Every function returns diagnostics as values (kvreplay.Diagnostic); none raises on bad input.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from kvreplay.compiler.pipeline import Compiled, RuleRunner
from kvreplay.replay import RunOutcome
from kvreplay.schema.diagnostics import Diagnostic, Span

if TYPE_CHECKING:
    from kvreplay.engine.scaling import ScalingPolicy

__all__ = [
    "Compiled",
    "ConfigResult",
    "compile_config",
    "lint_config",
    "load_config",
    "run_spec",
    "spec_from_engine_args",
]


def matrix_rules() -> RuleRunner:
    """The support-matrix rule runner (rules/*.rules), loaded lazily."""
    from kvreplay.rules import run_rules

    return run_rules


@attrs.frozen
class ConfigResult:
    """A loaded config model (None when the document cannot be modelled) and its findings."""

    config: Any
    diagnostics: tuple[Diagnostic, ...]


def _text_and_name(source: str | os.PathLike[str] | Mapping[str, Any]) -> tuple[str | None, str]:
    if isinstance(source, Mapping):
        import json

        return json.dumps(source), "<python>"
    path = os.fspath(source)
    return None, path


def compile_config(
    source: str | os.PathLike[str] | Mapping[str, Any],
    *,
    overrides: Sequence[str] = (),
    matrix: bool = True,
) -> Compiled:
    """Compile a YAML config, a native JSON spec (path) or a config mapping into a Spec.

    `result.ok` tells whether it is valid; `result.emitted()` is the canonical native JSON;
    `result.diagnostics` lists every finding (schema and support matrix when `matrix`).
    """
    from kvreplay.compiler.documents import compile_path, compile_text

    rules = matrix_rules() if matrix else None
    if isinstance(source, Mapping):
        import json

        try:
            text = json.dumps(source, allow_nan=False)
        except (TypeError, ValueError) as exc:
            return Compiled("<python>", "python", None, None,
                            (Diagnostic("MODEL-INVALID", "error", f"not JSON-shaped data: {exc}",
                                        Span(file="<python>")),))
        return compile_text(text, "<python>", overrides=overrides, rules=rules)
    return compile_path(os.fspath(source), overrides=overrides, rules=rules)


def load_config(
    source: str | os.PathLike[str] | Mapping[str, Any], *, overrides: Sequence[str] = ()
) -> ConfigResult:
    """Load a YAML config (path or mapping) into the frozen model of kvreplay.compiler.model."""
    from kvreplay.compiler.convert import structure_config
    from kvreplay.compiler.documents import load_text
    from kvreplay.compiler.overrides import apply_overrides
    from kvreplay.compiler.reading import read_config_text
    from kvreplay.compiler.validate import prune, validate

    text, name = _text_and_name(source)
    if text is None:
        text, problems = read_config_text(name)
        if text is None:
            return ConfigResult(None, tuple(problems))
    kind, loaded = load_text(text, name)
    loaded = apply_overrides(loaded, overrides)
    if kind != "yaml":
        return ConfigResult(None, (*loaded.diagnostics, Diagnostic(
            "MODEL-INVALID", "error", "this is a native spec, not a config; use compile_config",
            Span(file=name)),))
    if loaded.data is None:
        return ConfigResult(None, tuple(loaded.diagnostics))
    validation = validate(loaded.data, loaded.source, "config")
    config, problems = structure_config(prune(loaded.data, validation.prune), name)
    return ConfigResult(config, (*loaded.diagnostics, *validation.diagnostics, *problems))


def lint_config(
    source: str | os.PathLike[str] | Mapping[str, Any], *, overrides: Sequence[str] = ()
) -> list[Diagnostic]:
    """All findings for a config or native spec: syntax, schema and support matrix."""
    return list(compile_config(source, overrides=overrides).diagnostics)


def spec_from_engine_args(
    engine_args: Mapping[str, Any] | None = None,
    *,
    prefill_engine_args: Mapping[str, Any] | None = None,
    decode_engine_args: Mapping[str, Any] | None = None,
    num_workers: int = 1,
    num_prefill_workers: int = 1,
    num_decode_workers: int = 1,
    model: str | None = None,
    router_mode: str = "round_robin",
    router_config: Mapping[str, Any] | None = None,
    traffic: Mapping[str, Any] | None = None,
    handoff_latency_ms: float = 0.0,
    planner_config: Mapping[str, Any] | None = None,
    scaling: Mapping[str, Any] | None = None,
    max_sim_time_ms: float | None = None,
    sla_ttft_ms: float | None = None,
    sla_itl_ms: float | None = None,
    sla_e2e_ms: float | None = None,
    matrix: bool = True,
) -> Compiled:
    """Build a Spec from per-role native engine args, like the reference's replay entry points.

    Give `engine_args` for an aggregated deployment, or `prefill_engine_args` and
    `decode_engine_args` for a disaggregated one. Each role's args may be flat (rank fields and
    `dp_size`/`tensor_parallel_size` side by side) or nested (`{"rank": {...}, "dp_size": 2}`).
    A missing kv_layout_id is derived for cluster_shared roles in both forms; an explicit one is
    kept. The same support-matrix rules as for YAML and native JSON apply. `traffic` takes the
    native traffic keys (docs/native-json.md); `planner_config` enables the planner scaling hook
    (so pools are not static), `scaling` a kvreplay policy in its native form
    (`{"provider": "load", "config": {...}}`, docs/native-json.md); the SLA bounds feed goodput.
    """
    from kvreplay.compiler.engine_args import compile_engine_args

    return compile_engine_args(
        {"aggregated": engine_args, "prefill": prefill_engine_args, "decode": decode_engine_args},
        {"aggregated": num_workers, "prefill": num_prefill_workers, "decode": num_decode_workers},
        model=model, router_mode=router_mode, router_config=router_config, traffic=traffic,
        handoff_latency_ms=handoff_latency_ms, planner_config=planner_config,
        max_sim_time_ms=max_sim_time_ms, scaling=scaling, sla=(sla_ttft_ms, sla_itl_ms, sla_e2e_ms),
        rules=matrix_rules() if matrix else None)


def run_spec(
    source: str | os.PathLike[str] | Compiled,
    *,
    overrides: Sequence[str] = (),
    trace_paths: Sequence[str] | None = None,
    base_dir: str | os.PathLike[str] | None = None,
    stepwise: bool = False,
    scaling_policy: ScalingPolicy | None = None,
) -> RunOutcome:
    """Replay a config or native spec (path, or a `Compiled` result) with the bundled engine.

    Returns a RunOutcome: `.report` is the canonical report dict (None when the run could not
    happen), `.diagnostics` the findings, `.refusals` what the engine does not execute. Trace
    paths resolve against `base_dir` (default: the config's folder, or the working directory).
    `scaling_policy`: an object with the reference's scaling protocol (`ScalingPolicy`:
    `initial_tick_ms()`, `on_tick(snapshot)`) driving the pools of a spec without `scaling`
    (docs/engine.md, Scaling); a policy that fails or answers nonsense is `.error`, naming the
    tick and the value.
    """
    from kvreplay.replay import replay

    if isinstance(source, Compiled):
        compiled = source
        folder = os.fspath(base_dir) if base_dir is not None else os.getcwd()
    else:
        compiled = compile_config(source, overrides=overrides)
        folder = os.fspath(base_dir) if base_dir is not None else \
            os.path.dirname(os.path.abspath(os.fspath(source)))
    return replay(compiled, base_dir=folder, trace_paths=trace_paths, stepwise=stepwise,
                  scaling_policy=scaling_policy)
