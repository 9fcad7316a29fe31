"""Terminal injection: escape sequences that inputs hold never reach the terminal raw. Every echo
point (lint text and github output, `compile --check`'s diff, `explain`, `compare`'s text table
and messages, the messages of `report`, `lint --select`, the outputs, `run` and `sweep`, an
internal error) shows them as the escapes of kvreplay.io.display (`\\x1b`, `\\x07`, `\\x9b`);
JSON on stdout (`compile`, best.json, `compare --format json`) as \\uXXXX escapes."""

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
    a report are shown escaped (in --format json, as \\uXXXX escapes of the same string); so
    is a report's name in a refusal."""
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
    ran = cli("compare", str(base), str(new), "--format", "json")
    assert ran.code == 0 and _clean(ran.out, ran.err)
    assert HOSTILE in {f["name"] for f in json.loads(ran.out)["figures"]}
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


def test_output_and_usage_messages_are_escaped(cli: Callable[..., Any], tmp_path: Path) -> None:
    """The messages of the outputs (emit's refusal), of `run` (a `--set` argument, the files
    its summary names) and of `sweep` (a results path that is a file, a file that is not a
    sweep), and the paths `lint --show-settings` names, show the input text they quote with
    its escapes."""
    folder = tmp_path / HOSTILE
    folder.mkdir()
    (tmp_path / "traces").symlink_to(REPO / "examples" / "traces")
    config = tmp_path / f"{HOSTILE}.yaml"
    shutil.copyfile(EXAMPLE, config)
    trace = REPO / "examples" / "traces" / "weka-g2-restore.jsonl"
    for args in (["trace", "convert", str(trace), "-o", str(folder)],
                 ["run", str(EXAMPLE), "--set", HOSTILE],
                 ["sweep", str(REPO / "examples" / "sweeps" / "g2-host-blocks.yaml"), "-o",
                  str(config)],
                 ["sweep", str(config), "-o", str(tmp_path / "out")]):
        ran = cli(*args)
        assert ran.code == 2, (args, ran.err)
        assert SHOWN in ran.err, (args, ran.err)
        assert _clean(ran.out, ran.err)
    ran = cli("lint", "--show-settings", str(config))
    assert ran.code == 0 and f"# settings for {tmp_path}/{SHOWN}.yaml" in ran.out
    assert _clean(ran.out, ran.err)
    ran = cli("run", str(config), "-o", str(folder / "r.json"), "--export",
              str(folder / "rows.csv"))
    assert ran.code == 0, ran.err
    assert f"report written to {tmp_path}/{SHOWN}/r.json" in ran.out
    assert ran.out.count(SHOWN) == 2 and _clean(ran.out, ran.err)


def test_a_replay_failure_and_an_internal_error_are_escaped(cli: Callable[..., Any],
                                                            monkeypatch: Any) -> None:
    """`replay failed: ...` (the engine's words may quote the input) and the internal-error
    line show the message with its escapes."""
    from kvreplay import replay
    from kvreplay.cli import cmd_explain

    def failed(compiled: Any, **_: Any) -> replay.RunOutcome:
        return replay.RunOutcome(None, (), error=f"cannot place {HOSTILE}")

    monkeypatch.setattr(replay, "replay", failed)
    ran = cli("run", str(EXAMPLE), "-q")
    assert ran.code == 1
    assert f"kvreplay: replay failed: cannot place {SHOWN}\n" in ran.err
    assert _clean(ran.out, ran.err)

    def broken(args: Any) -> int:
        raise RuntimeError(HOSTILE)

    monkeypatch.setattr(cmd_explain, "run", broken)
    ran = cli("explain", "YAML-SYNTAX")
    assert ran.code == 2
    assert ran.err == (f"kvreplay: internal error: RuntimeError: {SHOWN} (run with --debug for "
                       "the traceback)\n")


def test_json_outputs_write_active_characters_as_escapes() -> None:
    """best.json (and `sweep --format json`) and `compare --format json` quote settings and
    figure names from their inputs: control and bidi characters only as \\uXXXX escapes."""
    from kvreplay.sweep.best import best_text

    best = {"explanation": HOSTILE + ACTIVE, "point": {"engine.model": ACTIVE}}
    text = best_text(best)
    assert not any(ch in text for ch in RAW + tuple(ACTIVE)) and json.loads(text) == best
