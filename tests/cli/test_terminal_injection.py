"""Terminal injection: escape sequences that inputs hold never reach the terminal raw. Every echo
point (lint text and github output, `compile --check`'s diff, `explain`, `compare`'s text table
and messages, the messages of `report`, `lint --select`, an internal error) shows them as the
escapes of kvreplay.io.display (`\\x1b`, `\\x07`, `\\x9b`)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "g2-restore-mooncake.yaml"
# SGR red, an OSC that sets the window title (ended by BEL), and the one-byte C1 CSI.
HOSTILE = "\x1b[31mred\x1b]0;pwned\x07\x9b2J"
SHOWN = "\\x1b[31mred\\x1b]0;pwned\\x07\\x9b2J"
RAW = ("\x1b", "\x07", "\x9b")


def _clean(*texts: str) -> bool:
    return not any(ch in text for text in texts for ch in RAW)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """The G2 example beside its trace, with a top-level key holding HOSTILE."""
    shutil.copytree(REPO / "examples" / "traces", tmp_path / "traces")
    text = EXAMPLE.read_text(encoding="utf-8")
    key = json.dumps(HOSTILE)  # a YAML double-quoted scalar takes JSON's escapes
    path = tmp_path / "c.yaml"
    path.write_text(text.replace("engine:\n", f"{key}: 1\nengine:\n", 1), encoding="utf-8")
    return path


@pytest.mark.parametrize("fmt", ["text", "concise", "github"])
def test_lint_shows_a_hostile_key_escaped(cli: Callable[..., Any], config: Path,
                                          fmt: str) -> None:
    """lint text, concise and github: the unknown key is named with its escapes, raw never."""
    ran = cli("lint", str(config), "--format", fmt, "--no-color")
    assert ran.code == 1
    assert SHOWN in ran.out and _clean(ran.out, ran.err)


def test_compile_check_diff_is_escaped(cli: Callable[..., Any], tmp_path: Path) -> None:
    """`compile --check OUT` where OUT holds escape sequences (and a CR): the diff shows them
    as escapes, on the lines they were on."""
    out = tmp_path / "spec.json"
    out.write_text(f'{{"x": 1}}\n{HOSTILE}\rtail\n', encoding="utf-8")
    ran = cli("compile", str(EXAMPLE), "--check", str(out))
    assert ran.code == 1
    assert f"-{SHOWN}\\rtail\n" in ran.out and _clean(ran.out, ran.err)


def test_explain_and_select_echo_the_rule_escaped(cli: Callable[..., Any]) -> None:
    """An unknown rule ID given to `explain` or `lint --select` is echoed with its escapes."""
    for args in (["explain", HOSTILE], ["lint", str(EXAMPLE), "--select", HOSTILE]):
        ran = cli(*args)
        assert ran.code == 2
        assert SHOWN in ran.err, ran.err
        assert _clean(ran.out, ran.err)


def test_compare_table_and_messages_are_escaped(cli: Callable[..., Any], tmp_path: Path) -> None:
    """compare's text table: a summary key, a text figure, a request id and the version from
    a report are shown escaped; so is a report's name in a refusal."""
    base = tmp_path / "base.json"
    assert cli("run", str(EXAMPLE), "-o", str(base), "-q").code == 0
    report = json.loads(base.read_text())
    report["summary"][HOSTILE] = 1.0
    report["summary"]["kv_eviction_policy"] = HOSTILE
    report["meta"]["kvreplay_version"] = HOSTILE
    report["per_request"][0]["request_id"] = HOSTILE
    new = tmp_path / "new.json"
    new.write_text(json.dumps(report), encoding="utf-8")
    ran = cli("compare", str(base), str(new))
    assert ran.code == 0, ran.err
    assert ran.out.count(SHOWN) >= 3 and _clean(ran.out, ran.err)
    ran = cli("compare", str(base), str(tmp_path / f"{HOSTILE}.json"))
    assert ran.code == 2 and SHOWN in ran.err and _clean(ran.out, ran.err)
    ran = cli("report", str(tmp_path / f"{HOSTILE}.json"))
    assert ran.code == 2 and SHOWN in ran.err and _clean(ran.out, ran.err)


# What the canonical emitter writes as \uXXXX beyond JSON's C0 escapes (docs/native-json.md):
# DEL, a C1 control (the CSI), the line and paragraph separators, bidi controls.
ACTIVE = "\x7f\x85\x9b\u2028\u2029\u061c\u200f\u202e\u2066\u2069"


def test_compile_writes_control_characters_as_escapes(cli: Callable[..., Any],
                                                      tmp_path: Path) -> None:
    """`kvreplay compile` of a config whose model name holds escape sequences, DEL, C1
    controls, U+2028/2029 and bidi controls prints each as a \\uXXXX escape, none raw; the JSON
    reads back the same string, and compiling the spec re-emits the same bytes."""
    shutil.copytree(REPO / "examples" / "traces", tmp_path / "traces")
    model = HOSTILE + ACTIVE + "é"
    config = tmp_path / "c.yaml"
    config.write_text(EXAMPLE.read_text(encoding="utf-8").replace(
        "model: synthetic-model", f"model: {json.dumps(model)}", 1), encoding="utf-8")
    ran = cli("compile", str(config))
    assert ran.code == 0, ran.err
    assert not any(ch in ran.out for ch in RAW + tuple(ACTIVE)), ran.out
    assert '"model": "\\u001b[31mred\\u001b]0;pwned\\u0007\\u009b2J\\u007f\\u0085\\u009b' \
           '\\u2028\\u2029\\u061c\\u200f\\u202e\\u2066\\u2069é"' in ran.out
    assert json.loads(ran.out)["spec"]["model"] == model
    spec = tmp_path / "spec.json"
    spec.write_text(ran.out, encoding="utf-8")
    again = cli("compile", str(spec))
    assert again.code == 0 and again.out == ran.out
