"""kvreplay.engine: the bundled single-threaded deterministic replay engine.

Import-light: the public names below load their modules on first use.

    run_spec(spec, *, workload, stepwise=False, progress=None, should_stop=None,
             sink=None, scaling_policy=None) -> RunResult  # .records, .facts
    run_native(document, *, workload, ...) -> RunResult # read_engine_spec + run_spec
    Replay(spec).run(workload, ...) -> RunResult        # a spec checked once, run later
    read_engine_spec(document) -> Spec                  # the checked Spec of a native document
    refusals(spec or document) -> list[str]             # one message per unsupported feature
    approximations(spec or document) -> list[str]       # what runs through a stand-in model
    CAPABILITIES                                        # frozenset of capability names
    EngineError, EngineConfigError, Unsupported, Interrupted, ReplayStalled, ScalingPolicyError
    ScalingPolicy                                       # the scaling hook's Protocol
"""

from __future__ import annotations

import importlib
from typing import Any

from kvreplay.engine.compiled import select

select()  # the compiled core (mypyc, when built and current) or the Python sources

_API = {
    "run_native": "kvreplay.engine.api",
    "run_spec": "kvreplay.engine.api",
    "Replay": "kvreplay.engine.api",
    "read_engine_spec": "kvreplay.engine.config",
    "RunResult": "kvreplay.engine.result",
    "RunFacts": "kvreplay.engine.result",
    "PoolFacts": "kvreplay.engine.result",
    "refusals": "kvreplay.engine.capabilities",
    "approximations": "kvreplay.engine.capabilities",
    "CAPABILITIES": "kvreplay.engine.capabilities",
    "EngineError": "kvreplay.engine.errors",
    "EngineConfigError": "kvreplay.engine.errors",
    "Unsupported": "kvreplay.engine.errors",
    "Interrupted": "kvreplay.engine.errors",
    "ReplayStalled": "kvreplay.engine.errors",
    "ScalingPolicyError": "kvreplay.engine.errors",
    "ScalingPolicy": "kvreplay.engine.scaling",
    "prefix_hit_blocks": "kvreplay.engine.oracle",
}

__all__ = sorted(_API)


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'kvreplay.engine' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
