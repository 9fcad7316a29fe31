"""Each Spec field is lowered from one declared config key, and a finding about it points there
(compiler/lower.py's tables and their inverse, yaml_path)."""

from __future__ import annotations

import typing
from types import NoneType, UnionType
from typing import Any

import attrs
import pytest

from kvreplay.compiler import lower as lw
from kvreplay.compiler import model as m
from kvreplay.compiler.documents import compile_text
from kvreplay.schema import spec as s

ROLES = ("aggregated", "prefill", "decode")
SOURCES = ("trace", "synthetic", "synthetic-session")
# Spec fields derived from other values, which no config key writes.
DERIVED = {("host_offload", "kv_layout_id"), ("scaling", "config_json")}


def _attrs_class(annotation: Any) -> type | None:
    """The attrs class a field holds (X, X | None), or None for a value."""
    options = typing.get_args(annotation) if isinstance(annotation, UnionType) or \
        typing.get_origin(annotation) is typing.Union else (annotation,)
    found = [o for o in options if o is not NoneType and isinstance(o, type) and attrs.has(o)]
    return found[0] if found else None


def _fields(cls: type) -> dict[str, Any]:
    attrs.resolve_types(cls)
    return {f.name: f.type for f in attrs.fields(cls)}


def _is_key(cls: type, path: tuple[str | int, ...]) -> bool:
    """Whether `path` names a key of the config model under `cls` (() is the block itself)."""
    for i, key in enumerate(path):
        fields = _fields(cls)
        if key not in fields:
            return False
        inner = _attrs_class(fields[key])
        if inner is None:
            return i == len(path) - 1
        cls = inner
    return True


TABLES = [("SPEC", lw.SPEC, m.Config), ("ROLE", lw.ROLE, m.Worker),
          ("ROLE_ENGINE", lw.ROLE_ENGINE, m.Engine), ("TRAFFIC", lw.TRAFFIC, m.Traffic),
          *((f"TRAFFIC_BY_SOURCE[{k}]", t, m.Traffic) for k, t in lw.TRAFFIC_BY_SOURCE.items())]


def test_every_spec_field_is_lowered_once() -> None:
    """The Spec, a role and the traffic: each field has exactly one entry (the traffic's per
    source type at most), and every entry is a field."""
    assert set(lw.SPEC) | lw.NOT_FROM_CONFIG == set(_fields(s.Spec))
    assert not set(lw.SPEC) & lw.NOT_FROM_CONFIG
    assert set(lw.ROLE) | set(lw.ROLE_ENGINE) == set(_fields(s.Role))
    assert not set(lw.ROLE) & set(lw.ROLE_ENGINE)
    by_source = set().union(*lw.TRAFFIC_BY_SOURCE.values())
    assert set(lw.TRAFFIC) | by_source == set(_fields(s.Traffic))
    assert not set(lw.TRAFFIC) & by_source
    assert set(lw.TRAFFIC_BY_SOURCE) == set(typing.get_args(_fields(m.Source)["type"]))


@pytest.mark.parametrize(("table", "entries", "block"), TABLES, ids=[t[0] for t in TABLES])
def test_every_lowering_reads_a_config_key(table: str, entries: dict[str, lw.From[Any]],
                                           block: type) -> None:
    """Each entry's path (and its alternative) is a key of the config model under its block."""
    wrong = {name: entry.path for name, entry in entries.items() if not _is_key(block, entry.path)
             or (entry.or_else is not None and not _is_key(block, entry.or_else))}
    assert not wrong


def _spec_paths(cls: type, at: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Every field path of a Spec class, nested blocks' fields included."""
    out = []
    for name, annotation in _fields(cls).items():
        inner = _attrs_class(annotation)
        out.append(at + (name,))
        if inner is not None:
            out += [p for p in _spec_paths(inner, at + (name,)) if p[-2:] not in DERIVED]
    return out


def _reachable() -> list[tuple[tuple[str, ...], str]]:
    paths: list[tuple[str, ...]] = []
    for name, annotation in _fields(s.Spec).items():
        if name in ("roles", "traffic") or name in lw.NOT_FROM_CONFIG:
            continue
        inner = _attrs_class(annotation)
        paths.append((name,))
        if inner is not None:
            paths += [p for p in _spec_paths(inner, (name,)) if p[-2:] not in DERIVED]
    paths += [("roles", role) for role in ROLES]
    paths += [("roles", role) + p for role in ROLES for p in _spec_paths(s.Role, ())
              if p[-2:] not in DERIVED]
    traffic = [("traffic",) + p for p in _spec_paths(s.Traffic, ())]
    return [(p, "synthetic") for p in paths] + [(p, k) for k in SOURCES for p in traffic]


def test_every_spec_field_points_at_a_config_key() -> None:
    """Every Spec field a config sets resolves to a key of the config model (none to an
    invented key, which would place a finding where the user wrote nothing), for each source
    type."""
    wrong = {(p, kind): lw.yaml_path(p, kind) for p, kind in _reachable()
             if not _is_key(m.Config, lw.yaml_path(p, kind))}
    assert not wrong


SESSION = """\
engine:
  model: m
  workers:
    aggregated: {}
traffic:
  source:
    type: synthetic-session
    new_input_tokens_per_turn: 512
    output_tokens_per_turn: 64
    session: {turns: 3}
  load: {type: poisson, sessions_per_second: 2.0}
  stop: {sessions: 10}
"""


@pytest.mark.parametrize(("field", "line", "column"), [
    ("input_tokens", 8, 32),           # new_input_tokens_per_turn, not source.input_tokens
    ("output_tokens", 9, 29),          # output_tokens_per_turn
    ("turns_per_session", 10, 22),
    ("request_rate", 11, 46),          # sessions_per_second, the key the config writes
    ("shared_prefix_ratio", 10, 14),   # under `session`, which leaves it out
])
def test_a_session_source_places_its_fields_at_its_own_keys(field: str, line: int,
                                                            column: int) -> None:
    """A synthetic-session source's token counts come from its per-turn keys: a finding about
    them points there."""
    compiled = compile_text(SESSION, "session.yaml")
    assert compiled.spec is not None and compiled.origin is not None
    span = compiled.origin.span(("traffic", field))
    assert (span.line, span.column) == (line, column), span


def test_lowering_reads_the_session_keys() -> None:
    """The values those spans point at are the ones lowering put into the Spec."""
    spec = compile_text(SESSION, "session.yaml").spec
    assert spec is not None
    traffic = spec.traffic
    assert (traffic.input_tokens, traffic.output_tokens, traffic.turns_per_session,
            traffic.request_rate) == (512, 64, 3, 2.0)
