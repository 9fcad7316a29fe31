"""Project configuration: kvreplay.toml / [tool.kvreplay], found upward (closest wins), checked
with located diagnostics, and shown with where each value came from."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kvreplay.cli.settings_file import KEYS
from kvreplay.cli.toml_lines import key_positions

G2_ON_SGLANG = """engine:
  model: meta-llama/Llama-3.1-8B
  backend: sglang
  workers:
    aggregated:
      kv_cache:
        host_offload: {num_host_blocks: 64}
"""


def _rules(ran: Any) -> list[str]:
    return [d["rule"] for f in json.loads(ran.out)["files"] for d in f["diagnostics"]]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with one G2-on-SGLang config (G2-BACKEND, an error), the current folder."""
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "a.yaml").write_text(G2_ON_SGLANG)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_ignore_in_kvreplay_toml_applies(cli: Callable[..., Any], project: Path) -> None:
    """`ignore` in kvreplay.toml drops the rule it names (by prefix) from a lint of a folder."""
    assert "G2-BACKEND" in _rules(cli("lint", "--format", "json", "deploy"))
    (project / "kvreplay.toml").write_text('ignore = ["G2"]\n')
    ran = cli("lint", "--format", "json", "deploy")
    assert ran.code == 0 and "G2-BACKEND" not in _rules(ran)


def test_pyproject_table_and_closest_wins(cli: Callable[..., Any], project: Path) -> None:
    """[tool.kvreplay] in pyproject.toml counts; a closer kvreplay.toml overrides it, and
    kvreplay.toml beats pyproject.toml in the same folder."""
    (project / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.kvreplay]\n'
                                            'format = "json"\nignore = ["G2-BACKEND"]\n')
    ran = cli("lint", "deploy")
    assert ran.code == 0 and json.loads(ran.out)["summary"]["errors"] == 0
    (project / "deploy" / "kvreplay.toml").write_text('select = ["SCHEMA"]\n')
    closest = cli("lint", "--format", "concise", "deploy")
    assert closest.code == 0 and closest.out == ""
    (project / "kvreplay.toml").write_text('strict = true\n')
    ran = cli("lint", "--show-settings", ".")
    assert "# kvreplay.toml:1" in ran.out and 'format = "auto"' in ran.out


def test_pyproject_without_the_table_is_passed_over(cli: Callable[..., Any], project: Path,
                                                     tmp_path: Path) -> None:
    """A pyproject.toml without [tool.kvreplay] does not stop the search upward."""
    (tmp_path / "kvreplay.toml").write_text('ignore = ["G2-BACKEND"]\n')
    (project / "deploy" / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert cli("lint", "deploy").code == 0


def test_config_option_and_isolated(cli: Callable[..., Any], project: Path) -> None:
    """--config PATH uses that file (no search); --isolated uses none."""
    (project / "kvreplay.toml").write_text('ignore = ["G2-BACKEND"]\n')
    (project / "other.toml").write_text('strict = false\n')
    assert cli("lint", "deploy").code == 0
    assert cli("lint", "--isolated", "deploy").code == 1
    assert cli("lint", "--config", "other.toml", "deploy").code == 1
    missing = cli("lint", "--config", "nope.toml", "deploy")
    assert missing.code == 2 and "nope.toml" in missing.err


@pytest.mark.parametrize(("text", "located", "words"), [
    ('strict = true\nselct = ["G2"]\n', "kvreplay.toml:2:1", "did you mean `select`"),
    ('strict = "yes"\n', "kvreplay.toml:1:1", "must be a boolean, found string"),
    ('\n[per-file-ignores]\n"a/*.yaml" = "G2"\n', "kvreplay.toml:3:1", "must be an array"),
    ('ignore = ["G2-BAKEND"]\n', "kvreplay.toml:1:1", "did you mean `G2-BACKEND`"),
    ('format = "sarf"\n', "kvreplay.toml:1:1", "did you mean `sarif`"),
    ('[compile]\n"a.yaml" = 3\n', "kvreplay.toml:2:1", "must be a string"),
    ('strict = true\nstrict = false\n', "kvreplay.toml:2:15", "TOML syntax error"),
])
def test_bad_settings_are_located_usage_errors(cli: Callable[..., Any], project: Path,
                                               text: str, located: str, words: str) -> None:
    """Unknown keys, wrong types, unknown rule IDs and TOML syntax: exit 2, file:line:col."""
    (project / "kvreplay.toml").write_text(text)
    for command in (("lint", "deploy"), ("compile", "--check-pairs")):
        ran = cli(*command)
        assert ran.code == 2, ran
        assert ran.err.startswith(f"{located}: error SETTINGS-INVALID"), ran.err
        assert words in ran.err and "Traceback" not in ran.err


def test_command_line_over_file_over_default(cli: Callable[..., Any], project: Path) -> None:
    """--show-settings names the source of each value: default, file:line or command line;
    --ignore adds to the file's list, --select replaces it."""
    (project / "kvreplay.toml").write_text('# settings\nignore = ["G3"]\nselect = ["G2"]\n')
    ran = cli("lint", "--show-settings", "--format", "json", "--ignore", "POOL",
              "--select", "SCHEMA", "deploy")
    settings = json.loads(ran.out)["settings"]
    assert settings["ignore"] == {"value": ["G3", "POOL"],
                                  "source": "kvreplay.toml:2, command line"}
    assert settings["select"] == {"value": ["SCHEMA"], "source": "command line"}
    assert settings["strict"] == {"value": False, "source": "default"}
    assert settings["format"]["source"] == "command line"
    assert set(settings) == {k.name for k in KEYS}


def test_shown_settings_are_valid_toml(cli: Callable[..., Any], project: Path) -> None:
    """The TOML --show-settings prints reads back as the same settings."""
    (project / "kvreplay.toml").write_text(
        'exclude = ["old"]\n[per-file-ignores]\n"deploy/*.yaml" = ["G2"]\n'
        '[compile]\n"deploy/a.yaml" = "deploy/a.json"\n')
    shown = cli("lint", "--show-settings", "deploy").out
    (project / "copy.toml").write_text(shown)
    again = cli("lint", "--show-settings", "--config", "copy.toml", "deploy").out
    assert "copy.toml:" in again
    strip = [line.split("#")[0].rstrip() for line in shown.splitlines()[1:]]
    assert [line.split("#")[0].rstrip() for line in again.splitlines()[1:]] == strip


def test_per_file_ignores(cli: Callable[..., Any], project: Path) -> None:
    """per-file-ignores drops rules only in the files its glob matches."""
    (project / "deploy" / "b.yaml").write_text(G2_ON_SGLANG)
    (project / "kvreplay.toml").write_text('[per-file-ignores]\n"deploy/b.*" = ["G2-BACKEND"]\n')
    ran = cli("lint", "--format", "json", "deploy")
    files = json.loads(ran.out)["files"]
    by_file = {f["path"]: [d["rule"] for d in f["diagnostics"]] for f in files}
    assert "G2-BACKEND" in by_file[str(Path("deploy") / "a.yaml")]
    assert "G2-BACKEND" not in by_file[str(Path("deploy") / "b.yaml")]


def test_strict_and_format_from_the_file(cli: Callable[..., Any], project: Path) -> None:
    """`strict` and `format` from the file apply; --no-strict on the command line wins."""
    (project / "deploy" / "a.yaml").write_text(
        G2_ON_SGLANG.replace("sglang", "vllm") + "  # kvreplay: ignore[G2-SCOPE]\n")
    (project / "kvreplay.toml").write_text('strict = true\nformat = "concise"\n')
    ran = cli("lint", "deploy")
    assert ran.code == 1 and ": warning LINT-UNUSED-SUPPRESSION" in ran.out
    assert cli("lint", "--no-strict", "deploy").code == 0


def test_key_positions_follow_tables_and_dotted_keys() -> None:
    """The TOML scanner finds keys in tables, dotted keys, and skips arrays over lines."""
    text = ('[tool.kvreplay]\nselect = [\n  "G2",\n  "x = 1",\n]\n'
            '[tool.kvreplay.per-file-ignores]\n"a.yaml" = ["G3"]\ntool.other = 1\n')
    positions = key_positions(text)
    assert positions[("tool", "kvreplay", "select")] == (2, 1)
    assert positions[("tool", "kvreplay", "per-file-ignores", "a.yaml")] == (7, 1)
    assert ("tool", "kvreplay", "x") not in positions
