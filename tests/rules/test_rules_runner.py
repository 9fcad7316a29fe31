"""Running the rules: selection, determinism, and the compiled-rules cache."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from rules_support import path_origin

from kvreplay.compiler.documents import compile_text
from kvreplay.rules import loader, make_runner, rule_ids, run_rules, select_rules
from kvreplay.rules.codegen import generate
from kvreplay.rules.loader import cache_key, load, shipped_ruleset, sources
from kvreplay.schema.spec import HostOffload, Role, Spec

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


def _imported_module(module: str, name: str) -> str:
    """The module `from module import name` imports: module.name if that is a submodule."""
    package = importlib.util.find_spec(module)
    is_package = package is not None and package.submodule_search_locations is not None
    if is_package and importlib.util.find_spec(f"{module}.{name}") is not None:
        return f"{module}.{name}"
    return module


def _kvreplay_imports(module: str) -> set[str]:
    """The kvreplay modules `module` imports (at top level or inside functions)."""
    path = loader.module_path(module)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from package import module` imports a module; `from module import name` does not
            names = [_imported_module(node.module, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        found.update(n for n in names if n == "kvreplay" or n.startswith("kvreplay."))
    return found


def test_cache_key_covers_every_module_code_generation_reads() -> None:
    """The import closure of the code generator is hashed: rules/*.py and KEY_MODULES."""
    seen: set[str] = {"kvreplay"}
    todo = ["kvreplay.rules.codegen", "kvreplay.rules.analysis", "kvreplay.rules.parser"]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(_kvreplay_imports(module))
    outside = {m for m in seen if not m.startswith("kvreplay.rules.") and m != "kvreplay"}
    assert "kvreplay.schema.spec" in outside
    assert outside <= set(loader.KEY_MODULES), sorted(outside - set(loader.KEY_MODULES))


def test_cache_key_changes_with_the_package_version(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new release never reuses the previous release's compiled rules."""
    from kvreplay.schema import version

    files = sources()
    before = cache_key(files)
    monkeypatch.setattr(version, "VERSION", version.VERSION + ".post1")
    assert cache_key(files) != before


# Router.temperature's default, as schema/native_model.py reads it from native_defaults.py.
DEFAULTS_MODULE = "kvreplay.schema.native_defaults"
TEMPERATURE = '    "temperature": 0.0,\n'


def _edited_defaults(folder: Path) -> Path:
    """A copy of the native defaults module with Router.temperature's default set to 0.5."""
    text = loader.module_path(DEFAULTS_MODULE).read_text(encoding="utf-8")
    assert TEMPERATURE in text
    folder.mkdir(parents=True, exist_ok=True)
    edited = folder / "native_defaults.py"
    edited.write_text(text.replace(TEMPERATURE, TEMPERATURE.replace("0.0", "0.5")),
                      encoding="utf-8")
    return edited


def test_cache_key_changes_with_a_spec_default(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Editing a default the Spec embeds (schema/native_defaults.py) changes the key."""
    files = sources()
    before = cache_key(files)
    edited = _edited_defaults(tmp_path)
    real = loader.module_path
    monkeypatch.setattr(loader, "module_path",
                        lambda name: edited if name == DEFAULTS_MODULE else real(name))
    assert cache_key(files) != before


# A fresh interpreter whose schema/native_defaults.py is `argv[1]`; prints the rules cache key it
# used and whether ROUTER-KV-ONLY fires on `router.temperature: 0.5` with policy round_robin.
_PROBE = textwrap.dedent("""
    import importlib.util, sys
    import kvreplay.schema
    found = importlib.util.spec_from_file_location("kvreplay.schema.native_defaults", sys.argv[1])
    module = importlib.util.module_from_spec(found)
    sys.modules[found.name] = module
    found.loader.exec_module(module)
    kvreplay.schema.native_defaults = module
    from kvreplay.schema import spec as s
    from kvreplay.rules.loader import cache_key, load, sources
    namespace = load()
    spec = s.Spec(model="m", roles=(s.Role(name="aggregated"),),
                  router=s.Router(temperature=0.5))
    out = []
    for rule_id, _severity, checks in namespace["RULES"]:
        if rule_id == "ROUTER-KV-ONLY":
            for check in checks:
                check(spec, out)
    print(cache_key(sources()), bool(out))
""")


def test_editing_a_spec_default_misses_the_warm_cache(tmp_path: Path) -> None:
    """Router.temperature's default changed in the defaults: the rules are recompiled.

    The warm cache holds rules generated with the default 0.0, under which `temperature: 0.5`
    is reported; with the default edited to 0.5 the same value is the default and is not.
    """
    original = loader.module_path(DEFAULTS_MODULE)
    edited = _edited_defaults(tmp_path / "edited")
    cache = tmp_path / "cache"
    env = {**os.environ, "KVREPLAY_CACHE_DIR": str(cache)}
    env.pop("KVREPLAY_NO_CACHE", None)

    def probe(defaults: Path) -> list[str]:
        run = subprocess.run([sys.executable, "-c", _PROBE, str(defaults)], env=env,
                             capture_output=True, text=True, check=True)
        return run.stdout.split()

    warm_key, fires = probe(original)
    assert fires == "True" and (cache / f"rules-{warm_key}.marshal").is_file()
    edited_key, fires = probe(edited)
    assert edited_key != warm_key and fires == "False"
    assert (cache / f"rules-{edited_key}.marshal").is_file()


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


def test_a_miss_keeps_the_most_recently_used_entries(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Writing an entry evicts only beyond the KEEP most recently used ones (another
    checkout's entry survives), each with its source beside it; a hit marks its entry used."""
    monkeypatch.setenv("KVREPLAY_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KVREPLAY_NO_CACHE", raising=False)
    for age in range(loader.KEEP + 2):
        for suffix in (".marshal", ".py"):
            old = tmp_path / f"rules-other{age:02d}{suffix}"
            old.write_bytes(b"x")
            os.utime(old, ns=(10**18 - age * 10**9, 10**18 - age * 10**9))
    load()
    key = cache_key(sources())
    kept = sorted(p.name for p in tmp_path.glob("rules-*.marshal"))
    assert kept == sorted([f"rules-{key}.marshal",
                           *(f"rules-other{age:02d}.marshal" for age in range(loader.KEEP - 1))])
    assert sorted(p.name for p in tmp_path.glob("rules-*.py")) == [
        name.replace(".marshal", ".py") for name in kept]
    current = tmp_path / f"rules-{key}.marshal"
    os.utime(current, ns=(1, 1))
    load()
    assert current.stat().st_mtime_ns > 1


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
