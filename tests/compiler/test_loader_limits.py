"""Loader limits: huge integers, YAML 1.1 numbers and alias bombs are located findings."""

from __future__ import annotations

import pytest

from kvreplay.compiler import yaml_loader
from kvreplay.compiler.json_loader import load_json
from kvreplay.compiler.yaml_loader import MAX_EXPANDED_NODES, load_yaml

HUGE = "9" * 5000  # beyond Python's 4,300-digit limit on int <-> str conversion


def _found(loaded: object) -> list[tuple[str, int | None, int | None]]:
    return [(d.rule, d.span.line, d.span.column)
            for d in loaded.diagnostics]  # type: ignore[attr-defined]


@pytest.mark.parametrize("number", [HUGE, "-" + HUGE, "1" + "0" * 309, "0x" + "f" * 300])
def test_yaml_integer_beyond_float_range_is_non_finite(number: str) -> None:
    """A YAML integer no float can hold is YAML-NON-FINITE at the value, abridged."""
    loaded = load_yaml(f"engine:\n  seed: {number}\n", "c.yaml")
    assert _found(loaded) == [("YAML-NON-FINITE", 2, 9)]
    assert loaded.data == {"engine": {"seed": None}}
    assert len(loaded.diagnostics[0].message) < 120


def test_yaml_integer_at_the_edge_of_float_range_is_kept() -> None:
    """2**1024 - 1 is still a number (the schema's bounds judge it)."""
    loaded = load_yaml(f"seed: {2**1024 - 1}\n", "c.yaml")
    assert loaded.diagnostics == () and loaded.data == {"seed": 2**1024 - 1}


@pytest.mark.parametrize("number", [HUGE, "-" + HUGE, "1" + "0" * 309])
def test_json_integer_beyond_float_range_is_non_finite(number: str) -> None:
    """A JSON integer no float can hold is JSON-NON-FINITE at the value."""
    loaded = load_json('{"spec": {"seed": ' + number + "}}", "s.json")
    assert _found(loaded) == [("JSON-NON-FINITE", 1, 19)]
    assert "characters)" in loaded.diagnostics[0].message


def test_yaml_1_1_base_60_numbers_are_non_json() -> None:
    """`%YAML 1.1` sexagesimal numbers are refused with a quoting hint, not a crash."""
    loaded = load_yaml("%YAML 1.1\n---\n{a: 190:20:30, b: 190:20:30.15}\n", "c.yaml")
    assert [d.rule for d in loaded.diagnostics] == ["YAML-NON-JSON", "YAML-NON-JSON"]
    assert loaded.diagnostics[0].hint == 'quote it if a string is meant: "190:20:30"'


def test_many_plain_keys_and_long_lists_are_no_alias_bomb(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The alias cap counts nodes aliases add, not the document's own keys or list items (the
    cap scaled down 500 times: 1,000 keys stand for 100k, 1,200 items for 60k)."""
    monkeypatch.setattr(yaml_loader, "MAX_EXPANDED_NODES", 100)
    keys = "".join(f"k{i}: {i}\n" for i in range(1_000))
    assert load_yaml(keys, "c.yaml").diagnostics == ()
    items = "a: [" + ", ".join(["1"] * 1_200) + "]\n"
    assert load_yaml(items, "c.yaml").diagnostics == ()


def test_alias_expansion_is_still_capped() -> None:
    """Aliases that add more than the cap of nodes are YAML-ALIAS, even in a small file."""
    width = 400
    text = "a: &a [" + ", ".join(["1"] * width) + "]\nb: [" + ", ".join(
        ["*a"] * (MAX_EXPANDED_NODES // width + 1)) + "]\n"
    assert [d.rule for d in load_yaml(text, "c.yaml").diagnostics] == ["YAML-ALIAS"]
    below = "a: &a [" + ", ".join(["1"] * width) + "]\nb: [" + ", ".join(
        ["*a"] * (MAX_EXPANDED_NODES // width - 1)) + "]\n"
    assert load_yaml(below, "c.yaml").diagnostics == ()
