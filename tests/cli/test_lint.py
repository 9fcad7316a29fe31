"""`kvreplay lint`: discovery, filters, suppressions, robustness and all problems at once."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
SG_G2_TYPO = """engine:
  model: meta-llama/Llama-3.1-8B
  backend: sglang
  workers:
    aggregated:
      kv_cache:
        host_offload: {num_host_blocks: 64, d2h_bandwith_gbps: 8}
"""
SHARED_LINK = """engine:
  model: meta-llama/Llama-3.1-8B
  workers:
    aggregated:
      kv_cache:
        host_offload: {num_host_blocks: 64, shared_d2h_bandwidth_gbps: 10}{comment}
"""


def _json(ran: Any) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(ran.out)
    return report


def _rules(ran: Any) -> list[str]:
    return [d["rule"] for f in _json(ran)["files"] for d in f["diagnostics"]]


def test_all_problems_at_once(cli: Callable[..., Any], tmp_path: Path) -> None:
    """A misspelled key and a G2-on-SGLang deployment are both reported in one run."""
    config = tmp_path / "cfg.yaml"
    config.write_text(SG_G2_TYPO)
    ran = cli("lint", "--format", "json", str(config))
    assert ran.code == 1
    found = {d["rule"]: d for f in _json(ran)["files"] for d in f["diagnostics"]}
    assert {"SCHEMA-UNKNOWN-KEY", "G2-BACKEND"} <= set(found)
    typo = found["SCHEMA-UNKNOWN-KEY"]
    assert typo["line"] == 7 and typo["hint"].startswith("did you mean `d2h_bandwidth_gbps`")


def test_directories_recurse_and_native_json_is_detected(cli: Callable[..., Any],
                                                         tmp_path: Path) -> None:
    """A directory is walked for yaml/yml/json; native specs are recognized by content."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.yml").write_text(SG_G2_TYPO)
    native = cli("compile", str(EXAMPLES / "kv-router-mooncake.yaml")).out
    (tmp_path / "spec.json").write_text(native.replace('"kv_router"', '"kv_routr"'))
    (tmp_path / "notes.txt").write_text("not a config")
    ran = cli("lint", "--format", "json", str(tmp_path))
    paths = [f["path"] for f in _json(ran)["files"]]
    assert paths == [str(tmp_path / "spec.json"), str(tmp_path / "sub" / "a.yml")]
    spec_rules = [d["rule"] for d in _json(ran)["files"][0]["diagnostics"]]
    assert spec_rules == ["SCHEMA-ENUM"]


def test_globs_expand_in_sorted_order(cli: Callable[..., Any]) -> None:
    """`**` globs expand (sorted); a glob that matches nothing is an unreadable-input error."""
    ran = cli("lint", "--format", "json", str(EXAMPLES / "**" / "agentx-*.yaml"))
    assert [Path(f["path"]).name for f in _json(ran)["files"]] == [
        "agentx-g2-local.yaml", "agentx-g2-shared-pd.yaml", "agentx-g2-warm-profile.yaml"]
    assert ran.code == 0
    missing = cli("lint", "--format", "json", str(EXAMPLES / "*.nothing"))
    assert missing.code == 2 and _rules(missing) == ["FILE-UNREADABLE"]


def test_select_and_ignore(cli: Callable[..., Any], tmp_path: Path) -> None:
    """--select keeps only the named rules; --ignore drops them; globs and prefixes work."""
    config = tmp_path / "cfg.yaml"
    config.write_text(SG_G2_TYPO)
    assert _rules(cli("lint", "--format", "json", "--select", "G2-*", str(config))) == [
        "G2-BACKEND"]
    ignored = cli("lint", "--format", "json", "--ignore", "SCHEMA-UNKNOWN-KEY,G2-BACKEND",
                  str(config))
    assert "G2-BACKEND" not in _rules(ignored) and "SCHEMA-UNKNOWN-KEY" not in _rules(ignored)


def test_unknown_rule_in_select_is_a_usage_error(cli: Callable[..., Any]) -> None:
    """An unknown ID in --select exits 2 with a did-you-mean hint."""
    ran = cli("lint", "--select", "G2-BAKEND", str(EXAMPLES / "agentx-g2-local.yaml"))
    assert ran.code == 2 and "G2-BACKEND" in ran.err


def test_strict_makes_warnings_fail(cli: Callable[..., Any], tmp_path: Path) -> None:
    """A warning alone exits 0, and 1 with --strict."""
    config = tmp_path / "cfg.yaml"
    config.write_text(SHARED_LINK.replace("{comment}", ""))
    assert cli("lint", "--format", "json", str(config)).code == 0
    ran = cli("lint", "--format", "json", "--strict", str(config))
    assert ran.code == 1 and _rules(ran) == ["G2-SHARED-LINK"]


def test_inline_suppression_and_unused_suppression(cli: Callable[..., Any],
                                                   tmp_path: Path) -> None:
    """`# kvreplay: ignore[ID]` drops a finding on its line; one that drops nothing warns."""
    config = tmp_path / "cfg.yaml"
    config.write_text(SHARED_LINK.replace("{comment}", "  # kvreplay: ignore[G2-SHARED-LINK]"))
    assert _rules(cli("lint", "--format", "json", "--strict", str(config))) == []
    config.write_text(SHARED_LINK.replace("{comment}", "  # kvreplay: ignore[POOL-LAYOUT]")
                      .replace("shared_d2h_bandwidth_gbps: 10", "d2h_bandwidth_gbps: 10"))
    ran = cli("lint", "--format", "json", str(config))
    (finding,) = [d for f in _json(ran)["files"] for d in f["diagnostics"]]
    assert (finding["rule"], finding["severity"], finding["line"]) == (
        "LINT-UNUSED-SUPPRESSION", "warning", 6)


@pytest.mark.parametrize(("name", "content", "rule"), [
    ("empty.yaml", b"", "YAML-NOT-MAPPING"),
    ("binary.yaml", b"\x7fELF\x02\x01\x00\x00\x00", "FILE-BINARY"),
    ("latin1.yaml", "engine: {model: caf\u00e9}\n".encode("latin-1"), "FILE-ENCODING"),
    ("huge.yaml", None, "FILE-TOO-LARGE"),
])
def test_unreadable_files_get_one_diagnostic_and_others_are_linted(
        cli: Callable[..., Any], tmp_path: Path, name: str, content: bytes | None,
        rule: str) -> None:
    """Empty, binary, non-UTF-8 and 50 MB files: one clear finding each; the next file is linted."""
    target = tmp_path / name
    if content is None:
        with target.open("wb") as fh:
            fh.truncate(50 * 1024 * 1024)
    else:
        target.write_bytes(content)
    other = tmp_path / "z-other.yaml"
    other.write_text(SG_G2_TYPO)
    ran = cli("lint", "--format", "json", str(target), str(other))
    files = _json(ran)["files"]
    assert [d["rule"] for d in files[0]["diagnostics"]] == [rule]
    assert "G2-BACKEND" in [d["rule"] for d in files[1]["diagnostics"]]
    assert ran.code == (1 if rule == "YAML-NOT-MAPPING" else 2)


def test_directory_given_as_file_and_missing_file(cli: Callable[..., Any],
                                                  tmp_path: Path) -> None:
    """A missing path is FILE-UNREADABLE (exit 2) while the other files are still linted."""
    ran = cli("lint", "--format", "json", str(tmp_path / "missing.yaml"),
              str(EXAMPLES / "agentx-g2-local.yaml"))
    assert ran.code == 2
    assert _rules(ran) == ["FILE-UNREADABLE"]
    assert len(_json(ran)["files"]) == 2


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files regardless of permissions")
def test_permission_denied(cli: Callable[..., Any], tmp_path: Path) -> None:
    """A file without read permission: FILE-UNREADABLE, exit 2."""
    target = tmp_path / "secret.yaml"
    target.write_text(SG_G2_TYPO)
    target.chmod(0)
    ran = cli("lint", "--format", "json", str(target))
    assert ran.code == 2 and _rules(ran) == ["FILE-UNREADABLE"]


def test_set_override_is_linted_at_the_argument(cli: Callable[..., Any]) -> None:
    """A finding about an overridden value points at the --set argument, not the file."""
    argument = "--set engine.workers.aggregated.kv_cache.host_offload.scope=worker_local"
    ran = cli("lint", "--format", "json", *argument.split(" ", 1),
              str(EXAMPLES / "agentx-g2-local.yaml"))
    (scope,) = [d for f in _json(ran)["files"] for d in f["diagnostics"] if d["rule"] == "G2-SCOPE"]
    assert (scope["file"], scope["line"], scope["column"]) == (argument, 1, len(argument) - 11)
    backend = cli("lint", "--format", "json", "--set", "engine.backend=sglang",
                  str(EXAMPLES / "agentx-g2-local.yaml"))
    (g2,) = [d for f in _json(backend)["files"] for d in f["diagnostics"]
             if d["rule"] == "G2-BACKEND"]
    assert [r["file"] for r in g2["related"]] == ["--set engine.backend=sglang"]


def test_a_scalar_where_a_variant_object_belongs_is_one_type_error(
        cli: Callable[..., Any]) -> None:
    """`capacity: 1` (its variants are objects) is a SCHEMA-TYPE at the value, not a crash
    (found by the mutation fuzz)."""
    ran = cli("lint", "--format", "json", "--set",
              "engine.workers.aggregated.kv_cache.capacity=1",
              str(EXAMPLES / "agentx-g2-local.yaml"))
    assert ran.code == 1 and _rules(ran) == ["SCHEMA-TYPE"]
    assert "internal error" not in ran.err


def test_set_null_removes_the_key(cli: Callable[..., Any]) -> None:
    """`--set KEY=null` removes KEY (JSON Merge Patch): the G2 example compiles without a host
    tier, and removing a key that is not there changes nothing."""
    off = cli("compile", "--set", "engine.workers.aggregated.kv_cache.host_offload=null",
              str(EXAMPLES / "g2-restore-mooncake.yaml"))
    assert off.code == 0 and "native_host_offload" not in off.out
    absent = cli("compile", "--set", "engine.workers.aggregated.kv_cache.g3_offload=null",
                 str(EXAMPLES / "g2-restore-mooncake.yaml"))
    plain = cli("compile", str(EXAMPLES / "g2-restore-mooncake.yaml"))
    assert absent.code == 0 and absent.out == plain.out


def test_compile_refuses_matrix_errors_and_prints_warnings(cli: Callable[..., Any],
                                                           tmp_path: Path) -> None:
    """compile exits 1 on a matrix error (nothing on stdout) and 0 with warnings on stderr."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(SG_G2_TYPO.replace(", d2h_bandwith_gbps: 8", ""))
    ran = cli("compile", str(bad))
    assert (ran.code, ran.out) == (1, "")
    assert "G2-BACKEND" in ran.err
    warn = tmp_path / "warn.yaml"
    warn.write_text(SHARED_LINK.replace("{comment}", ""))
    ran = cli("compile", str(warn))
    assert ran.code == 0 and ran.out.startswith("{") and "G2-SHARED-LINK" in ran.err
