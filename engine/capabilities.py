"""What the bundled engine executes, as data, and the refusals for what it does not.

`kvreplay run` refuses a document with any refusal (one message per unsupported feature, naming
it); `lint` may show them as notes. `approximations` lists what runs through a stand-in model,
which the report must carry. Nothing is approximated without being listed here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

CAPABILITIES: frozenset[str] = frozenset({
    "topology:aggregated",
    "topology:disaggregated",
    "attention_dp",
    "backend:vllm",
    "backend:sglang:via-vllm-core",
    "backend:trtllm:via-vllm-core",
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
    "traffic:weka",
    "traffic:agentic_mooncake",
    "agentic:dependency_graph",
    "agentic:lanes",
    "agentic:lifecycle",
    "agentic:snapshot",
    "agentic:warmup",
    "agentic:profile",
})


def _roles(document: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(role name, ROLE object) in pool order; tolerant of malformed documents."""
    spec = document.get("spec")
    if not isinstance(spec, Mapping):
        return
    engine = spec.get("engine")
    if not isinstance(engine, Mapping):
        return
    topology = spec.get("topology")
    kind = topology.get("kind") if isinstance(topology, Mapping) else None
    if kind == "disaggregated" or ("prefill" in engine and "decode" in engine):
        for name in ("prefill", "decode"):
            role = engine.get(name)
            if isinstance(role, Mapping):
                yield name, role
    else:
        yield "aggregated", engine


def _rank(role: Mapping[str, Any]) -> Mapping[str, Any]:
    rank = role.get("rank")
    return rank if isinstance(rank, Mapping) else {}


def _g3(document: Mapping[str, Any]) -> list[str]:
    return [f"G3 offload (g3_offload) on role {name}: not executed by the bundled engine"
            for name, role in _roles(document) if _rank(role).get("g3_offload")]


def _speculation(document: Mapping[str, Any]) -> list[str]:
    out = []
    for name, role in _roles(document):
        spec = role.get("speculation")
        if isinstance(spec, Mapping):
            out.append(f"speculative decoding ({spec.get('kind', 'ngram')}) on role {name}: not "
                       "modeled by the bundled engine")
        if _rank(role).get("aic_nextn") is not None:
            out.append(f"speculative decoding (MTP, aic_nextn) on role {name}: not modeled by the "
                       "bundled engine")
    return out


def _timing(document: Mapping[str, Any]) -> list[str]:
    out = []
    for name, role in _roles(document):
        timing = _rank(role).get("timing_model", {"type": "polynomial"})
        kind = timing.get("type") if isinstance(timing, Mapping) else None
        if kind not in ("fixed", "polynomial"):
            out.append(f"timing model {kind!r} on role {name}: the bundled engine runs only "
                       "'fixed' and 'polynomial'")
    return out


def _scaling(document: Mapping[str, Any]) -> list[str]:
    spec = document.get("spec")
    adapters = spec.get("adapters") if isinstance(spec, Mapping) else None
    scaling = adapters.get("scaling") if isinstance(adapters, Mapping) else None
    provider = scaling.get("provider") if isinstance(scaling, Mapping) else None
    if provider not in (None, "none"):
        return [f"scaling policy {provider!r}: the bundled engine runs static worker pools only"]
    return []


# Checked in this order; each returns one message per occurrence.
REFUSAL_CHECKS: tuple[tuple[str, Callable[[Mapping[str, Any]], list[str]]], ...] = (
    ("g3", _g3),
    ("speculation", _speculation),
    ("timing", _timing),
    ("scaling", _scaling),
)


def refusals(native_doc: Mapping[str, Any]) -> list[str]:
    """One message per feature of the document the bundled engine does not execute."""
    out: list[str] = []
    for _, check in REFUSAL_CHECKS:
        out.extend(check(native_doc))
    return out


def approximations(native_doc: Mapping[str, Any]) -> list[str]:
    """What runs through a stand-in model; the report must say so."""
    out = []
    for name, role in _roles(native_doc):
        rank = _rank(role)
        backend = rank.get("backend", "vllm")
        if backend != "vllm":
            ignored = _backend_options(rank, backend)
            tail = f"; not executed: {', '.join(ignored)}" if ignored else ""
            out.append(f"backend {backend} on role {name} runs through the vLLM-shaped scheduler "
                       f"(no {backend}-specific scheduling{tail})")
    return out


# The native defaults of the backend-specific scheduler options (reference 1.6.1).
BACKEND_OPTION_DEFAULTS: dict[str, dict[str, Any]] = {
    "sglang": {"schedule_policy": "fifo", "max_prefill_tokens": 16384,
               "chunked_prefill_size": 8192, "clip_max_new_tokens": 4096,
               "schedule_conservativeness": 1.0},
    "trtllm": {"capacity_scheduler_policy": "guaranteed_no_evict"},
}


def _backend_options(rank: Mapping[str, Any], backend: str) -> list[str]:
    """The backend's scheduler options set away from their defaults, as `name=value`."""
    out = []
    if backend == "sglang" and rank.get("prefill_decode_interval", 0):
        out.append(f"prefill_decode_interval={rank['prefill_decode_interval']}")
    options = rank.get(backend)
    if isinstance(options, Mapping):
        for key, default in BACKEND_OPTION_DEFAULTS.get(backend, {}).items():
            value = options.get(key, default)
            if value != default:
                out.append(f"{backend}.{key}={value}")
    return out
