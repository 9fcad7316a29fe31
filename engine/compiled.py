"""The optional compiled engine core: which modules mypyc compiles, and whether they are used.

setup.py compiles MODULES with mypyc when it can (mypy importable at build time, a C compiler,
CPython, KVREPLAY_NO_MYPYC unset) into one shared library beside them, and writes STAMP (the
size and CRC-32 of each compiled source). Importing kvreplay.engine calls `select()`: the
compiled modules are used only when all of them were built from the sources beside them (sizes
compared first: an edit that changed one is seen without reading the sources) and
KVREPLAY_PURE_PYTHON is unset (KVREPLAY_PURE_CORE=1 leaves only this core unused; the test
suite's unit tests set it, tests/conftest.py). Otherwise a finder loads the Python source of
each instead, all or none (compiled modules call each other directly, so one stale module makes
the whole core stale): an editable checkout whose engine was edited after its build runs its
edits, slower, until it is rebuilt (`pip install -e .` again). Both paths give the same bytes
(tests/engine/test_compiled_core.py, tools/core_parity.py).
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import ModuleSpec
from importlib.util import spec_from_file_location
from pathlib import Path
from types import ModuleType
from typing import Any

# The modules the profiles of bench/bench_engine.py's regimes spend their time in (the event
# loop, passes and admission, pools, timing, identities, the G2 tier, P/D, the router, records
# and the report's summary, MTP speculation and its stretches), compiled as one group (calls
# between them stay native). A class of an interpreted module cannot subclass a compiled
# class: trtllm.py (TrtllmRank(Rank)) and radix.py (RadixCache(EventLog)) are in. A dotted
# name would be a module of a subpackage (agentic.driver: kvreplay/engine/agentic/driver.py).
# Measured and left out (engine.md, "Agentic speed, issue 29"): the agentic driver, its
# transcript and the Weka reading compiled gave reports byte-identical to the sources' but no
# CPU gain on the agentic bench (the reading about 0.1 s cheaper, the replay no cheaper).
MODULES = (
    "block_hash", "deployment", "events", "handoff", "host_client", "host_pool",
    "host_runtime", "host_transfer", "identity", "kv_index", "ledger", "loop", "metrics",
    "mtp_stretch", "pool", "radix", "records", "report", "router", "router_queue", "scheduler",
    "sequence", "sglang", "simtime", "sketch", "speculation", "timing", "trtllm", "worker",
)
PACKAGE = "kvreplay.engine"
GROUP = "kvreplay.engine._core"  # the shared library: kvreplay/engine/_core__mypyc.*.so
STAMP = "_core.json"
HERE = Path(__file__).resolve().parent


def source(name: str) -> str:
    """A compiled module's source file, relative to the engine folder."""
    return name.replace(".", "/") + ".py"


def source_digests(folder: Path) -> dict[str, list[int]]:
    """(size, CRC-32) of each compiled module's source in `folder`, what STAMP records: an edit
    since the build is what it must tell apart (zlib: cheaper at start-up than hashlib)."""
    import zlib

    found = {}
    for name in MODULES:
        data = (folder / source(name)).read_bytes()
        found[name] = [len(data), zlib.crc32(data)]
    return found


def write_stamp(sources: Path, target: Path) -> Path:
    """STAMP in `target` (where the compiled core was built) for the sources in `sources`."""
    import json

    stamp = target / STAMP
    stamp.write_text(json.dumps({"modules": source_digests(sources)}, indent=1) + "\n",
                     encoding="utf-8")
    return stamp


def built(folder: Path = HERE) -> bool:
    """Whether the compiled core in `folder` was built from exactly the sources beside it."""
    try:
        text = (folder / STAMP).read_text(encoding="utf-8")
    except OSError:
        return False  # not built (the usual case without a compiler: nothing more to import)
    import json

    try:
        stamp = json.loads(text)
        recorded = stamp["modules"]
        if sorted(recorded) != sorted(MODULES) or any(
                (folder / source(name)).stat().st_size != recorded[name][0] for name in MODULES):
            return False  # an edit that changed a size: no source read (the CRCs: 0.4 ms)
        return bool(stamp == {"modules": source_digests(folder)})
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return False


def stale_binaries(folder: Path, built: set[str]) -> list[Path]:
    """Extension modules in `folder` (and its subfolders) that shadow a Python source beside
    them but were not built this time: the shims of modules that left MODULES. The import
    system tries extension modules before sources, so one left behind would replace the
    module's source by an earlier build's shim (whose group no longer holds it)."""
    from importlib.machinery import EXTENSION_SUFFIXES
    found = []
    for suffix in EXTENSION_SUFFIXES:
        for path in sorted(folder.rglob("*" + suffix)):
            relative = path.relative_to(folder).as_posix()[:-len(suffix)]
            name = relative.replace("/", ".")
            if name not in built and (folder / (relative + ".py")).is_file():
                found.append(path)
    return sorted(set(found))


class _Sources:
    """A meta path finder: the compiled modules from their Python sources (the pure-Python
    engine)."""

    def find_spec(self, fullname: str, path: Any = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        name = fullname[len(PACKAGE) + 1:]
        if not fullname.startswith(PACKAGE + ".") or name not in MODULES:
            return None
        return spec_from_file_location(fullname, HERE / source(name))


_state: list[bool] = []


def select() -> bool:
    """Decide once per process, before any compiled module is imported: True when the
    compiled core is in use; otherwise the finder loads their sources."""
    if not _state:
        use = not (os.environ.get("KVREPLAY_PURE_PYTHON") or os.environ.get("KVREPLAY_PURE_CORE")
                   ) and built()
        if not use:
            sys.meta_path.insert(0, _Sources())
        _state.append(use)
    return _state[0]


def active() -> bool:
    """Whether this process runs the compiled core (its modules are extension modules)."""
    module = sys.modules.get(f"{PACKAGE}.loop")
    if module is None:
        return select()
    return not str(getattr(module, "__file__", "")).endswith(".py")
