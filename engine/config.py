"""Reading a native document for the engine: the Spec it replays (schema/spec.py), or an
EngineConfigError that names the first problem by its JSON pointer.

The document is checked against schema/native.schema.json (generated from the native model, so
its types, enums and bounds are the model's), read into the native model by the strict converter
(schema/convert.py: no coercion, no unknown keys), and checked for what the schema admits but
this engine does not run. A missing field takes the native engine's own default
(docs/native-json.md), as the reference normalizer does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cattrs.errors import BaseValidationError
from jsonschema.exceptions import best_match

from kvreplay.engine.errors import EngineConfigError
from kvreplay.schema import native_model as n
from kvreplay.schema.convert import native_converter
from kvreplay.schema.json_schemas import pointer, validator
from kvreplay.schema.spec import TOPOLOGY_KEY, Role, Spec, named_roles, spec_from_document

ROLES_OF_MODE = {"aggregated": ["aggregated"], "disaggregated": ["prefill", "decode"]}
HOST_SCOPES = ("dp_rank_local", "cluster_shared")


def read_engine_spec(document: Mapping[str, Any]) -> Spec:
    """The Spec of a native document; EngineConfigError for one the engine cannot run."""
    error = best_match(validator("native").iter_errors(document))
    if error is not None:
        raise EngineConfigError(f"{pointer(error.absolute_path)}: {error.message}")
    try:
        doc = native_converter().structure(document, n.Document)
    except BaseValidationError as exc:  # pragma: no cover - the schema admits only what reads
        raise EngineConfigError(f"unreadable native document: {exc}") from None
    spec = spec_from_document(doc)
    _check(doc, spec)
    return spec


def _check(doc: n.Document, spec: Spec) -> None:
    names = [name for name, _ in named_roles(doc.spec.engine)]
    expected = ROLES_OF_MODE[spec.mode]
    if names != expected:
        raise EngineConfigError(f"/spec/engine: topology kind {spec.mode!r} needs the roles "
                                f"{', '.join(expected)}; found {', '.join(names) or 'none'}")
    plain = isinstance(doc.spec.engine, n.Role)
    for (name, native), role in zip(named_roles(doc.spec.engine), spec.roles, strict=True):
        where = "/spec/engine" if plain else f"/spec/engine/{name}"
        if getattr(doc.spec.topology, TOPOLOGY_KEY[name]) is None:
            raise EngineConfigError(f"/spec/topology: no `{TOPOLOGY_KEY[name]}` pool for role "
                                    f"{name!r}")
        worker_type = native.rank.worker_type
        if worker_type is not None and worker_type != name:
            raise EngineConfigError(f"{where}/rank/worker_type: {worker_type!r} does not match "
                                    f"its role {name!r}")
        _check_host(role, f"{where}/rank/native_host_offload")


def _check_host(role: Role, where: str) -> None:
    host = role.host_offload
    if host is None:
        return
    if role.backend != "vllm":
        raise EngineConfigError(f"{where}: native_host_offload is supported only for "
                                "backend=vllm")
    if not role.enable_prefix_caching:
        raise EngineConfigError(f"{where}: native_host_offload requires "
                                "enable_prefix_caching=true")
    if role.host_block_bytes is None:
        raise EngineConfigError(f"{where}: native_host_offload requires kv_cache_bytes_per_token "
                                "to derive the physical host block size")
    if host.scope not in HOST_SCOPES:
        raise EngineConfigError(f"{where}/scope: unknown host_offload.scope {host.scope!r}; "
                                "expected 'dp_rank_local' or 'cluster_shared'")
    if host.scope == "cluster_shared" and not host.kv_layout_id:
        raise EngineConfigError(f"{where}: cluster_shared native_host_offload requires a "
                                "nonempty kv_layout_id")
