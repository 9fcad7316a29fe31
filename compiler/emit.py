"""Spec -> canonical native JSON (docs/native-json.md): explicit values, sorted keys, same bytes.

The Spec is written back into the native model (schema/native_model.py) and unstructured by its
converter, so every key is the model's; this module only decides the canonical form: which keys
are left out (as the native engine's normalizer does) and how MTP and the router are written.
"""

from __future__ import annotations

import json
import re
from typing import Any

from kvreplay.schema import native_model as n
from kvreplay.schema import spec as s
from kvreplay.schema.convert import to_json
from kvreplay.schema.frozen import fields_of
from kvreplay.schema.spec import TOPOLOGY_KEY as TOPOLOGY_KEY

# `native_host_offload` keys the native normalizer leaves out at their defaults.
HOST_OFFLOAD_OMITTED = ("scope", "shared_d2h_bandwidth_gbps", "shared_h2d_bandwidth_gbps",
                        "latency_to_first_byte_ms")
# Rank keys written only when set (the native normalizer drops an unknown KV size).
RANK_OPTIONAL = ("kv_cache_bytes_per_token", "native_host_offload", "g3_offload", "sglang",
                 "trtllm", "aic_nextn", "aic_nextn_accept_rates", "state_cache",
                 "prefix_match_unit", "kv_cache_groups", "kv_cache_capacity_bytes")


def _json(value: Any) -> Any:
    return to_json(value)


def host_offload(g2: s.HostOffload) -> dict[str, Any]:
    """The native engine's canonical form: a few defaults are omitted, as its normalizer does."""
    out: dict[str, Any] = _json(g2)
    default = _json(n.HostOffload())
    for key in HOST_OFFLOAD_OMITTED:
        if out[key] == default[key]:
            del out[key]
    if out["kv_layout_id"] is None:
        del out["kv_layout_id"]
    return out


def native_rank(role: s.Role) -> n.Rank:
    """The native rank of a Spec role (MTP speculation written as `aic_*`)."""
    fields = {name: getattr(role, name) for name in fields_of(n.RankCore)}
    spec = role.speculation
    if spec is not None and spec.kind == "mtp":
        fields |= {"aic_nextn": spec.num_speculative_tokens, "aic_mtp_seed": spec.seed,
                   "aic_nextn_accept_rates": ",".join(repr(float(r))
                                                      for r in spec.acceptance_rates)}
    return n.Rank(**fields | {"worker_type": role.name})


def rank(role: s.Role) -> dict[str, Any]:
    """The native rank descriptor of a role, every field the engine reads written explicitly."""
    out: dict[str, Any] = _json(native_rank(role))
    for key in RANK_OPTIONAL:
        if out[key] is None:
            del out[key]
    if "native_host_offload" in out:
        assert role.host_offload is not None
        out["native_host_offload"] = host_offload(role.host_offload)
    if out["timing_model"]["type"] != "fixed":
        out["timing_model"] = {"type": out["timing_model"]["type"]}
    if role.speculation is None or role.speculation.kind != "mtp":
        del out["aic_mtp_seed"]
    if not (role.backend == "sglang" or role.prefill_decode_interval):
        del out["prefill_decode_interval"]
    return out


def role(r: s.Role) -> dict[str, Any]:
    ngram = r.speculation if r.speculation is not None and r.speculation.kind != "mtp" else None
    out: dict[str, Any] = {name: getattr(r, name) for name in fields_of(n.RoleCore)}
    out = _json(n.Role(**out | {"speculation": ngram}))
    out["rank"] = rank(r)
    return out


def is_plain_aggregated(spec: s.Spec) -> bool:
    """The aggregated shape writes the role unnamed: `"engine": ROLE`."""
    return spec.mode == "aggregated" and [r.name for r in spec.roles] == ["aggregated"]


def topology(spec: s.Spec) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": spec.mode}
    for r in spec.roles:
        out[TOPOLOGY_KEY.get(r.name, r.name)] = {"initial_workers": r.workers}
    if spec.mode == "disaggregated":
        out["handoff_latency_ms"] = float(spec.handoff_latency_ms)
    return out


def placement(router: s.Router) -> dict[str, Any]:
    knobs: dict[str, Any] = _json(router.knobs)
    if router.policy == "kv_router":
        return {"provider": router.policy, "config": knobs}
    # Round robin ignores the knobs; ones set away from their defaults are kept so that every
    # entry point can warn about them (ROUTER-KV-ONLY).
    set_knobs = {k: v for k, v in knobs.items() if v != s.ROUTER_KNOB_DEFAULTS[k]}
    return {"provider": router.policy, "config": set_knobs or None}


def traffic(t: s.Traffic) -> dict[str, Any]:
    out: dict[str, Any] = _json(t)
    return out


def to_native(spec: s.Spec) -> dict[str, Any]:
    """The native JSON document of a Spec, as plain data."""
    if is_plain_aggregated(spec):
        engine: dict[str, Any] = role(spec.roles[0])
    else:
        engine = {r.name: role(r) for r in spec.roles}
    return {
        "spec": {
            "version": spec.version,
            "model": spec.model,
            "hardware": spec.hardware,
            "backend_version": spec.backend_version,
            "topology": topology(spec),
            "engine": engine,
            "adapters": {
                "placement": placement(spec.router),
                "scaling": {
                    "provider": spec.scaling.policy,
                    "config": None if spec.scaling.policy == "none" else spec.scaling.config,
                },
            },
            "max_sim_time_ms": None if spec.max_sim_time_ms is None
            else float(spec.max_sim_time_ms),
            "record_per_request": spec.record_per_request,
            "sla": None if spec.sla is None else _json(spec.sla),
            **({} if spec.telemetry is None else {"telemetry": _json(spec.telemetry)}),
        },
        "traffic": traffic(spec.traffic),
    }


# Characters written as \uXXXX besides the C0 controls json.dumps escapes: DEL, the C1 controls
# (U+009B is a CSI to a terminal), the line and paragraph separators (line ends to JavaScript and
# some editors) and the bidi controls that reorder what a terminal or a review shows. A fixed
# list, not the Unicode database's categories, so the bytes never change with Python's version.
_ACTIVE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def escape_active(text: str) -> str:
    """JSON text (json.dumps's, with ensure_ascii=False) with those characters as escapes."""
    return _ACTIVE.sub(_escaped, text)


def dumps(document: Any) -> str:
    """Canonical text: sorted keys, 2-space indent, `\\n`, one trailing newline, no NaN; every
    control character, line separator and bidi control written as a \\uXXXX escape."""
    text = json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
    return escape_active(text) + "\n"


def emit(spec: s.Spec) -> str:
    return dumps(to_native(spec))
