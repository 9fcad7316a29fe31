"""`--set` on a loaded config: a removed key is checked like a set one, and every finding about
what an argument set, created or removed is located in that argument (issue 22 item 1, issue 30
item 15)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
G2 = str(REPO / "examples" / "g2-restore-mooncake.yaml")
NO_G2 = str(REPO / "examples" / "kv-router-mooncake.yaml")
POLYNOMIAL = str(REPO / "examples" / "disaggregated-hbm.yaml")
SWEEP = str(REPO / "examples" / "sweeps" / "kv-router-capacity.yaml")
KV_CACHE = "engine.workers.aggregated.kv_cache"


def _findings(ran: Any) -> list[dict[str, Any]]:
    return [d for f in json.loads(ran.out)["files"] for d in f["diagnostics"]]


def _located(ran: Any) -> list[str]:
    """The finding lines located in a `--set` argument (stdout for lint, stderr for run and
    compile)."""
    return [line for line in (ran.out + ran.err).splitlines() if line.startswith("--set ")]


@pytest.mark.parametrize("value", ["null", "1", "{scope: dp_rank_local}"])
def test_a_misspelt_key_is_unknown_whether_set_or_removed(cli: Callable[..., Any],
                                                          value: str) -> None:
    """`host_ofload=null` is the same SCHEMA-UNKNOWN-KEY, at the same place and with the same
    did-you-mean, as `host_ofload=1`: removing a key that does not exist is not a silent no-op."""
    argument = f"{KV_CACHE}.host_ofload={value}"
    ran = cli("lint", "--format", "json", G2, "--set", argument)
    assert ran.code == 1
    (finding,) = _findings(ran)
    label = f"--set {argument}"
    assert (finding["rule"], finding["file"], finding["line"], finding["column"]) == (
        "SCHEMA-UNKNOWN-KEY", label, 1, label.index("host_ofload") + 1)
    assert finding["hint"] == "did you mean `host_offload` or `g3_offload`?"
    assert finding["path"] == "$.engine.workers.aggregated.kv_cache.host_ofload"


@pytest.mark.parametrize("command", ["run", "compile", "lint"])
def test_every_command_refuses_a_misspelt_removal(cli: Callable[..., Any], tmp_path: Path,
                                                  command: str) -> None:
    """run, compile and lint exit 1 on the typo instead of replaying or emitting the config
    with G2 still on."""
    argument = f"{KV_CACHE}.host_ofload=null"
    extra = ["-o", str(tmp_path / "out.json")] if command != "lint" else ["--format", "concise"]
    ran = cli(command, G2, "--set", argument, *extra)
    assert ran.code == 1 and not (tmp_path / "out.json").exists()
    assert _located(ran) == [f"--set {argument}:1:42: error SCHEMA-UNKNOWN-KEY unknown key "
                             "`host_ofload` in `kv_cache`"]


@pytest.mark.parametrize("value", ["null", "1"])
def test_sweep_reports_the_misspelt_key_of_its_set(cli: Callable[..., Any], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   value: str) -> None:
    """`sweep --set` reports the argument's own finding (with its hint, as a terminal shows
    it), null or not, and runs nothing."""
    argument = f"{KV_CACHE}.host_ofload={value}"
    out = tmp_path / "results"
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setenv("NO_COLOR", "1")
    ran = cli("sweep", SWEEP, "-o", str(out), "--set", argument)
    assert ran.code == 1 and not out.exists()
    assert ran.err.splitlines()[:3] == [
        f"--set {argument}:1:42: error SCHEMA-UNKNOWN-KEY unknown key `host_ofload` in "
        "`kv_cache`", "  at $.engine.workers.aggregated.kv_cache.host_ofload",
        "  hint: did you mean `host_offload` or `g3_offload`?"]


def test_a_key_that_does_not_apply_is_refused_when_removed(cli: Callable[..., Any]) -> None:
    """A key the schema knows but not for this variant (`prefill_ms` of polynomial timing) is
    refused the same way set or removed."""
    for value in ("null", "1"):
        argument = f"engine.workers.prefill.timing.prefill_ms={value}"
        ran = cli("lint", "--format", "json", POLYNOMIAL, "--set", argument)
        assert [(d["rule"], d["file"]) for d in _findings(ran)] == [
            ("SCHEMA-NOT-APPLICABLE", f"--set {argument}")]


def test_removing_an_absent_known_key_changes_nothing(cli: Callable[..., Any]) -> None:
    """Removing a key the schema knows but the config does not have, or a key below a mapping
    the config does not have, is a no-op: no host tier is created around it."""
    plain = cli("compile", NO_G2)
    for argument in (f"{KV_CACHE}.host_offload=null", f"{KV_CACHE}.host_offload.scope=null"):
        ran = cli("compile", NO_G2, "--set", argument)
        assert (ran.code, ran.out, ran.err) == (0, plain.out, plain.err)


def test_a_misspelt_key_below_an_absent_mapping_is_unknown(cli: Callable[..., Any]) -> None:
    """`host_offload.scop=null` on a config without a host tier: `scop` is still unknown."""
    ran = cli("lint", "--format", "json", NO_G2, "--set", f"{KV_CACHE}.host_offload.scop=null")
    (finding,) = _findings(ran)
    assert (finding["rule"], finding["hint"]) == ("SCHEMA-UNKNOWN-KEY", "did you mean `scope`?")


def test_a_key_the_argument_creates_is_located_in_the_argument(cli: Callable[..., Any]) -> None:
    """`capcity.blocks=1` creates `capcity`: its finding names the argument and the column of
    `capcity` in it, not the file's `kv_cache` line."""
    argument = f"{KV_CACHE}.capcity.blocks=1"
    (finding,) = _findings(cli("lint", "--format", "json", G2, "--set", argument))
    label = f"--set {argument}"
    assert (finding["file"], finding["line"], finding["column"], finding["end_column"]) == (
        label, 1, label.index("capcity") + 1, label.index("capcity") + 8)
    assert finding["hint"] == "did you mean `capacity`?"


@pytest.mark.parametrize(("argument", "message"), [
    ("engine=null", "missing required key `engine` in the document"),
    (f"{KV_CACHE}.host_offload.num_host_blocks=null",
     "missing required key `num_host_blocks` in `host_offload`"),
    ("engine.workers.aggregated=null", "`workers` needs at least one entry"),
    (f"{KV_CACHE}.capacity.blocks=null",
     "`capacity` with type `fixed` needs exactly one of `blocks` or `bytes` (found neither)"),
])
def test_a_required_key_removed_is_reported_at_the_argument(cli: Callable[..., Any],
                                                            argument: str, message: str) -> None:
    """Removing a required key is reported at the key in the `--set` argument, not at the
    file's top (1:1) or at the mapping that held it."""
    (finding,) = [d for d in _findings(cli("lint", "--format", "json", G2, "--set", argument))
                  if d["rule"].startswith("SCHEMA-")]
    label = f"--set {argument}"
    last = argument.partition("=")[0].rsplit(".", 1)[-1]
    assert (finding["message"], finding["file"], finding["column"]) == (
        message, label, label.rindex(last, 0, label.index("=")) + 1)
