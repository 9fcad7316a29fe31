"""kvreplay: lint, compile and replay KV-cache-aware LLM serving deployments."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvreplay.schema.version import VERSION as _VERSION

__version__ = _VERSION

HOMEPAGE = "https://github.com/kvreplay/kvreplay"

# The public API is imported lazily so that `kvreplay lint` starts fast.
_LAZY = {
    "load_config": "kvreplay.api",
    "compile_config": "kvreplay.api",
    "spec_from_engine_args": "kvreplay.api",
    "lint_config": "kvreplay.api",
    "run_spec": "kvreplay.api",
    "RunOutcome": "kvreplay.replay",
    "ScalingPolicy": "kvreplay.engine.scaling",
    "Compiled": "kvreplay.api",
    "Diagnostic": "kvreplay.schema.diagnostics",
    "Span": "kvreplay.schema.diagnostics",
}

if TYPE_CHECKING:
    from kvreplay.api import (
        Compiled,
        compile_config,
        lint_config,
        load_config,
        run_spec,
        spec_from_engine_args,
    )
    from kvreplay.engine.scaling import ScalingPolicy
    from kvreplay.replay import RunOutcome
    from kvreplay.schema.diagnostics import Diagnostic, Span

__all__ = [
    "Compiled",
    "Diagnostic",
    "RunOutcome",
    "ScalingPolicy",
    "Span",
    "compile_config",
    "lint_config",
    "load_config",
    "run_spec",
    "spec_from_engine_args",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kvreplay' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
