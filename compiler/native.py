"""Native JSON -> Spec: the reader shared by native specs and the Python engine-args API.

The document is read into the native model (schema/native_model.py) by its converter, so a
missing field takes the native engine's own default (for example `kv_transfer_timing_mode` is
`full_prompt` natively) and a hand-written spec means what the native engine would do; this module
adds what only the compiler needs: the Origin of every Spec field and the shape findings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kvreplay.compiler.origin import SourceOrigin
from kvreplay.compiler.source import Path, SourceMap
from kvreplay.schema import native_model as n
from kvreplay.schema import spec as s
from kvreplay.schema.convert import structure_native
from kvreplay.schema.diagnostics import Diagnostic
from kvreplay.schema.frozen import field_facts, fields_of
from kvreplay.schema.origin import SpecPath
from kvreplay.schema.scaling import KVREPLAY_POLICIES, POLICY_KEYS, ScalingOptions
from kvreplay.schema.schema_facts import KEY
from kvreplay.schema.spec import TOPOLOGY_KEY

# The keys a native role states itself (the rest of a Spec role is its rank's).
ROLE_LEVEL = fields_of(n.RoleCore)
RANK_KEYS = {name: metadata.get(KEY, name) for name, _, _, _, metadata in field_facts(n.RankCore)}


def roles_of(engine: Mapping[str, Any]) -> tuple[bool, list[tuple[str, Mapping[str, Any]]]]:
    """(plain, [(role name, ROLE)]): `plain` when the engine is one unnamed aggregated ROLE."""
    if "rank" in engine:
        return True, [("aggregated", engine)]
    return False, [(r, engine[r]) for r in s.ROLE_ORDER if isinstance(engine.get(r), Mapping)]


def native_path(spec_path: SpecPath, plain: bool) -> Path:
    """The JSON path in a native document that a Spec field comes from."""
    head, rest = spec_path[0], spec_path[1:]
    if head == "roles" and rest:
        name = rest[0]
        base: Path = ("spec", "engine") if plain else ("spec", "engine", name)
        if len(rest) == 1:
            return base
        field, tail = rest[1], rest[2:]
        if field == "workers":
            return ("spec", "topology", TOPOLOGY_KEY.get(name, name), "initial_workers")
        if field in ROLE_LEVEL:
            return base + (field,) + tail
        return base + ("rank", RANK_KEYS.get(field, field)) + tail
    if head == "traffic":
        return ("traffic",) + rest
    if head == "router":
        if not rest or rest[0] == "policy":
            return ("spec", "adapters", "placement", "provider")
        return ("spec", "adapters", "placement", "config") + rest
    if head == "scaling" and rest[:1] == ("options",):  # a kvreplay policy's options
        return ("spec", "adapters", "scaling", "config") + rest[1:]
    if head == "scaling" and rest == ("policy",):
        return ("spec", "adapters", "scaling", "provider")
    mapping: dict[str, Path] = {
        "mode": ("spec", "topology", "kind"),
        "handoff_latency_ms": ("spec", "topology", "handoff_latency_ms"),
        "scaling": ("spec", "adapters", "scaling"),
    }
    if head in mapping:
        return mapping[head] + rest
    return ("spec", head) + rest


def spec_from_native(data: Mapping[str, Any], source: SourceMap | None,
                     file: str | None = None) -> tuple[s.Spec, SourceOrigin, list[Diagnostic]]:
    """Build the Spec of a (schema-valid, pruned) native document, its origin and shape findings."""
    doc = data.get("spec") or {}
    engine = doc.get("engine") or {}
    topology = doc.get("topology") or {}
    plain, named = roles_of(engine)
    origin = SourceOrigin(source, lambda p: native_path(p, plain), file=file)
    diagnostics: list[Diagnostic] = []

    def shape(message: str, at: SpecPath, hint: str | None = None) -> None:
        diagnostics.append(Diagnostic("NATIVE-SHAPE", "error", message, origin.span(at),
                                      hint=hint))

    for name, role in named:
        if not isinstance(topology.get(TOPOLOGY_KEY[name]), Mapping):
            shape(f"topology has no `{TOPOLOGY_KEY[name]}` pool for role `{name}`",
                  ("mode",), hint=f"add \"{TOPOLOGY_KEY[name]}\": {{\"initial_workers\": 1}}")
        worker_type = (role.get("rank") or {}).get("worker_type", "aggregated" if plain else None)
        if worker_type is not None and worker_type != name:
            shape(f"rank worker_type `{worker_type}` does not match its role `{name}`",
                  ("roles", name, "worker_type"), hint=f"set worker_type to `{name}`")
    for key in ("workers", "prefill", "decode"):
        role_name = {"workers": "aggregated"}.get(key, key)
        if key in topology and role_name not in [r for r, _ in named]:
            shape(f"topology pool `{key}` has no role `{role_name}` in `engine`", ("mode",))
    _scaling_config(doc, shape)
    document = structure_native(data, n.Document, strict=False)
    given = {name: "num_gpu_blocks" in (role.get("rank") or {}) for name, role in named}
    return s.spec_from_document(document, given), origin, diagnostics


def _scaling_config(doc: Mapping[str, Any], shape: Callable[[str, SpecPath, str | None], None]
                    ) -> None:
    """A kvreplay policy's config takes that policy's keys (schema/scaling.py), each of its
    type: what the schema's free-form mapping cannot say."""
    scaling = (doc.get("adapters") or {}).get("scaling") or {}
    policy = scaling.get("provider")
    config = scaling.get("config")
    if policy not in KVREPLAY_POLICIES:
        return
    if not isinstance(config, Mapping):
        shape(f"scaling policy `{policy}` needs its options in `config` (a mapping)",
              ("scaling", "policy"), None)
        return
    for key in config:
        if key not in POLICY_KEYS[policy]:
            shape(f"`{key}` is not an option of scaling policy `{policy}`",
                  ("scaling", "options", str(key)),
                  f"its options: {', '.join(POLICY_KEYS[policy])}")
    try:
        structure_native({k: v for k, v in config.items() if k in POLICY_KEYS[policy]},
                         ScalingOptions)
    except Exception as exc:  # cattrs' error group: its first leaf says what is wrong
        shape(f"scaling policy `{policy}`: {_first_problem(exc)}", ("scaling", "policy"), None)


def _first_problem(exc: BaseException) -> str:
    inner = getattr(exc, "exceptions", None)
    while inner:
        exc = inner[0]
        inner = getattr(exc, "exceptions", None)
    return str(exc)
