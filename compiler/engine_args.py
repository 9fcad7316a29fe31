"""The Python entry point: per-role native engine args (flat or nested) -> a native document.

Flat form: rank fields and role fields side by side, `{"block_size": 4, ..., "dp_size": 2}`.
Nested form: `{"rank": {...}, "dp_size": 2}` (the reference normalizer's own `{"engine": {...}}`
is accepted too). Both forms get a derived kv_layout_id for cluster_shared when none is given;
an explicit one is kept. (The reference toolchain derived it only for the flat form, so nested
shared G2 passed validation and failed at execution; here both forms go through one function.)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from kvreplay.compiler.emit import TOPOLOGY_KEY, dumps
from kvreplay.compiler.native import ROLE_LEVEL
from kvreplay.compiler.pipeline import Compiled, RuleRunner, compile_native_loaded
from kvreplay.compiler.source import Loaded, Path, SourceMap, format_path
from kvreplay.schema.diagnostics import Diagnostic, Span
from kvreplay.schema.layout import derive_layout_id
from kvreplay.schema.native_defaults import block_size_default

ARG_NAMES = {"aggregated": "engine_args", "prefill": "prefill_engine_args",
             "decode": "decode_engine_args"}
WORKER_ARGS = {"workers": "num_workers", "prefill": "num_prefill_workers",
               "decode": "num_decode_workers"}


@attrs.frozen
class RoleArgs:
    name: str
    role: dict[str, Any]  # the native ROLE object
    container: str | None  # "rank" / "engine" for the nested form, None for flat


def split_role_args(name: str, args: Mapping[str, Any]) -> RoleArgs:
    """Normalize flat or nested engine args into a native ROLE, deriving kv_layout_id if absent."""
    containers = [k for k in ("rank", "engine") if k in args]
    if containers:
        container = containers[0]
        rank = dict(args[container]) if isinstance(args[container], Mapping) else args[container]
        role = {k: v for k, v in args.items() if k not in containers}
    else:
        container = None
        rank = {k: v for k, v in args.items() if k not in ROLE_LEVEL}
        role = {k: v for k, v in args.items() if k in ROLE_LEVEL}
    if isinstance(rank, dict):
        rank.setdefault("worker_type", name)
        _derive_layout(rank, role)
    role["rank"] = rank
    return RoleArgs(name, role, container)


def _derive_layout(rank: dict[str, Any], role: Mapping[str, Any]) -> None:
    g2 = rank.get("native_host_offload")
    if not isinstance(g2, Mapping) or g2.get("scope") != "cluster_shared":
        return
    if g2.get("kv_layout_id") is not None:
        return
    backend = rank.get("backend", "vllm")
    g2 = dict(g2)
    g2["kv_layout_id"] = derive_layout_id(
        backend,
        rank.get("block_size", block_size_default(backend)),
        rank.get("kv_cache_bytes_per_token"),
        role.get("tensor_parallel_size", 1),
        role.get("prefill_context_parallel_size"),
        role.get("decode_context_parallel_size"),
    )
    rank["native_host_offload"] = g2


class PythonSourceMap(SourceMap):
    """Spans for the Python API: no lines, paths named after the caller's arguments."""

    def __init__(self, roles: Mapping[str, RoleArgs], plain: bool) -> None:
        super().__init__(file="<python>", style="jsonpath")
        self.roles = roles
        self.plain = plain

    def span(self, path: Path, *, key: bool = False) -> Span:
        return Span(file=self.file, path=format_path(self.rewrite(path)))

    def rewrite(self, path: Path) -> Path:
        if path[:2] == ("spec", "engine"):
            rest = path[2:]
            name = "aggregated" if self.plain else (str(rest[0]) if rest else "aggregated")
            if not self.plain:
                rest = rest[1:]
            role = self.roles.get(name)
            arg = ARG_NAMES.get(name, name)
            if rest[:1] == ("rank",) and role is not None:
                return (arg,) + ((role.container,) if role.container else ()) + rest[1:]
            return (arg,) + rest
        if path[:2] == ("spec", "topology") and len(path) >= 3:
            return (WORKER_ARGS.get(str(path[2]), str(path[2])),)
        if path[:4] == ("spec", "adapters", "placement", "provider"):
            return ("router_mode",)
        if path[:4] == ("spec", "adapters", "placement", "config"):
            return ("router_config",) + path[4:]
        if path[:1] == ("spec",):
            return path[1:]
        return path


def plain_data(value: Any) -> Any:
    """JSON-shaped copy of caller data (tuples become lists); raises TypeError on other objects."""
    return json.loads(json.dumps(value, allow_nan=False))


def compile_engine_args(
    role_args: Mapping[str, Mapping[str, Any] | None],
    workers: Mapping[str, int],
    *,
    model: str | None,
    router_mode: str,
    router_config: Mapping[str, Any] | None,
    traffic: Mapping[str, Any] | None,
    handoff_latency_ms: float,
    planner_config: Mapping[str, Any] | None,
    max_sim_time_ms: float | None,
    scaling: Mapping[str, Any] | None = None,
    sla: tuple[float | None, float | None, float | None],
    rules: RuleRunner | None,
) -> Compiled:
    """`kvreplay.spec_from_engine_args`: role name -> engine args (None: role absent) and role
    name -> worker count become a native document, compiled like native JSON."""
    roles = {name: split_role_args(name, args) for name, args in role_args.items()
             if args is not None}
    plain = list(roles) == ["aggregated"]
    mode = "aggregated" if "aggregated" in roles or not roles else "disaggregated"
    topology: dict[str, Any] = {"kind": mode}
    for name in roles:
        topology[TOPOLOGY_KEY[name]] = {"initial_workers": workers[name]}
    if mode == "disaggregated":
        topology["handoff_latency_ms"] = handoff_latency_ms
    document = {
        "spec": {
            "version": 1,
            "model": model,
            "topology": topology,
            "engine": roles["aggregated"].role if plain else {n: r.role for n, r in roles.items()},
            "adapters": {
                "placement": {"provider": router_mode,
                              "config": dict(router_config) if router_config else None},
                "scaling": _scaling_adapter(planner_config, scaling),
            },
            "max_sim_time_ms": max_sim_time_ms,
            "sla": None if sla == (None, None, None)
            else {"ttft_ms": sla[0], "itl_ms": sla[1], "e2e_ms": sla[2]},
        },
        **({"traffic": dict(traffic)} if traffic is not None else {}),
    }
    source = PythonSourceMap(roles, plain)
    try:
        data = plain_data(document)
    except (TypeError, ValueError) as exc:
        return Compiled("<python>", "python", None, None, (Diagnostic(
            "MODEL-INVALID", "error", f"engine args are not JSON-shaped data: {exc}",
            Span(file="<python>")),))
    loaded = Loaded(data, source, dumps(data))
    return compile_native_loaded(loaded, rules, kind="python")


def _scaling_adapter(planner_config: Mapping[str, Any] | None,
                     scaling: Mapping[str, Any] | None) -> dict[str, Any]:
    """The native scaling adapter: the planner hook's settings, or a kvreplay policy given as
    {"provider": ..., "config": {...}} (both at once: the native schema reports the extra key)."""
    if scaling is not None:
        out = dict(scaling)
        if planner_config is not None:
            out["planner_config"] = dict(planner_config)  # refused by the schema, with its path
        return out
    if planner_config is not None:
        return {"provider": "planner", "config": dict(planner_config)}
    return {"provider": "none", "config": None}
