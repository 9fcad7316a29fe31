"""A refused value is unknown to the rules: no follow-on finding about the default that replaced
it, while findings independent of it are still reported."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import kvreplay
from kvreplay.api import matrix_rules
from kvreplay.compiler.documents import compile_text

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "g2-restore-mooncake.yaml"


def _rules(text: str, file: str, *overrides: str) -> list[str]:
    compiled = compile_text(text, file, overrides=overrides, rules=matrix_rules())
    return [d.rule for d in compiled.diagnostics]


def _native(**traffic: Any) -> str:
    native: dict[str, Any] = kvreplay.compile_config(EXAMPLE, matrix=False).native()
    native["traffic"].update(traffic)
    return json.dumps(native, indent=1)


@pytest.mark.parametrize("bogus", ["bogus", 7, None])
def test_bogus_native_source_type_is_one_finding(bogus: Any) -> None:
    """No TRAFFIC-SYNTHETIC-TIMESTAMPS or TRAFFIC-STOP (naming YAML keys) after the enum error."""
    assert _rules(_native(source_type=bogus), "spec.json") == ["SCHEMA-ENUM"]


@pytest.mark.parametrize(("override", "expected"), [
    ("traffic.source.type=bogus", ["SCHEMA-ENUM"]),
    ("traffic.source=5", ["SCHEMA-TYPE"]),
    ("engine.mode=777", ["SCHEMA-ENUM"]),
    ("engine.workers.aggregated.kv_cache.capacity={type: fixed, blocks: -1}", ["SCHEMA-RANGE"]),
])
def test_refused_yaml_values_have_no_follow_on(override: str, expected: list[str]) -> None:
    """The same in a YAML config, whatever the refused value feeds (source, mode, capacity)."""
    assert _rules(EXAMPLE.read_text(), str(EXAMPLE), override) == expected


def test_findings_independent_of_a_refused_value_are_kept() -> None:
    """A bad source type and G2 on SGLang in one config report both."""
    found = _rules(EXAMPLE.read_text(), str(EXAMPLE), "traffic.source.type=bogus",
                   "engine.backend=sglang")
    assert "SCHEMA-ENUM" in found and "G2-BACKEND" in found


def test_a_non_ascii_digit_key_is_a_key() -> None:
    """`"²"` is an unknown key, not a list index (it crashed path parsing)."""
    assert _rules('{"spec": {"²": null, "version": 1}}', "spec.json").count(
        "SCHEMA-UNKNOWN-KEY") == 1


def test_native_specs_are_told_native_keys() -> None:
    """A synthetic native spec without a stop count hears `traffic.stop_requests`, not YAML's
    `stop.requests`; the YAML config hears `traffic.stop.requests`."""
    native = compile_text(_native(source_type="synthetic", load_type="concurrency", concurrency=2,
                                  stop_requests=None), "spec.json", rules=matrix_rules())
    (stop,) = [d for d in native.diagnostics if d.rule == "TRAFFIC-STOP"]
    assert "`traffic.stop_requests`" in stop.message and "stop.requests" not in str(stop)
    config = compile_text(EXAMPLE.read_text(), str(EXAMPLE), rules=matrix_rules(), overrides=[
        "traffic={source: {type: synthetic}, load: {type: concurrency, concurrency: 2}}"])
    (stop,) = [d for d in config.diagnostics if d.rule == "TRAFFIC-STOP"]
    assert stop.message == "a `synthetic` source needs `traffic.stop.requests`"
