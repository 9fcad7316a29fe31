"""The optional compiled parts (CPython only): the row printer (engine/_rowtext.c), the MTP
random stream (engine/_mtprng.c) and the engine core compiled by mypyc (engine/compiled.py
lists its modules). Without a C compiler (or without mypy at build time, for the core) the
build goes on: kvreplay.engine.row_text prints every row in Python, kvreplay.engine.mtp_rng
draws in Python and the engine runs its Python sources (the same bytes, slower).
KVREPLAY_NO_MYPYC=1 at build time leaves the mypyc core out (about 1.5 CPU minutes of C
compilation); KVREPLAY_PURE_PYTHON=1 at run time leaves every compiled part unused."""

import importlib.util
import os
import platform
import shutil
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

REPO = Path(__file__).resolve().parent


def _load(name: str, path: Path):  # a module by its path (nothing is installed yet)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CORE = _load("_kvreplay_compiled", REPO / "engine" / "compiled.py")


def core_extensions() -> list[Extension]:
    """The mypyc-compiled engine core (one shared library and a shim per module), or none."""
    if os.environ.get("KVREPLAY_NO_MYPYC") or platform.python_implementation() != "CPython":
        return []
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(os.environ.get("CC", compiler).split()[0]) is None:
        print("setup.py: no C compiler: the engine core stays Python")
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        print("setup.py: mypy (mypyc) is not installed: the engine core stays Python")
        return []
    package_tree = _load("_kvreplay_package_tree", REPO / "tools" / "package_tree.py")
    tree = REPO / "build" / "mypyc-src"
    if tree.exists():
        for entry in sorted(tree.rglob("*"), reverse=True):
            entry.unlink() if entry.is_symlink() or entry.is_file() else entry.rmdir()
    tree.mkdir(parents=True, exist_ok=True)
    package_tree.stage(tree)
    paths = [str(tree / "kvreplay" / "engine" / CORE.source(name)) for name in CORE.MODULES]
    try:
        extensions = mypycify(paths, group_name=CORE.GROUP,
                              target_dir=str(REPO / "build" / "mypyc"))
    except (Exception, SystemExit) as error:  # a source mypyc refuses: the core stays Python
        print(f"setup.py: mypyc could not compile the engine core ({error}): it stays Python")
        return []
    for extension in extensions:
        extension.optional = True
    return extensions


class BuildExt(build_ext):
    """build_ext that stamps a complete compiled core with its sources' digests (engine/
    compiled.py uses the core only when the stamp matches the sources beside it)."""

    def run(self) -> None:
        super().run()
        names = {e.name for e in self.extensions}
        core = [f"{CORE.PACKAGE}.{name}" for name in CORE.MODULES] + [f"{CORE.GROUP}__mypyc"]
        stamp = Path(self.get_ext_fullpath(core[-1])).parent / CORE.STAMP
        for stale in CORE.stale_binaries(stamp.parent, {n[len(CORE.PACKAGE) + 1:] for n in names}):
            print(f"setup.py: removing {stale} (no longer compiled: it would shadow its source)")
            stale.unlink()
        if not set(core) <= names:  # not built this time: no earlier build's binaries ship
            for path in [stamp, *(Path(self.get_ext_fullpath(name)) for name in core)]:
                path.unlink(missing_ok=True)
            return
        if all(Path(self.get_ext_fullpath(name)).exists() for name in core):
            CORE.write_stamp(REPO / "engine", stamp.parent)
            print(f"setup.py: the compiled engine core is built ({stamp})")
        elif stamp.exists():
            stamp.unlink()


extensions = []
if platform.python_implementation() == "CPython":
    extensions = [Extension("kvreplay.engine._rowtext", ["engine/_rowtext.c"], optional=True),
                  Extension("kvreplay.engine._mtprng", ["engine/_mtprng.c"], optional=True),
                  *core_extensions()]
sys.stdout.flush()
setup(ext_modules=extensions, cmdclass={"build_ext": BuildExt})
