"""Is this YAML or JSON file a kvreplay config or native spec? Decided from its first bytes
only (no parse): a `yaml-language-server` schema comment naming kvreplay's schema, or the
top-level keys of a config (`engine`), of a native spec (`spec`, and nothing a spec lacks) or of
a sweep file (`kind: sweep`, and nothing a sweep lacks).
"""

from __future__ import annotations

import re

from kvreplay.schema.files import open_regular

SNIFF_BYTES = 64 * 1024
# The top-level keys of compiler/model.Config and of the native schema (a test keeps them equal).
CONFIG_KEYS = frozenset({"engine", "traffic", "router", "scaling", "evaluation", "report"})
NATIVE_KEYS = frozenset({"spec", "traffic"})
SWEEP_KEYS = frozenset({"kind", "base", "traces", "grid", "points", "sla", "objective"})

_SWEEP_KIND = re.compile(r"""^kind[ \t]*:[ \t]*(["']?)sweep\1[ \t]*(?:#.*)?$""", re.M)
_SCHEMA_COMMENT = re.compile(r"^\s*#\s*yaml-language-server:\s*\$schema=(\S+)", re.M)
_YAML_KEY = re.compile(r"""^(["']?)([A-Za-z_$][\w$.-]*)\1[ \t]*:(?:[ \t]|$)""", re.M)
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:]')


def recognize(path: str) -> str | None:
    """Why `path` is ours ("schema comment", "config keys", "native keys", "sweep keys"), or
    None.

    Raises OSError when the file cannot be read (the caller decides: lint reports it)."""
    with open_regular(path) as fh:
        head = fh.read(SNIFF_BYTES)
    if b"\0" in head:
        return None
    return recognize_text(head.decode("utf-8", errors="replace"))


def recognize_text(head: str) -> str | None:
    for match in _SCHEMA_COMMENT.finditer(head):
        if "kvreplay" in match.group(1).lower():
            return "schema comment"
    keys = json_keys(head) if head.lstrip("\ufeff \t\r\n").startswith("{") else yaml_keys(head)
    if "engine" in keys:
        return "config keys"
    if "spec" in keys and keys <= NATIVE_KEYS:
        return "native keys"
    if "kind" in keys and keys <= SWEEP_KEYS and _SWEEP_KIND.search(head):
        return "sweep keys"
    return None


def yaml_keys(head: str) -> set[str]:
    """Keys of block mappings at column 0 (every document of the stream)."""
    return {m.group(2) for m in _YAML_KEY.finditer(head)}


def json_keys(head: str) -> set[str]:
    """Keys of the top-level JSON object seen in `head` (strings skipped whole)."""
    keys: set[str] = set()
    depth = 0
    pending: str | None = None
    for match in _JSON_TOKEN.finditer(head):
        token = match.group()
        if token == ":" and pending is not None:
            keys.add(pending)
        pending = None
        if token in "{[":
            depth += 1
        elif token in "}]":
            depth -= 1
        elif token.startswith('"') and depth == 1:
            pending = token[1:-1]
    return keys
