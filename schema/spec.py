"""The normalized Spec: one model that YAML, the Python API and native JSON all lower into, and
that the rules and the engine read.

It is the native document (schema/native_model.py) seen per role: a Role is a native role and
its rank at once (RoleCore + RankCore fields, native names, `host_offload` for
`native_host_offload`) with its name and worker count; MTP speculation is folded into
`speculation`; the router is the placement's policy with its knobs. `spec_from_document` builds it
from a native document; the emitter (compiler/emit.py) writes it back. A field is None where the
source left it unknown (auto estimates, or a document with errors).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from kvreplay.schema import native_model as n
from kvreplay.schema.native_defaults import (
    RANK_DEFAULTS,
    TRAFFIC_DEFAULTS,
    block_size_default,
    load_type_default,
)
from kvreplay.schema.native_model import AGENTIC_FORMATS as AGENTIC_FORMATS
from kvreplay.schema.native_model import ROUTER_KNOB_DEFAULTS as ROUTER_KNOB_DEFAULTS
from kvreplay.schema.native_model import AgenticProfile as AgenticProfile
from kvreplay.schema.native_model import G3Offload as G3Offload
from kvreplay.schema.native_model import HostOffload as HostOffload
from kvreplay.schema.native_model import HostOffloadOptions as HostOffloadOptions
from kvreplay.schema.native_model import Router as Router
from kvreplay.schema.native_model import SglangOptions as SglangOptions
from kvreplay.schema.native_model import Speculation as Speculation
from kvreplay.schema.native_model import Timing as Timing
from kvreplay.schema.native_model import Traffic as Traffic
from kvreplay.schema.native_model import TrtllmOptions as TrtllmOptions
from kvreplay.schema.scaling import KVREPLAY_POLICIES, ScalingOptions, ScheduleStep
from kvreplay.schema.sla import Sla as Sla  # the one Sla class (re-exported)
from kvreplay.schema.telemetry import Telemetry as Telemetry

ROLE_ORDER = ("aggregated", "prefill", "decode")
# Topology key of each role (the aggregated pool is called `workers`).
TOPOLOGY_KEY = {"aggregated": "workers", "prefill": "prefill", "decode": "decode"}
DEFAULT_TRAFFIC = Traffic(**TRAFFIC_DEFAULTS)


@attrs.frozen(slots=False)
class Role(n.RankCore, n.RoleCore):
    """One worker role: how many workers, their parallelism and the native rank settings."""

    name: str = attrs.field(kw_only=True)
    workers: int = 1
    # Resolved in the Spec (the native document may leave them to the backend or the rank).
    block_size: int = block_size_default(RANK_DEFAULTS["backend"])
    num_gpu_blocks_is_explicit: bool = False

    @property
    def host_block_bytes(self) -> int | None:
        """Bytes of one G2 block: a GPU block of this role (None while the KV size is unknown)."""
        if self.kv_cache_bytes_per_token is None:
            return None
        return self.block_size * self.kv_cache_bytes_per_token


@attrs.frozen
class Scaling:
    policy: str = "none"
    config: Any = attrs.field(default=None, eq=False, hash=False)
    config_json: str | None = None  # canonical text of config, for equality and hashing
    # A kvreplay policy's options (schema/scaling.py), None for none/planner or a config that
    # does not read (the native reader reports it; the engine refuses it).
    options: ScalingOptions | None = attrs.field(default=None, eq=False, hash=False)

    @property
    def steps_increasing(self) -> bool:
        """The schedule's steps come in strictly increasing `at_seconds` (rules read it)."""
        times = [step.at_seconds for step in self._steps()]
        return all(a is not None and b is not None and a < b for a, b in itertools.pairwise(times))

    @property
    def names_aggregated(self) -> bool:
        """A schedule step sets `aggregated` replicas (rules read it)."""
        return any(step.aggregated is not None for step in self._steps())

    @property
    def names_split(self) -> bool:
        """A schedule step sets `prefill` or `decode` replicas (rules read it)."""
        return any(step.prefill is not None or step.decode is not None for step in self._steps())

    def _steps(self) -> tuple[ScheduleStep, ...]:
        """The schedule's steps (none while a document with errors leaves them unknown)."""
        steps = self.options.schedule if self.options is not None else None
        return tuple(step for step in steps or () if isinstance(step, ScheduleStep))


def scaling_from_config(policy: str, config: Any) -> Scaling:
    """The Spec's Scaling of a policy and its native config (options read leniently: a value
    that does not read leaves them None, for the reader to report)."""
    if policy == "none":
        return Scaling()
    config = config if config is not None else {}
    options = None
    if policy in KVREPLAY_POLICIES and isinstance(config, Mapping):
        from kvreplay.schema.convert import structure_native

        try:
            options = structure_native(dict(config), ScalingOptions)
        except Exception:  # cattrs' error group: the native reader reports it with a pointer
            options = None
    return Scaling(policy, config, canonical_json(config), options)


@attrs.frozen
class Spec:
    """A whole deployment and its traffic, normalized."""

    model: str | None
    roles: tuple[Role, ...]
    mode: Literal["aggregated", "disaggregated"] | str = "aggregated"
    hardware: str | None = None
    backend_version: str | None = None
    handoff_latency_ms: float = 0.0
    router: Router = Router()
    scaling: Scaling = Scaling()
    max_sim_time_ms: float | None = None
    record_per_request: bool = True
    sla: Sla | None = None
    telemetry: Telemetry | None = None
    traffic: Traffic = DEFAULT_TRAFFIC
    version: int = 1

    def role(self, name: str) -> Role | None:
        return next((r for r in self.roles if r.name == name), None)


def canonical_json(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def named_roles(engine: n.Role | n.Roles) -> list[tuple[str, n.Role]]:
    """The document's roles in canonical order; an unnamed role is the aggregated one."""
    if isinstance(engine, n.Role):
        return [("aggregated", engine)]
    return [(name, role) for name in ROLE_ORDER if (role := getattr(engine, name)) is not None]


def _speculation(role: n.Role) -> Speculation | None:
    """The role's speculation, or MTP as the rank writes it natively (`aic_*`)."""
    rank = role.rank
    if role.speculation is not None or rank.aic_nextn is None:
        return role.speculation
    text = rank.aic_nextn_accept_rates
    rates = tuple(float(x) for x in text.split(",")) if text else ()
    return Speculation("mtp", rank.aic_nextn, rates, rank.aic_mtp_seed)


def role_from_native(name: str, role: n.Role, workers: int,
                     num_gpu_blocks_is_explicit: bool = False) -> Role:
    """The Spec role of a native role (`num_gpu_blocks_is_explicit` where the role omits it)."""
    rank = role.rank
    fields = {f.name: getattr(rank, f.name) for f in attrs.fields(n.RankCore)}
    fields |= {f.name: getattr(role, f.name) for f in attrs.fields(n.RoleCore)}
    explicit = role.num_gpu_blocks_is_explicit
    return Role(**fields | {
        "name": name,
        "workers": workers,
        "worker_type": name,
        "block_size": rank.block_size or block_size_default(rank.backend),
        "num_gpu_blocks_is_explicit": num_gpu_blocks_is_explicit if explicit is None else explicit,
        "speculation": _speculation(role),
        "sglang": rank.sglang or (SglangOptions() if rank.backend == "sglang" else None),
        "trtllm": rank.trtllm or (TrtllmOptions() if rank.backend == "trtllm" else None),
    })


def traffic_from_native(traffic: Traffic | None) -> Traffic:
    if traffic is None:
        return DEFAULT_TRAFFIC
    if traffic.load_type is not None:
        return traffic
    return attrs.evolve(traffic, load_type=load_type_default(traffic.source_type))


def spec_from_document(doc: n.Document,
                       num_gpu_blocks_given: Mapping[str, bool] | None = None) -> Spec:
    """The Spec of a native document. `num_gpu_blocks_given`: per role name, whether its rank
    states num_gpu_blocks (what `num_gpu_blocks_is_explicit` means when the role omits it)."""
    spec = doc.spec
    given = num_gpu_blocks_given or {}
    roles = []
    for name, role in named_roles(spec.engine):
        pool = getattr(spec.topology, TOPOLOGY_KEY[name])
        workers = 1 if pool is None else pool.initial_workers
        roles.append(role_from_native(name, role, workers, given.get(name, False)))
    adapter = spec.adapters.scaling
    scaling = scaling_from_config(adapter.provider, adapter.config)
    return Spec(
        model=spec.model,
        roles=tuple(roles),
        mode=spec.topology.kind,
        hardware=spec.hardware,
        backend_version=spec.backend_version,
        handoff_latency_ms=spec.topology.handoff_latency_ms,
        router=spec.adapters.placement.router,
        scaling=scaling,
        max_sim_time_ms=spec.max_sim_time_ms,
        record_per_request=spec.record_per_request,
        sla=spec.sla,
        telemetry=spec.telemetry,
        traffic=traffic_from_native(doc.traffic),
        version=spec.version,
    )
