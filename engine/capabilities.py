"""What the bundled engine executes, as data, and the refusals for what it does not.

`kvreplay run` refuses a spec with any refusal (one message per unsupported feature, naming
it); `lint` may show them as notes. `approximations` lists what runs through a stand-in model,
which the report must carry. Nothing is approximated without being listed here. Both judge the
typed Spec (a native document is read first).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kvreplay.schema.spec import Spec

CAPABILITIES: frozenset[str] = frozenset({
    "topology:aggregated",
    "topology:disaggregated",
    "attention_dp",
    "backend:vllm",
    "backend:sglang",
    "backend:sglang:radix_cache",
    "backend:sglang:policies:fifo,lpm",
    "backend:sglang:prefill_decode_interval",
    "backend:sglang:retraction",
    "backend:sglang:pd:destination-first",
    "backend:trtllm",
    "backend:trtllm:guaranteed_no_evict",
    "timing:fixed",
    "timing:polynomial",
    "g1:prefix_caching",
    "g1:lru_eviction",
    "scheduler:chunked_prefill",
    "scheduler:preemption:lifo",
    "scheduler:preemption:fifo",
    "placement:round_robin",
    "placement:kv_router",
    "placement:kv_event_lag",
    "handoff:full_prompt",
    "handoff:destination_missing",
    "max_sim_time",
    "g2:dp_rank_local",
    "g2:cluster_shared",
    "g2:write_through_stores",
    "g2:restore_at_admission",
    "placement:host_pinned_credit",
    "speculation:mtp",
    "g3:worker_local",
    "g3:cluster_shared",
    "g3:write_through_from_g2",
    "g3:restore_through_g2",
    "traffic:weka",
    "traffic:agentic_mooncake",
    "agentic:dependency_graph",
    "agentic:lanes",
    "agentic:lifecycle",
    "agentic:snapshot",
    "agentic:warmup",
    "agentic:profile",
    "scaling:hook",
    "scaling:schedule",
    "scaling:load",
    "scaling:planner_load",
})


def _spec(source: Spec | Mapping[str, Any]) -> Spec | None:
    """The Spec to judge: given, or read from a native document (None when it does not read:
    reading it reports that)."""
    if isinstance(source, Spec):
        return source
    from kvreplay.engine.config import read_spec
    from kvreplay.engine.errors import EngineConfigError

    try:
        return read_spec(source)
    except EngineConfigError:
        return None


def _speculation(spec: Spec) -> list[str]:
    """MTP runs (speculation.py); n-gram drafting has no reference run to be checked against:
    1.6.1's engine refuses it at launch ("engine launch does not implement ngram draft
    scheduling")."""
    return [f"speculative decoding (ngram) on role {role.name}: not executed: the reference "
            "engine (ai-dynamo 1.6.1) implements no n-gram draft scheduling, so there is no "
            "behaviour to reproduce (MTP, `kind: mtp`, runs)"
            for role in spec.roles
            if role.speculation is not None and role.speculation.kind != "mtp"]


def _scaling(spec: Spec) -> list[str]:
    policy = spec.scaling.policy
    if policy == "planner":
        return ["scaling policy 'planner' (the reference's planner_config= path): it needs the "
                "Dynamo planner package, which kvreplay does not imitate; use a kvreplay policy "
                "(schedule, load, planner_load) or pass a policy object (scaling_policy=)"]
    if policy != "none":
        return scaling_refusals(spec)
    return []


def scaling_refusals(spec: Spec) -> list[str]:
    """What the engine does not run under a scaling policy (a spec's own, or one passed to the
    run): nothing now. G2, G3, telemetry and SGLang ranks run, aggregated or P/D (workers
    joining get their pools and samples; a draining SGLang decode worker keeps its reserved
    destinations and activated handoffs: difftest kind sglang-pd-scaling)."""
    del spec
    return []


# Checked in this order; each returns one message per occurrence. (Timing models other than
# fixed and polynomial, which the engine runs, are not in the native schema.)
REFUSAL_CHECKS: tuple[tuple[str, Callable[[Spec], list[str]]], ...] = (
    ("speculation", _speculation),
    ("scaling", _scaling),
)


def refusals(source: Spec | Mapping[str, Any]) -> list[str]:
    """One message per feature of the spec (or native document) the bundled engine does not
    execute."""
    spec = _spec(source)
    out: list[str] = []
    if spec is not None:
        for _, check in REFUSAL_CHECKS:
            out.extend(check(spec))
    return out


def approximations(source: Spec | Mapping[str, Any]) -> list[str]:
    """What runs through a stand-in model; the report must say so. Nothing does now: SGLang and
    TensorRT-LLM ranks run their own schedulers, and SGLang's P/D handoff runs destination first
    (engine.md sections "SGLang" and "TensorRT-LLM")."""
    _spec(source)
    return []
