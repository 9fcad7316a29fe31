"""The built wheel installs everything under the single `kvreplay` import namespace."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # without the mypyc engine core (minutes of C compilation; tests/engine/test_compiled_core.py
    # checks the core where the install built it)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "--no-build-isolation",
         "-q", "-w", str(out)],
        check=True, capture_output=True, timeout=300, env={**os.environ, "KVREPLAY_NO_MYPYC": "1"},
    )
    (built,) = out.glob("kvreplay-*.whl")
    return built


@pytest.fixture(scope="module")
def wheel_files(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def test_only_the_kvreplay_package_is_top_level(wheel_files: list[str]) -> None:
    """No `compiler`, `engine`, `rules` or `schema` module lands at the top of site-packages."""
    tops = {name.split("/", 1)[0] for name in wheel_files}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"kvreplay"}


def test_top_level_folders_install_as_subpackages(wheel_files: list[str]) -> None:
    """schema/, compiler/, engine/ and rules/ become kvreplay.schema, .compiler, .engine, .rules."""
    for package in ("compiler", "engine", "rules", "schema", "cli", "formats", "compare"):
        assert f"kvreplay/{package}/__init__.py" in wheel_files


def test_package_data_ships(wheel_files: list[str]) -> None:
    """The JSON Schemas, rule files and the typing marker are in the wheel."""
    assert "kvreplay/schema/config.schema.json" in wheel_files
    assert "kvreplay/schema/native.schema.json" in wheel_files
    assert "kvreplay/py.typed" in wheel_files
    assert any(n.startswith("kvreplay/rules/") and n.endswith(".rules") for n in wheel_files)
    assert "kvreplay/rules/cases/G2-BACKEND/fail-sglang.yaml" in wheel_files  # for explain


@pytest.mark.parametrize("name", ["_rowtext", "_mtprng"])
def test_the_compiled_extensions_ship_with_their_stubs(wheel_files: list[str], name: str) -> None:
    """Each optional extension (the row printer, the MTP stream) is in the wheel, under
    kvreplay.engine, when a C compiler built it (as it built the one these tests import), and
    its type stub always."""
    import importlib.util

    assert f"kvreplay/engine/{name}.pyi" in wheel_files
    built = [n for n in wheel_files if n.startswith(f"kvreplay/engine/{name}.")
             and n.endswith((".so", ".pyd"))]
    assert len(built) == (importlib.util.find_spec(f"kvreplay.engine.{name}") is not None)


def test_a_wheel_without_the_compiled_core_ships_the_engine_as_python(
        wheel_files: list[str]) -> None:
    """KVREPLAY_NO_MYPYC=1 at build time: the engine's modules ship as sources, with no
    compiled module or stamp (engine/compiled.py), so the wheel runs them."""
    from kvreplay.engine import compiled

    engine = [n for n in wheel_files if n.startswith("kvreplay/engine/")]
    assert all(f"kvreplay/engine/{compiled.source(name)}" in engine for name in compiled.MODULES)
    assert f"kvreplay/engine/{compiled.STAMP}" not in engine
    binaries = [n.removeprefix("kvreplay/engine/").split(".")[0].replace("/", ".")
                for n in engine if n.endswith((".so", ".pyd"))]
    assert not [n for n in binaries if n in compiled.MODULES or n.endswith("__mypyc")]


def test_html_report_assets_ship(wheel_files: list[str]) -> None:
    """The HTML report's inlined library (with its license), script and style are in the wheel."""
    for name in ("uPlot.iife.min.js", "uPlot.min.css", "uPlot.LICENSE", "report.js",
                 "report.css"):
        assert f"kvreplay/html/assets/{name}" in wheel_files


def test_console_script_is_declared(wheel: Path, wheel_files: list[str]) -> None:
    """The wheel declares the `kvreplay` console script pointing at the CLI entry."""
    name = next(n for n in wheel_files if n.endswith(".dist-info/entry_points.txt"))
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read(name).decode()
    assert "kvreplay = kvreplay.cli.main:entry" in text
