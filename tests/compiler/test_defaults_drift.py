"""Defaults cannot drift: the config schema against the attrs model, the native defaults against
the native schema and the reference normalizer.

(That the committed schema files equal a fresh generation is tests/docs/test_docs_fresh.py.)
"""

from __future__ import annotations

import json
import os
import types
import typing
from pathlib import Path
from typing import Any

import attrs
import pytest
from kvreplay.compiler import model as m
from kvreplay.compiler import spec as s
from kvreplay.engine import config as engine_config

from kvreplay.native_defaults import (
    BACKEND_BLOCK_SIZE,
    HOST_OFFLOAD_DEFAULTS,
    RANK_DEFAULTS,
    block_size_default,
)

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schema"
BACKENDS = tuple(BACKEND_BLOCK_SIZE)
NO_DEFAULT = "<no default>"


def _schema(name: str) -> dict[str, Any]:
    return json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))


def _attrs_class(tp: Any) -> type | None:
    """The attrs class of a field type (`X` or `X | None`), if any."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        found = [a for a in typing.get_args(tp) if isinstance(a, type) and attrs.has(a)]
        return found[0] if len(found) == 1 else None
    return tp if isinstance(tp, type) and attrs.has(tp) else None


def _required(node: dict[str, Any]) -> set[str]:
    """Keys the schema requires, always or under a condition (allOf if/then overlays)."""
    keys = set(node.get("required", ()))
    for overlay in node.get("allOf", ()):
        keys.update(overlay.get("then", {}).get("required", ()))
    return keys


def _same(a: Any, b: Any) -> bool:
    """Equal, and of the same JSON kind (True is not 1; 1 and 1.0 are one number)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _walk_config(node: dict[str, Any], cls: type, path: tuple[str, ...],
                 out: list[tuple[str, Any, Any]]) -> int:
    """Compare every optional key's schema default with the model's; return how many compared."""
    attrs.resolve_types(cls, globalns=vars(m))
    fields = {f.name: f for f in attrs.fields(cls)}
    properties = node.get("properties", {})
    assert set(properties) == set(fields), (".".join(path), set(properties) ^ set(fields))
    required = _required(node)
    compared = 0
    for name, field in fields.items():
        prop = properties[name]
        sub = _attrs_class(field.type)
        if sub is not None and "properties" in prop:
            compared += _walk_config(prop, sub, path + (name,), out)
            continue
        if name in required:
            # A required key has no default; the model's is a placeholder for documents with
            # errors, which compile refuses.
            assert "default" not in prop, ".".join(path + (name,))
            continue
        model_default = m.applied_default(cls, name)
        if isinstance(model_default, attrs.Factory):  # type: ignore[arg-type]
            model_default = model_default.factory()
        if model_default is None or model_default == ():
            model_default = NO_DEFAULT if "default" not in prop or prop["default"] is not None \
                else None
        schema_default = prop.get("default", NO_DEFAULT)
        compared += 1
        if not _same(schema_default, model_default):
            out.append((".".join(path + (name,)), schema_default, model_default))
    return compared


def test_every_config_schema_default_is_the_models() -> None:
    """Walking schema/config.schema.json and the attrs model together, every default agrees."""
    wrong: list[tuple[str, Any, Any]] = []
    compared = _walk_config(_schema("config"), m.Config, (), wrong)
    assert not wrong, "\n".join(f"{p}: schema {a!r}, model {b!r}" for p, a, b in wrong)
    assert compared > 100


def test_the_default_traffic_is_the_models_defaults() -> None:
    """Without `traffic`: the Source and Load defaults, with load type concurrency."""
    t = m.DEFAULT_TRAFFIC
    assert t.source == m.Source() and t.load == attrs.evolve(m.Load(), type="concurrency")
    assert t.load.concurrency == 10 and t.stop.requests == 100


# --- native defaults ------------------------------------------------------------------------

def _native_props(*path: str) -> dict[str, Any]:
    node: Any = _schema("native")
    for key in path:
        node = node[key]
    if "anyOf" in node:
        node = next(a for a in node["anyOf"] if "properties" in a)
    return dict(node["properties"])


def _defaults_of(props: dict[str, Any]) -> dict[str, Any]:
    return {k: v["default"] for k, v in props.items() if "default" in v}


RANK = ("$defs", "role", "properties", "rank")
ROLE = ("$defs", "role")


def test_native_schema_rank_defaults_are_native_defaults() -> None:
    """Every rank default the native schema states is RANK_DEFAULTS' (and the engine's)."""
    stated = _defaults_of(_native_props(*RANK))
    for key, value in stated.items():
        if key in RANK_DEFAULTS:
            assert _same(value, RANK_DEFAULTS[key]), key
    assert stated["worker_type"] == "aggregated"
    assert _same(stated["aic_mtp_seed"], s.Speculation().seed)


def test_native_schema_nested_defaults_are_the_specs() -> None:
    """G2, G3, sglang and trtllm blocks: the native schema, native_defaults and the Spec agree."""
    rank = _native_props(*RANK)
    host = _defaults_of(_native_props(*RANK, "properties", "native_host_offload"))
    assert host == {k: v for k, v in HOST_OFFLOAD_DEFAULTS.items() if v is not None}
    spec_host = attrs.asdict(s.HostOffload())
    assert all(_same(spec_host[k], v) for k, v in HOST_OFFLOAD_DEFAULTS.items())
    g3 = _defaults_of(_native_props(*RANK, "properties", "g3_offload"))
    assert all(_same(attrs.asdict(s.G3Offload())[k], v) for k, v in g3.items())
    assert set(g3) == {k for k, v in attrs.asdict(s.G3Offload()).items() if v is not None}
    for block, cls in (("sglang", s.SglangOptions), ("trtllm", s.TrtllmOptions)):
        stated = _defaults_of(_native_props(*RANK, "properties", block))
        assert stated == attrs.asdict(cls()), block
    assert "timing_model" in rank


def test_native_router_defaults_agree_everywhere() -> None:
    """Router knobs: native schema = Spec (ROUTER_KNOB_DEFAULTS) = engine = config model."""
    config = _native_props("properties", "spec", "properties", "adapters", "properties",
                           "placement", "properties", "config")
    stated = _defaults_of(config)
    spec_knobs = {k: v for k, v in s.ROUTER_KNOB_DEFAULTS.items() if v is not None}
    assert stated == spec_knobs
    engine = engine_config.RouterConfig(policy="round_robin")
    model = m.Router()
    for key, value in s.ROUTER_KNOB_DEFAULTS.items():
        assert _same(getattr(engine, key), value), key
        assert _same(getattr(model, key), value), key


def test_spec_role_rank_defaults_are_native_defaults() -> None:
    """A Role's rank fields default to what the native engine does with the field left out."""
    role = s.Role(name="aggregated")
    for key, value in RANK_DEFAULTS.items():
        if key == "timing_model":
            assert attrs.asdict(role.timing_model)["type"] == value["type"]
        else:
            assert _same(getattr(role, key), value), key
    assert role.block_size == block_size_default(role.backend)


# --- the reference normalizer -------------------------------------------------------------

def _normalize(engine: dict[str, Any]) -> dict[str, Any]:
    os.environ.setdefault("DYN_LOG", "error")
    core = pytest.importorskip("dynamo._core")
    result: dict[str, Any] = core._normalize_mocker_config({"engine": engine})
    return result


@pytest.mark.reference
@pytest.mark.parametrize("backend", BACKENDS)
def test_rank_defaults_are_the_reference_normalizers(backend: str) -> None:
    """A bare rank, normalized by the reference: every default kvreplay assumes is its value."""
    normalized = _normalize({"backend": backend})
    rank = normalized["engine"]
    for key, value in RANK_DEFAULTS.items():
        if key == "backend":
            continue
        assert _same(rank.get(key, None), value), (backend, key, rank.get(key, "<absent>"))
    assert rank["block_size"] == block_size_default(backend)
    assert rank["sglang"] == attrs.asdict(s.SglangOptions())
    assert rank["trtllm"] == attrs.asdict(s.TrtllmOptions())
    assert rank["aic_mtp_seed"] == s.Speculation().seed
    assert rank["worker_type"] == "aggregated"
    role = s.Role(name="aggregated")
    assert normalized["dp_size"] == role.dp_size
    assert normalized["tensor_parallel_size"] == role.tensor_parallel_size
    assert normalized["num_gpu_blocks_is_explicit"] is role.num_gpu_blocks_is_explicit


@pytest.mark.reference
def test_offload_defaults_are_the_reference_normalizers() -> None:
    """G2 and G3 blocks with only their required keys: the defaults it echoes are ours."""
    rank = _normalize({"backend": "vllm", "kv_cache_bytes_per_token": 100,
                       "native_host_offload": {"num_host_blocks": 8},
                       "g3_offload": {"scope": "worker_local", "num_g3_blocks": 8}})["engine"]
    host = rank["native_host_offload"]
    echoed = {k: v for k, v in host.items() if k != "num_host_blocks"}
    assert echoed and all(_same(HOST_OFFLOAD_DEFAULTS[k], v) for k, v in echoed.items())
    g3 = rank["g3_offload"]
    spec_g3 = attrs.asdict(s.G3Offload())
    echoed = {k: v for k, v in g3.items() if k not in ("scope", "num_g3_blocks")}
    assert echoed and all(_same(spec_g3[k], v) for k, v in echoed.items())


def test_one_sla_class() -> None:
    """The config model, the Spec and the report share one Sla class."""
    from kvreplay.engine import report

    assert m.Sla is s.Sla is report.Sla
