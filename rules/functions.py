"""Built-in functions of the rules language, and how values are shown in messages.

Every function is three-valued like the rest of the language: an unknown (None) input it needs
gives an unknown result, never a guess.
"""

from __future__ import annotations

import json as _json
import re
from collections.abc import Callable
from typing import Any

import attrs

from kvreplay.schema import spec as s
from kvreplay.schema.layout import derive_layout_id
from kvreplay.schema.origin import SpecPath


@attrs.frozen
class Builtin:
    name: str
    params: tuple[str, ...]  # kinds: "role", "str", "any", "field" (a field variable)
    result: str
    summary: str
    py: str | None  # the function in this module that generated rule code calls


def role_layout_id(role: s.Role) -> str | None:
    """derive_layout_id of a role, or unknown (None) while an input of it is unknown."""
    if None in (role.backend, role.block_size, role.kv_cache_bytes_per_token,
                role.tensor_parallel_size):
        return None
    return derive_layout_id(role.backend, role.block_size, role.kv_cache_bytes_per_token,
                            role.tensor_parallel_size, role.prefill_context_parallel_size,
                            role.decode_context_parallel_size)


# key(p) renders as a marker the runner replaces with the key as the checked document writes it
# (the Spec path goes through the entry point's Origin), so one rule text suits every source.
_KEY = "\x1f"
_KEY_PART = "\x1e"
_KEY_MARKS = re.compile(f"{_KEY}([^{_KEY}]*){_KEY}")


def key_ref(path: SpecPath) -> str:
    return _KEY + _KEY_PART.join(path) + _KEY


def resolve_keys(text: str, render: Callable[[SpecPath], str]) -> str:
    """Replace every key(p) marker in a message by render(p)."""
    if _KEY not in text:
        return text
    return _KEY_MARKS.sub(lambda m: render(tuple(m.group(1).split(_KEY_PART))), text)


def role_ranks(role: s.Role) -> int | None:
    """Attention-DP ranks the role simulates (workers x attention DP), unknown while either is."""
    if role.workers is None or role.dp_size is None:
        return None
    return role.workers * role.dp_size


def state_room(role: s.Role) -> int | None:
    """Bytes of a role's KV capacity left for one working state beside one token block (the
    reference's minimum for a state cache), unknown while the KV bytes per token are."""
    if role.kv_cache_bytes_per_token is None or role.num_gpu_blocks is None:
        return None
    return (role.num_gpu_blocks - 1) * role.block_size * role.kv_cache_bytes_per_token


def match_unit_divides(role: s.Role) -> bool | None:
    """The role's prefix_match_unit divides its block size (unknown while it is unset)."""
    unit = role.prefix_match_unit
    return None if unit is None else role.block_size % unit == 0


def duplicate_group_name(role: s.Role) -> str | None:
    """The first KV cache group name the role lists twice (None: none, or no groups)."""
    seen: set[str | None] = set()
    for group in role.kv_cache_groups or ():
        if group.name in seen:
            return group.name
        seen.add(group.name)
    return None


def windowless_convolution(role: s.Role) -> str | None:
    """The first convolution group of the role without a sliding window (None: none)."""
    return next((g.name for g in role.kv_cache_groups or ()
                 if g.kind == "convolution" and g.sliding_window is None), None)


def is_blank(text: str | None) -> bool | None:
    return None if text is None else text.strip() == ""


def to_json(value: Any) -> str | None:
    return None if value is None else _json.dumps(value, ensure_ascii=False)


BUILTINS: dict[str, Builtin] = {
    b.name: b
    for b in (
        Builtin("derived_layout_id", ("role",), "str",
                "the kv_layout_id kvreplay derives for a role (backend, block size, KV bytes per "
                "token, TP, explicit PCP/DCP); unknown while the bytes per token are unknown",
                "role_layout_id"),
        Builtin("ranks", ("role",), "num", "the ranks a role simulates: its workers x attention "
                "DP", "role_ranks"),
        Builtin("state_room", ("role",), "num", "the bytes of a role's KV capacity left for one "
                "request state beside one token block: (blocks - 1) x block size x KV bytes per "
                "token; unknown while the bytes per token are unknown", "state_room"),
        Builtin("match_unit_divides", ("role",), "bool", "the role's prefix_match_unit divides "
                "its block size", "match_unit_divides"),
        Builtin("duplicate_group_name", ("role",), "str", "the first KV cache group name the "
                "role lists twice; null when every name is unique", "duplicate_group_name"),
        Builtin("windowless_convolution", ("role",), "str", "the first convolution KV cache "
                "group of the role without a sliding_window; null when there is none",
                "windowless_convolution"),
        Builtin("blank", ("str",), "bool", "the text is empty or only spaces", "is_blank"),
        Builtin("json", ("any",), "str", "the value written as JSON (for hints to paste)",
                "to_json"),
        # name(f) and key(p) are compiled specially: they read the field's name or path.
        Builtin("name", ("field",), "str", "the name of the field a field variable is bound to",
                None),
        Builtin("key", ("path",), "str", "the field's key as the checked document writes it "
                "(`traffic.stop.requests` in YAML, `traffic.stop_requests` in native JSON)",
                None),
    )
}


def show(value: Any) -> str:
    """A value as messages print it: YAML-ish scalars, `unknown` for None, role names."""
    if value is None:
        return "unknown"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, s.Role):
        return value.name
    if isinstance(value, tuple | list):
        return _json.dumps(list(value), ensure_ascii=False)
    return str(value)


AGENTIC_KEYS = ("agentic_lanes", "agentic_snapshot_seed", "agentic_warmup", "agentic_profile")


def agentic_source(traffic: s.Traffic) -> SpecPath:
    """The traffic field that makes a workload agentic (for spans on `traffic.agentic`)."""
    if traffic.trace_format in s.AGENTIC_FORMATS:
        return ("traffic", "trace_format")
    for key in AGENTIC_KEYS:
        value = getattr(traffic, key)
        if value is not None and value is not False:
            return ("traffic", key)
    return ("traffic", "trace_format")
