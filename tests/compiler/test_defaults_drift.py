"""Defaults cannot drift: both committed schemas against the attrs models they come from, the
native model against the native defaults module, the Spec and, where it is installed, the
reference normalizer; the committed schema files against a fresh generation.
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
from kvreplay.compiler import schema_gen
from kvreplay.compiler.documents import compile_text
from kvreplay.schema import native_defaults as d
from kvreplay.schema import native_model as n
from kvreplay.schema import spec as s
from kvreplay.schema.json_schemas import validator
from kvreplay.schema.schema_facts import APPLIED_DEFAULT, json_key

REPO = Path(__file__).resolve().parents[2]
SCHEMA_DIR = REPO / "schema"
BACKENDS = tuple(d.BACKEND_BLOCK_SIZE)
NO_DEFAULT = "<no default>"


def _schema(name: str) -> dict[str, Any]:
    return json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))


def _attrs_classes(tp: Any) -> list[type]:
    """The attrs classes of a field type (`X`, `X | None` or `X | Y`)."""
    members = typing.get_args(tp) if typing.get_origin(tp) in (
        typing.Union, types.UnionType) else (tp,)
    return [a for a in members if isinstance(a, type) and attrs.has(a)]


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


def _plain(value: Any) -> Any:
    """A nested block as native JSON writes it (unset keys left out)."""
    if not attrs.has(type(value)):
        return value
    return {k: v for k, v in attrs.asdict(value).items() if v is not None}


def _documented(cls: type, name: str) -> Any:
    """A field's documented default (APPLIED_DEFAULT, else its default)."""
    field = getattr(attrs.fields(cls), name)
    default = field.metadata.get(APPLIED_DEFAULT, field.default)
    return default.factory() if isinstance(default, attrs.Factory) else default  # type: ignore[arg-type]


class _Walk:
    """Walks a schema and its model together, comparing every optional key's default."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.wrong: list[tuple[str, Any, Any]] = []
        self.compared = 0

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        """The object node behind a $ref or a nullable wrapper."""
        if "$ref" in node:
            return self.resolve(self.root["$defs"][node["$ref"].rsplit("/", 1)[1]])
        if "anyOf" in node and "properties" not in node:
            objects = [b for b in node["anyOf"] if "$ref" in b or "properties" in b]
            if len(objects) == 1:
                return self.resolve(objects[0])
        return node

    def walk(self, node: dict[str, Any], cls: type, path: tuple[str, ...]) -> None:
        attrs.resolve_types(cls)
        fields = {json_key(f): f for f in attrs.fields(cls)}
        properties = node.get("properties", {})
        assert set(properties) == set(fields), (".".join(path), set(properties) ^ set(fields))
        required = _required(node)
        for key, field in fields.items():
            prop = properties[key]
            subs = _attrs_classes(field.type)
            if len(subs) == 2:  # a switch: then / else
                self.walk(self.resolve(prop["then"]), subs[0], path + (key,))
                self.walk(self.resolve(prop["else"]), subs[1], path + (key,))
                continue
            if subs:
                self.walk(self.resolve(prop), subs[0], path + (key,))
                continue
            if key in required:
                # A required key has no default; the model's is a placeholder for documents
                # with errors, which are refused.
                assert "default" not in prop, ".".join(path + (key,))
                continue
            model_default = _documented(cls, field.name)
            if model_default is None or model_default == ():
                model_default = NO_DEFAULT if "default" not in prop or prop["default"] is not None \
                    else None
            schema_default = prop.get("default", NO_DEFAULT)
            self.compared += 1
            if not _same(schema_default, model_default):
                self.wrong.append((".".join(path + (key,)), schema_default, model_default))


@pytest.mark.parametrize(("name", "root", "at_least"), [
    ("config", m.Config, 100), ("native", n.Document, 100)])
def test_every_schema_default_is_the_models(name: str, root: type, at_least: int) -> None:
    """Walking a committed schema and its attrs model together, every default agrees."""
    walk = _Walk(_schema(name))
    walk.walk(walk.root, root, ())
    assert not walk.wrong, "\n".join(f"{p}: schema {a!r}, model {b!r}" for p, a, b in walk.wrong)
    assert walk.compared > at_least


@pytest.mark.parametrize(("name", "generate"), [
    ("config", schema_gen.config_schema), ("native", schema_gen.native_schema)])
def test_the_committed_schema_is_a_fresh_generation(name: str, generate: Any) -> None:
    """schema/<name>.schema.json is the walker's output for the model, byte for byte."""
    fresh = json.dumps(generate(), indent=2, ensure_ascii=False) + "\n"
    assert (SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8") == fresh


def test_the_default_traffic_is_the_models_defaults() -> None:
    """Without `traffic`: the Source and Load defaults, with load type concurrency; the native
    document without traffic means the same."""
    t = m.DEFAULT_TRAFFIC
    assert t.source == m.Source() and t.load == attrs.evolve(m.Load(), type="concurrency")
    assert (t.source.input_tokens, t.source.output_tokens, t.load.concurrency,
            t.stop.requests) == (1024, 128, 10, 100)
    native = s.DEFAULT_TRAFFIC
    assert (native.input_tokens, native.output_tokens, native.cached_prefix_tokens,
            native.load_type, native.concurrency, native.stop_requests) == (
        t.source.input_tokens, t.source.output_tokens, t.source.cached_prefix_tokens,
        t.load.type, t.load.concurrency, t.stop.requests)


# --- the native model against the defaults module and the Spec -----------------------------

@pytest.mark.parametrize(("cls", "defaults"), [
    (n.RankCore, d.RANK_DEFAULTS), (n.HostOffload, d.HOST_OFFLOAD_DEFAULTS),
    (n.G3Offload, d.G3_OFFLOAD_DEFAULTS), (n.RouterKnobs, d.ROUTER_DEFAULTS),
    (n.SglangOptions, d.SGLANG_DEFAULTS), (n.TrtllmOptions, d.TRTLLM_DEFAULTS)],
    ids=lambda v: getattr(v, "__name__", ""))
def test_native_fields_take_the_defaults_modules_values(cls: type,
                                                        defaults: dict[str, Any]) -> None:
    """Every entry of a defaults table is a field of its class, with that default."""
    instance = cls()
    for key, value in defaults.items():
        assert hasattr(instance, key), (cls.__name__, key)
        got = _plain(getattr(instance, key))
        assert _same(got, value), (cls.__name__, key, got, value)


def test_spec_roles_default_to_the_native_rank_and_role() -> None:
    """A Spec Role is a native role and rank at once: the same defaults, block size resolved."""
    role = s.Role(name="aggregated")
    rank, native_role = n.Rank(), n.Role()
    for field in (*attrs.fields(n.RankCore), *attrs.fields(n.RoleCore)):
        if field.name not in ("block_size", "num_gpu_blocks_is_explicit"):
            assert _same(getattr(role, field.name), getattr(
                rank if hasattr(rank, field.name) else native_role, field.name)), field.name
    assert role.block_size == d.block_size_default(role.backend)
    assert role.num_gpu_blocks_is_explicit is False


def test_one_router_and_one_sla_class() -> None:
    """The config model, the Spec (which the engine reads) and the report share one router and
    one Sla class; the router's knobs default to ROUTER_DEFAULTS."""
    from kvreplay.engine import report

    assert m.Router is s.Router is n.Router
    assert m.Sla is s.Sla is report.Sla
    assert s.ROUTER_KNOB_DEFAULTS == d.ROUTER_DEFAULTS


@pytest.mark.parametrize("text", [
    "engine: {model: m, workers: {aggregated: {}}}\nevaluation: {sla: {ttft_ms: 100}}\n",
    "engine: {model: m, workers: {aggregated: {}}}\n"
    "traffic: {stop: {requests: 5, max_virtual_time_seconds: 1.0e+15}}\n",
], ids=["partial-sla", "largest-time-cap"])
def test_canonical_output_satisfies_the_native_schema(text: str) -> None:
    """What compile writes is valid native JSON (a partial SLA writes null bounds; the largest
    time cap in seconds fits in milliseconds)."""
    compiled = compile_text(text, "cfg.yaml")
    assert compiled.ok, compiled.diagnostics
    errors = [e.message for e in validator("native").iter_errors(compiled.native())]
    assert not errors


def test_every_example_compiles_to_valid_native_json() -> None:
    """Each bundled example's canonical output validates against the native schema."""
    examples = sorted((REPO / "examples").glob("*.yaml"))
    assert examples
    for path in examples:
        compiled = compile_text(path.read_text(encoding="utf-8"), str(path))
        assert compiled.ok, (path, compiled.diagnostics)
        assert not list(validator("native").iter_errors(compiled.native())), path


# --- the reference normalizer -------------------------------------------------------------

def _normalize(engine: dict[str, Any]) -> dict[str, Any]:
    os.environ.setdefault("DYN_LOG", "error")
    core = pytest.importorskip("dynamo._core")
    result: dict[str, Any] = core._normalize_mocker_config({"engine": engine})
    return result




@pytest.mark.reference
@pytest.mark.parametrize("backend", BACKENDS)
def test_native_field_defaults_are_the_reference_normalizers(backend: str) -> None:
    """A bare rank, normalized by the reference: every rank and role field the native model
    defaults has that value there (an unset one is null or absent); the block size is the
    backend's."""
    normalized = _normalize({"backend": backend})
    rank = normalized["engine"]
    for field in attrs.fields(n.Rank):
        key = json_key(field)
        if key in ("backend", "block_size"):
            continue
        expected = _plain(_documented(n.Rank, field.name))
        if key in ("sglang", "trtllm"):  # filled in by the normalizer on every backend
            expected = attrs.asdict({"sglang": n.SglangOptions, "trtllm": n.TrtllmOptions}[key]())
        assert _same(rank.get(key), expected), (backend, key, rank.get(key, "<absent>"))
    assert rank["block_size"] == d.block_size_default(backend)
    for field in attrs.fields(n.RoleCore):
        if field.name in normalized:
            default = _documented(n.Role, field.name)
            assert _same(normalized[field.name], False if default is None else default), field


@pytest.mark.reference
def test_offload_defaults_are_the_reference_normalizers() -> None:
    """G2 and G3 blocks with only their required keys: the defaults it echoes are the model's."""
    rank = _normalize({"backend": "vllm", "kv_cache_bytes_per_token": 100,
                       "native_host_offload": {"num_host_blocks": 8},
                       "g3_offload": {"scope": "worker_local", "num_g3_blocks": 8}})["engine"]
    for key, cls, given in (("native_host_offload", n.HostOffload, {"num_host_blocks"}),
                            ("g3_offload", n.G3Offload, {"scope", "num_g3_blocks"})):
        echoed = {k: v for k, v in rank[key].items() if k not in given}
        model = attrs.asdict(cls())
        assert echoed and all(_same(model[k], v) for k, v in echoed.items()), key
