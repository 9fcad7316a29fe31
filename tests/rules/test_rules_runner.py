"""Running the rules: selection, determinism, and the compiled-rules cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from kvreplay.compiler.documents import compile_text
from kvreplay.compiler.spec import HostOffload, Role, Spec
from kvreplay.rules import make_runner, rule_ids, run_rules, select_rules
from kvreplay.rules.codegen import generate
from kvreplay.rules.loader import cache_key, load, shipped_ruleset, sources
from rules_support import path_origin

NOISY = Spec(model="m", mode="aggregated", roles=(
    Role(name="aggregated", backend="sglang", dp_size=2,
         host_offload=HostOffload(scope="worker_local", num_host_blocks=8)),
))


def ids_of(diagnostics: list) -> set[str]:  # type: ignore[type-arg]
    return {d.rule for d in diagnostics}


def test_select_by_family_prefix() -> None:
    """A selector is an ID or a prefix of whole dash-separated parts."""
    assert set(select_rules(["G2"])) == {i for i in rule_ids() if i.startswith("G2-")}
    assert set(select_rules(["AGX-G2"])) == {"AGX-G2-BACKEND", "AGX-G2-DP", "AGX-G2-STATIC"}
    assert select_rules(["G2-SCOPE"]) == ("G2-SCOPE",)


def test_ignore_wins_over_select() -> None:
    """Ignored rules are off even when selected."""
    enabled = select_rules(["G2"], ignore=["G2-SCOPE"])
    assert "G2-SCOPE" not in enabled and "G2-BACKEND" in enabled


def test_unknown_selector_is_an_error_with_a_suggestion() -> None:
    """A selector matching no rule raises ValueError naming the nearest ID."""
    with pytest.raises(ValueError, match="unknown rule `G2-SCOP`: did you mean `G2-SCOPE`"):
        select_rules(["G2-SCOP"])


def test_lenient_selection_leaves_other_codes_to_the_caller() -> None:
    """strict=False ignores selectors that name no matrix rule (schema codes on the CLI)."""
    assert select_rules(["SCHEMA-TYPE"], strict=False) == ()
    assert select_rules(["SCHEMA-TYPE", "G2-SCOPE"], strict=False) == ("G2-SCOPE",)
    assert "G2-SCOPE" in select_rules(ignore=["YAML-SYNTAX"], strict=False)


def test_runner_reports_only_enabled_rules() -> None:
    """make_runner and run_rules(select/ignore) switch rules on and off by ID."""
    everything = ids_of(run_rules(NOISY, path_origin()))
    assert {"G2-BACKEND", "G2-SCOPE"} <= everything
    assert ids_of(make_runner(select=["G2-SCOPE"])(NOISY, path_origin())) == {"G2-SCOPE"}
    assert ids_of(run_rules(NOISY, path_origin(), ignore=["G2"])) == {
        i for i in everything if not i.startswith("G2-")}


def test_findings_are_sorted_and_unique() -> None:
    """Identical findings (same span, message, related) are reported once, sorted by position."""
    text = (Path(__file__).resolve().parents[2] / "rules" / "cases" / "AGX-G2-BACKEND"
            / "fail-sglang.yaml").read_text(encoding="utf-8")
    compiled = compile_text(text, "x.yaml")
    assert compiled.spec is not None and compiled.origin is not None
    found = run_rules(compiled.spec, compiled.origin)
    assert found == sorted(set(found), key=lambda d: d.sort_key())


def test_generated_code_is_deterministic() -> None:
    """The same rule files generate the same Python source."""
    ruleset = shipped_ruleset()
    assert generate(ruleset) == generate(ruleset)


def test_cache_key_changes_with_any_rule_text() -> None:
    """Editing one rule file changes the cache key (no stale rules)."""
    files = sources()
    name, text = files[0]
    assert cache_key(files) != cache_key([(name, text + "\n# edited\n"), *files[1:]])


def test_cache_is_written_reused_and_survives_corruption(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A miss writes bytecode and source; a hit reuses it; a corrupt file is recompiled."""
    monkeypatch.setenv("KVREPLAY_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KVREPLAY_NO_CACHE", raising=False)
    first = load()
    key = cache_key(sources())
    marshalled = tmp_path / f"rules-{key}.marshal"
    assert marshalled.is_file() and (tmp_path / f"rules-{key}.py").is_file()
    second = load()
    assert [r[0] for r in second["RULES"]] == [r[0] for r in first["RULES"]]
    marshalled.write_bytes(b"not bytecode")
    third = load()
    assert [r[0] for r in third["RULES"]] == [r[0] for r in first["RULES"]]
    assert marshalled.read_bytes() != b"not bytecode"


def test_unwritable_cache_dir_still_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache location that cannot be created only costs time."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("KVREPLAY_CACHE_DIR", str(blocker / "cache"))
    assert load()["RULES"]


def test_a_warm_start_imports_neither_lark_nor_the_syntax_tree(tmp_path: Path) -> None:
    """With the cache warm, running the rules loads bytecode only (a fresh interpreter)."""
    env = {**os.environ, "KVREPLAY_CACHE_DIR": str(tmp_path), "PYTHONHASHSEED": "1"}
    env.pop("KVREPLAY_NO_CACHE", None)
    probe = ("import sys; from kvreplay.rules.runner import compiled_rules; compiled_rules(); "
             "print('lark' in sys.modules, 'kvreplay.rules.syntax' in sys.modules)")
    cold = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                          text=True, check=True)
    assert cold.stdout.split() == ["True", "True"]
    env["PYTHONHASHSEED"] = "2"
    warm = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                          text=True, check=True)
    assert warm.stdout.split() == ["False", "False"]
