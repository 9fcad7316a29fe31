"""The optional compiled engine core (mypyc, engine/compiled.py): the same reports as the Python
sources, chosen only when current, left out by KVREPLAY_PURE_PYTHON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvreplay.engine import compiled

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
sys.path.insert(0, str(REPO / "tests" / "differential"))

import core_parity  # noqa: E402
import harness  # noqa: E402

# The suite runs the Python sources (KVREPLAY_PURE_CORE, tests/conftest.py); these tests run
# the compiled core in child processes, where it is built and current.
built = pytest.mark.skipif(not compiled.built(), reason="the compiled engine core is not built "
                           "and current here (no mypy or C compiler at install, or an engine "
                           "source edited since)")


def _child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("KVREPLAY_PURE_PYTHON", "KVREPLAY_PURE_CORE")}
    return {**env, **extra}


@built
def test_the_compiled_core_replays_what_the_python_sources_replay() -> None:
    """Three scenarios of every difftest kind give the same canonical report bytes (or the
    same error) with the compiled core and with KVREPLAY_PURE_PYTHON=1 (tools/core_parity.py
    runs more)."""
    seeds = range(3)
    mine = core_parity.child_digests(list(harness.KINDS), seeds, pure=False)
    pure = core_parity.child_digests(list(harness.KINDS), seeds, pure=True)
    assert len(mine) == len(harness.KINDS) * len(seeds)
    assert mine == pure


def _files(env: dict[str, str]) -> tuple[bool, list[str]]:
    """(compiled.active(), each core module's file) in a child process."""
    script = ("import importlib, json; from kvreplay.engine import compiled; "
              "print(json.dumps([compiled.active(), [importlib.import_module("
              "f'kvreplay.engine.{m}').__file__ for m in compiled.MODULES]]))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, check=True)
    active, files = json.loads(done.stdout)
    return active, files


@built
def test_the_compiled_modules_are_extension_modules() -> None:
    """With the core built and current, every module it lists is the compiled one (none fell
    back to its source)."""
    active, files = _files(_child_env())
    assert active is True
    assert not [f for f in files if f.endswith(".py")]


@pytest.mark.parametrize("variable", ["KVREPLAY_PURE_PYTHON", "KVREPLAY_PURE_CORE"])
def test_pure_python_is_chosen_by_the_environment(variable: str) -> None:
    """KVREPLAY_PURE_PYTHON=1 (every compiled part) or KVREPLAY_PURE_CORE=1 (the core alone)
    runs every module of the core from its Python source."""
    active, files = _files(_child_env(**{variable: "1"}))
    assert active is False
    assert all(f.endswith(".py") for f in files)


def _sources(folder: Path) -> None:
    for name in compiled.MODULES:
        path = folder / compiled.source(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"NAME = {name!r}\n", encoding="utf-8")


def test_a_build_is_used_only_with_the_sources_it_was_built_from(tmp_path: Path) -> None:
    """The stamp the build writes names its sources: an edited, missing or extra module, a
    missing or malformed stamp, all mean the Python sources run (an editable checkout runs its
    edits, not a stale build)."""
    _sources(tmp_path)
    assert not compiled.built(tmp_path)  # no stamp: nothing built
    compiled.write_stamp(tmp_path, tmp_path)
    assert compiled.built(tmp_path)
    worker = tmp_path / "worker.py"
    worker.write_text("NAME = 'workeR'\n", encoding="utf-8")  # same size, another text
    assert not compiled.built(tmp_path)
    compiled.write_stamp(tmp_path, tmp_path)
    worker.unlink()
    assert not compiled.built(tmp_path)
    _sources(tmp_path)
    (tmp_path / compiled.STAMP).write_text("{not json", encoding="utf-8")
    assert not compiled.built(tmp_path)


def test_a_size_change_is_seen_without_reading_the_sources(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Start-up checks the sources' sizes first: an edit that changed one is stale without a
    CRC; equal sizes still get the CRCs (the same-size edit above); a stamp of another shape
    is stale."""
    _sources(tmp_path)
    compiled.write_stamp(tmp_path, tmp_path)
    (tmp_path / "loop.py").write_text("NAME = 'a longer loop'\n", encoding="utf-8")

    def unread(folder: Path) -> dict[str, list[int]]:
        pytest.fail("the sources were read")

    monkeypatch.setattr(compiled, "source_digests", unread)
    assert not compiled.built(tmp_path)
    (tmp_path / compiled.STAMP).write_text('{"modules": {"loop": 1}}', encoding="utf-8")
    assert not compiled.built(tmp_path)


def test_the_core_lists_engine_sources_only() -> None:
    """Every module the build compiles is an engine source (a renamed module would otherwise
    drop out of the build unnoticed, or fail it)."""
    engine = REPO / "engine"
    assert sorted(compiled.MODULES) == list(compiled.MODULES)
    assert all((engine / compiled.source(name)).is_file() for name in compiled.MODULES)


def test_the_compiled_core_is_built_where_it_must_be() -> None:
    """CI (KVREPLAY_REQUIRE_COMPILED=1 in .ci/run) installs with mypy and a C compiler: the
    core is built and current there, so the tests above ran."""
    if not os.environ.get("KVREPLAY_REQUIRE_COMPILED"):
        pytest.skip("KVREPLAY_REQUIRE_COMPILED is not set")
    assert compiled.built()


def test_a_subpackage_module_can_be_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dotted name in MODULES is a subpackage's module: its source is found under its folder
    for the stamp, and the pure-Python finder loads it from there."""
    monkeypatch.setattr(compiled, "MODULES", (*compiled.MODULES, "agentic.driver"))
    assert compiled.source("agentic.driver") == "agentic/driver.py"
    spec = compiled._Sources().find_spec("kvreplay.engine.agentic.driver")
    assert spec is not None and spec.origin == str(compiled.HERE / "agentic" / "driver.py")
    assert compiled._Sources().find_spec("kvreplay.engine.agentic.profile") is None
    assert compiled._Sources().find_spec("kvreplay.engine_other.agentic.driver") is None
    _sources(tmp_path)
    compiled.write_stamp(tmp_path, tmp_path)
    assert compiled.built(tmp_path)
    (tmp_path / "agentic" / "driver.py").write_text("NAME = 'edited driver'\n", encoding="utf-8")
    assert not compiled.built(tmp_path)


def test_a_shim_of_a_module_no_longer_compiled_is_found_stale(tmp_path: Path) -> None:
    """A build lists the extension modules that shadow a source but were not built this time
    (a module that left MODULES): those setup.py removes; the group library, the C helpers
    without a source and the shims just built stay."""
    from importlib.machinery import EXTENSION_SUFFIXES
    suffix = EXTENSION_SUFFIXES[0]
    (tmp_path / "agentic").mkdir()
    for name in ("loop", "host_timeline", "agentic/driver", "_core__mypyc", "_rowtext"):
        (tmp_path / (name + suffix)).write_bytes(b"")
    for name in ("loop", "host_timeline", "agentic/driver"):
        (tmp_path / (name + ".py")).write_text("", encoding="utf-8")
    stale = compiled.stale_binaries(tmp_path, {"loop", "_core__mypyc"})
    assert stale == sorted([tmp_path / ("host_timeline" + suffix),
                            tmp_path / "agentic" / ("driver" + suffix)])
    assert compiled.stale_binaries(tmp_path, {"loop", "host_timeline", "agentic.driver"}) == []
