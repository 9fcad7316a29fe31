"""Documents nested tens of thousands of levels deep: ruamel's C composer recursed until the
process died (exit -11), tomllib and the report reader raised RecursionError. Each is a located
diagnostic now. The YAML cases run as real subprocesses, so that a regression fails the test
instead of killing the test run."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kvreplay.compiler.yaml_errors import MAX_DEPTH

REPO = Path(__file__).resolve().parents[2]
GOOD = (REPO / "examples" / "kv-router-mooncake.yaml").read_text()
DEEP = 40_000  # the C composer ran out of an 8 MB stack between 25,000 and 30,000 levels


def _nested(n: int = DEEP) -> str:
    return "[" * n + "]" * n


def _deep_error(message: str) -> dict[str, Any]:
    return {"rule": "YAML-SYNTAX", "message": message}


def test_deep_yaml_in_a_folder_is_located_not_a_crash(cli_process: Callable[..., Any],
                                                      tmp_path: Path) -> None:
    """A config, a sweep file and a native spec nested 40,000 levels deep, linted as a folder:
    one finding each at the first value inside more than 200 collections (the enclosing
    mappings and lists count), exit 1, no crash."""
    (tmp_path / "base.yaml").write_text(GOOD)
    (tmp_path / "config.yaml").write_text("engine: " + _nested() + "\n")
    (tmp_path / "sweep.yaml").write_text(
        "kind: sweep\nbase: base.yaml\npoints:\n  - router.policy: " + _nested() + "\n")
    (tmp_path / "spec.json").write_text('{"spec": ' + _nested() + "}\n")
    ran = cli_process("lint", "--format", "json", str(tmp_path))
    assert ran.code == 1, ran.err
    found = {Path(f["path"]).name: [(d["rule"], d["line"], d["column"], d["message"])
                                    for d in f["diagnostics"]]
             for f in json.loads(ran.out)["files"]}
    deeper = f"document nests deeper than {MAX_DEPTH} levels"
    assert found == {
        "base.yaml": [],
        "config.yaml": [("YAML-SYNTAX", 1, len("engine: ") + MAX_DEPTH + 1, deeper)],
        "sweep.yaml": [("YAML-SYNTAX", 4, len("  - router.policy: ") + MAX_DEPTH - 1, deeper)],
        "spec.json": [("JSON-SYNTAX", 1, len('{"spec": ') + MAX_DEPTH + 1,
                       f"JSON syntax error: {deeper}")],
    }


def test_deep_yaml_config_for_compile_and_run(cli_process: Callable[..., Any],
                                              tmp_path: Path) -> None:
    """`compile` and `run` of the same config: the finding and exit 1, nothing written."""
    config = tmp_path / "config.yaml"
    config.write_text("engine:\n  model: " + "{a: " * DEEP + "1" + "}" * DEEP + "\n")
    for args in (("compile", str(config)), ("run", str(config), "-o", str(tmp_path / "r.json"))):
        ran = cli_process(*args)
        assert ran.code == 1, ran.err
        column = 10 + 4 * (MAX_DEPTH - 1)
        assert f"config.yaml:2:{column}: error YAML-SYNTAX document nests deeper than " \
               f"{MAX_DEPTH} levels" in ran.out + ran.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]


def test_deep_sweep_file_for_sweep_is_located(cli_process: Callable[..., Any],
                                             tmp_path: Path) -> None:
    """`kvreplay sweep` of a sweep file nested 40,000 levels deep prints the loader's finding
    at its line:col (exit 1, no results folder), not "is not a sweep file"; so does a sweep
    file that is not YAML at all."""
    (tmp_path / "base.yaml").write_text(GOOD)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("kind: sweep\nbase: base.yaml\npoints:\n  - router.policy: " + _nested()
                     + "\n")
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: sweep\nbase: [\n")
    for path, where, message in (
            (sweep, f"4:{len('  - router.policy: ') + MAX_DEPTH - 1}",
             f"document nests deeper than {MAX_DEPTH} levels"),
            (broken, "3:1", "YAML syntax error: while parsing a flow node")):
        ran = cli_process("sweep", str(path), "-o", str(tmp_path / "out"))
        assert ran.code == 1, ran.err
        assert f"{path.name}:{where}: error YAML-SYNTAX {message}" in ran.err, ran.err
        assert "not a sweep file" not in ran.err
    assert not (tmp_path / "out").exists()


def test_deep_set_value_is_a_usage_error(cli_process: Callable[..., Any],
                                         tmp_path: Path) -> None:
    """A `--set` value nested 40,000 levels deep is a usage error naming the argument and the
    character of the first list inside 200 others (exit 2), not a crash."""
    config = tmp_path / "c.yaml"
    config.write_text(GOOD)
    ran = cli_process("lint", str(config), "--set", "engine.model=" + _nested())
    assert ran.code == 2, ran.err
    assert "the value is not valid YAML: document nests deeper than 200 levels (character " \
           f"{MAX_DEPTH + 2} of the value)" in ran.err


def test_deep_toml_settings_are_located(cli: Callable[..., Any], tmp_path: Path,
                                        monkeypatch: Any) -> None:
    """kvreplay.toml with an array or an inline table nested 30,000 levels deep is one
    SETTINGS-INVALID at the bracket that opens level 201 (exit 2), not a RecursionError;
    brackets inside strings and comments do not count."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.yaml").write_text(GOOD)
    for text, column in (("include = " + _nested(30_000) + "\n", 11 + MAX_DEPTH),
                         ("include = " + "{a = " * 30_000 + "1" + "}" * 30_000 + "\n",
                          11 + 5 * MAX_DEPTH)):
        (tmp_path / "kvreplay.toml").write_text(text)
        ran = cli("lint", "--format", "concise", "c.yaml")
        assert ran.code == 2
        assert ran.err.startswith(f"kvreplay.toml:1:{column}: error SETTINGS-INVALID TOML nests "
                                  f"deeper than {MAX_DEPTH} levels"), ran.err[:300]
    quoted = "'" + "[" * 300 + "'"
    (tmp_path / "kvreplay.toml").write_text(
        f'# {"[" * 300}\nexclude = ["{"[" * 300}", {quoted}, """\n{"{" * 300}\n"""]\n')
    ran = cli("lint", "--format", "concise", "c.yaml")
    assert "nests deeper" not in ran.out + ran.err


def test_deep_report_is_located(cli: Callable[..., Any], tmp_path: Path) -> None:
    """A report holding a value nested 40,000 levels deep: `compare` and `report` name the
    file, line and column of the bracket inside 200 others (the report's object counts) (exit
    2)."""
    report = tmp_path / "deep.json"
    prefix = '{"summary": {},\n "x": '
    report.write_text(prefix + _nested() + "}\n")
    column = len(' "x": ') + MAX_DEPTH
    for args in (("compare", str(report), str(report)),
                 ("report", str(report), "-o", str(tmp_path / "r.html"))):
        ran = cli(*args)
        assert ran.code == 2
        assert f"deep.json:2:{column}: not valid JSON (arrays and objects nest too deeply, " \
               "past 200 levels here)" in ran.err, ran.err
