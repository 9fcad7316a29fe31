"""Loader limits: huge integers, YAML 1.1 numbers and alias bombs are located findings."""

from __future__ import annotations

import tracemalloc

import pytest

from kvreplay.compiler import json_loader, reading, yaml_errors, yaml_loader
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


@pytest.fixture
def small_bound(monkeypatch: pytest.MonkeyPatch) -> int:
    """MAX_CONFIG_VALUES scaled down 200 times (1,000 values stand for 200,000)."""
    for module in (reading, yaml_errors, json_loader):
        monkeypatch.setattr(module, "MAX_CONFIG_VALUES", 1_000)
    return 1_000


@pytest.mark.parametrize("style", ["flow", "block", "json"])
def test_values_past_the_bound_are_file_too_large(small_bound: int, style: str) -> None:
    """A document of exactly MAX_CONFIG_VALUES values loads; one more is FILE-TOO-LARGE at the
    value past the bound (mapping keys do not count: root + list + items)."""
    def text(items: int) -> str:
        if style == "flow":
            return "a: [" + ", ".join(["1"] * items) + "]\n"
        if style == "block":
            return "a:\n" + "".join(f"  - {i}\n" for i in range(items))
        return '{"a": [' + ", ".join(["1"] * items) + "]}\n"

    load = load_json if style == "json" else load_yaml
    assert load(text(small_bound - 2), "c").diagnostics == ()
    refused = load(text(small_bound - 1), "c")
    assert refused.data is None
    (d,) = refused.diagnostics
    line, column = {"flow": (1, 5 + 3 * (small_bound - 2)), "block": (small_bound, 5),
                    "json": (1, 8 + 3 * (small_bound - 2))}[style]
    assert (d.rule, d.span.line, d.span.column, d.message) == (
        "FILE-TOO-LARGE", line, column, "the document holds more than 1,000 values, the limit "
        "for configs, specs and sweep files")


def test_a_huge_flow_list_is_refused_before_it_is_composed(small_bound: int) -> None:
    """A flow list of 300,000 items is refused in memory about its text's size: the values are
    counted from the parser's events and nothing is composed (a composed node costs about a
    kilobyte, some 300 times the text here)."""
    text = "a: [" + ", ".join(["1"] * 300_000) + "]\n"
    tracemalloc.start()
    try:
        loaded = load_yaml(text, "c.yaml")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [d.rule for d in loaded.diagnostics] == ["FILE-TOO-LARGE"]
    assert peak < 4 * len(text) + 1_000_000, peak


def test_a_config_with_few_indicators_is_not_scanned(monkeypatch: pytest.MonkeyPatch) -> None:
    """The event scan is skipped for a short text with at most MAX_DEPTH collection indicators
    (configs, `--set` values), and run once either bound could be passed."""
    scans: list[bool] = []
    real = yaml_errors._scan
    monkeypatch.setattr(yaml_errors, "_scan", lambda text, pure: scans.append(pure) or real(
        text, pure))
    assert load_yaml("engine:\n  model: m\n", "c.yaml").diagnostics == ()
    assert scans == []
    assert load_yaml("a: [" + ", ".join(["[1]"] * 200) + "]\n", "c.yaml").diagnostics == ()
    assert scans == [False]
