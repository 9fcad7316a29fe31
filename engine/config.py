"""What the engine runs: a Spec (schema/spec.py) that passes `check_spec`, read from a native
document by `read_engine_spec`, or given typed (api.run_spec). Problems raise EngineConfigError
naming the first one by its JSON pointer in the native document.

A document is checked against schema/native.schema.json (generated from the native model, so
its types, enums and bounds are the model's), read into the native model by the strict converter
(schema/convert.py: no coercion, no unknown keys), and checked for what only a document can
get wrong (a role without its topology pool, a rank naming another role). A missing field takes
the native engine's own default (docs/native-json.md), as the reference normalizer does.

`check_spec` states the engine's limits on a typed spec, the ones the native engine enforces
when it reads a rank or builds its pools: each is also a support-matrix rule (named beside it),
which reports it at lint time with the config's line and column.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvreplay.engine.errors import EngineConfigError
from kvreplay.schema import native_model as n
from kvreplay.schema.convert import native_converter
from kvreplay.schema.json_schemas import known_valid, pointer, validator
from kvreplay.schema.quick_structure import quick_structure
from kvreplay.schema.spec import TOPOLOGY_KEY, Role, Spec, named_roles, spec_from_document

ROLES_OF_MODE = {"aggregated": ["aggregated"], "disaggregated": ["prefill", "decode"]}
HOST_SCOPES = ("dp_rank_local", "cluster_shared")
# The terms every participant of a cluster_shared G2 pool must agree on (POOL-* rules).
POOL_CONTRACT = ("kv_layout_id", "tensor_parallel_size", "block_size", "block_bytes",
                 "num_host_blocks", "shared_d2h_bandwidth_gbps", "shared_h2d_bandwidth_gbps")


def read_engine_spec(document: Mapping[str, Any]) -> Spec:
    """The checked Spec of a native document; EngineConfigError for one the engine cannot run."""
    doc = _read(document)
    spec = spec_from_document(doc)
    _check_roles(spec)
    plain = isinstance(doc.spec.engine, n.Role)
    for name, native in named_roles(doc.spec.engine):
        where = "/spec/engine" if plain else f"/spec/engine/{name}"
        if getattr(doc.spec.topology, TOPOLOGY_KEY[name]) is None:
            raise EngineConfigError(f"/spec/topology: no `{TOPOLOGY_KEY[name]}` pool for role "
                                    f"{name!r}")
        worker_type = native.rank.worker_type
        if worker_type is not None and worker_type != name:
            raise EngineConfigError(f"{where}/rank/worker_type: {worker_type!r} does not match "
                                    f"its role {name!r}")
        if native.rank.aic_nextn_accept_rates is not None and native.rank.aic_nextn is None:
            raise EngineConfigError(f"{where}/rank/aic_nextn_accept_rates: "
                                    "aic_nextn_accept_rates requires aic_nextn")
    check_spec(spec, plain=plain)
    return spec


def read_spec(document: Mapping[str, Any]) -> Spec:
    """The Spec of a native document that reads, unchecked (its limits may still be broken)."""
    return spec_from_document(_read(document))


def _read(document: Mapping[str, Any]) -> n.Document:
    if not known_valid("native", document):
        from jsonschema.exceptions import best_match

        error = best_match(validator("native").iter_errors(document))
        if error is not None:
            raise EngineConfigError(f"{pointer(error.absolute_path)}: {error.message}")
    quick = quick_structure(document, n.Document, forbid_extra_keys=True, native=True)
    if quick is not None:  # the converter's value, without cattrs
        return quick
    from cattrs.errors import BaseValidationError

    try:
        return native_converter().structure(document, n.Document)
    except BaseValidationError as exc:  # pragma: no cover - the schema admits only what reads
        raise EngineConfigError(f"unreadable native document: {exc}") from None


def check_spec(spec: Spec, *, plain: bool | None = None) -> None:
    """EngineConfigError for the first limit of the engine the spec breaks. `plain`: whether the
    document writes its one aggregated role unnamed (the pointers' form; None: the canonical
    form's)."""
    _check_roles(spec)
    if plain is None:
        plain = [role.name for role in spec.roles] == ["aggregated"]
    for role in spec.roles:
        where = "/spec/engine" if plain else f"/spec/engine/{role.name}"
        _check_host(role, f"{where}/rank/native_host_offload")
        if role.backend == "sglang" and not role.enable_chunked_prefill:
            # BACKEND-SGLANG-CHUNKED-PREFILL (the reference's message)
            raise EngineConfigError(f"{where}/rank/enable_chunked_prefill: "
                                    "enable_chunked_prefill=false is not supported for "
                                    "backend=sglang")
        if role.prefill_schedule_interval != 1 and role.backend != "vllm":
            # BACKEND-PREFILL-SCHEDULE-INTERVAL (the reference's message)
            raise EngineConfigError(f"{where}/rank/prefill_schedule_interval: "
                                    "prefill_schedule_interval is supported only for "
                                    "backend=vllm; use prefill_decode_interval for "
                                    "backend=sglang")
        _check_speculation(role, f"{where}/rank")
        _check_g3(spec, role, f"{where}/rank/g3_offload")
    _check_shared_pool(spec)


def _check_roles(spec: Spec) -> None:
    names = [role.name for role in spec.roles]
    expected = ROLES_OF_MODE.get(spec.mode)
    if names != expected:
        raise EngineConfigError(f"/spec/engine: topology kind {spec.mode!r} needs the roles "
                                f"{', '.join(expected or [])}; found {', '.join(names) or 'none'}")


def _check_host(role: Role, where: str) -> None:
    host = role.host_offload
    if host is None:
        return
    if role.backend != "vllm":  # G2-BACKEND
        raise EngineConfigError(f"{where}: native_host_offload is supported only for "
                                "backend=vllm")
    if not role.enable_prefix_caching:  # G2-PREFIX-CACHING
        raise EngineConfigError(f"{where}: native_host_offload requires "
                                "enable_prefix_caching=true")
    if role.host_block_bytes is None:  # G2-BYTES
        raise EngineConfigError(f"{where}: native_host_offload requires kv_cache_bytes_per_token "
                                "to derive the physical host block size")
    if host.scope not in HOST_SCOPES:  # G2-SCOPE
        raise EngineConfigError(f"{where}/scope: unknown host_offload.scope {host.scope!r}; "
                                "expected 'dp_rank_local' or 'cluster_shared'")
    if host.scope == "cluster_shared" and not (host.kv_layout_id or "").strip():
        # NATIVE-LAYOUT-ID (blank is missing, as the native engine reads it)
        raise EngineConfigError(f"{where}: cluster_shared native_host_offload requires a "
                                "nonempty kv_layout_id")


def _check_speculation(role: Role, where: str) -> None:
    """The native engine's speculation limits (nextn 1-5 is the schema's): rates finite in
    [0, 1], no host offload on the same role (G2-SPECULATION)."""
    spec = role.speculation
    if spec is None:
        return
    key = "aic_nextn_accept_rates" if spec.kind == "mtp" else "acceptance_rates"
    for k, rate in enumerate(spec.acceptance_rates):
        if not 0.0 <= rate <= 1.0:  # NaN fails both
            raise EngineConfigError(f"{where}/{key}: {key}[{k}] must be finite and in [0, 1], "
                                    f"got {rate!r}")
    if role.host_offload is not None:
        raise EngineConfigError(f"{where}/native_host_offload: native_host_offload does not "
                                f"support speculation ({spec.kind}) on the same role "
                                "(the native engine: it does not support aic_nextn)")


def _check_g3(spec: Spec, role: Role, where: str) -> None:
    """What the native engine refuses of a G3 tier (its messages; G3-* rules at lint time)."""
    if role.g3_offload is None:
        return
    if role.host_offload is None:  # G3-REQUIRES-G2
        raise EngineConfigError(f"{where}: g3_offload requires native_host_offload")
    if spec.mode != "aggregated":  # G3-TOPOLOGY
        raise EngineConfigError(f"{where}: g3_offload is supported only for "
                                "worker_type=aggregated")
    if role.dp_size != 1:  # G3-DP
        raise EngineConfigError(f"{where}: g3_offload supports only dp_size=1")


def _check_shared_pool(spec: Spec) -> None:
    """Every cluster_shared role joins one pool: they must agree on its contract (POOL-*)."""
    contract: tuple[Any, ...] | None = None
    for role in spec.roles:
        host = role.host_offload
        if host is None or host.scope != "cluster_shared":
            continue
        terms = (host.kv_layout_id, role.tensor_parallel_size, role.block_size,
                 role.host_block_bytes, host.num_host_blocks, host.shared_d2h_bandwidth_gbps,
                 host.shared_h2d_bandwidth_gbps)
        if contract is None:
            contract = terms
        elif terms != contract:
            raise EngineConfigError(f"cluster_shared host_offload participants are "
                                    f"incompatible: role {role.name} has {_contract(terms)}, "
                                    f"the pool {_contract(contract)}")


def _contract(terms: tuple[Any, ...]) -> str:
    return "{" + ", ".join(f"{k}={v!r}" for k, v in zip(POOL_CONTRACT, terms, strict=True)) + "}"
