"""Shared test fixtures: repository paths, the vendored Mooncake trace slices, and the reference
engine switch."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

# The reference engine logs every request at INFO unless told otherwise.
os.environ.setdefault("DYN_LOG", "error")
# The suite's unit tests run the engine's Python sources: their test doubles (duck-typed hosts,
# records holding values of other types, __slots__ introspection, weak references) are refused
# by the compiled core's native classes. The compiled core is checked end to end, report bytes
# against the sources, by tests/engine/test_compiled_core.py (in children without this).
os.environ.setdefault("KVREPLAY_PURE_CORE", "1")

# Property tests are reproducible by default (`pytest`, CI): each draws the same examples on
# every run and machine (a seed from the test itself, no example database), so a landing never
# fails at random. `pytest --hypothesis-profile=explore` draws new random examples and keeps
# failures in .hypothesis/ to replay them; a failure found that way becomes an explicit
# @example or a regression test. The examples follow hypothesis' version, pinned in the test
# extra for that reason.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile("ci")

# Under pytest-xdist (`pytest -n auto`, the README's test command) the tests of one of these
# files run on one worker, so that what they share is set up once: the local Ray instance and
# the sweeps the Ray tests compare against, the small sweep, the browser, the built wheel. Every
# other test goes to whichever worker is free. (A scheduler rather than `xdist_group` marks:
# xdist 3.8 renames node ids for those, which pytest 9.2's node ids no longer allow.)
XDIST_GROUPS = {
    "tests/sweep/test_sweep_ray.py": "sweep-runs",
    "tests/sweep/test_sweep_run.py": "sweep-runs",
    "tests/html/test_sweep_page.py": "small-sweep",
    "tests/cli/test_sweep_html.py": "small-sweep",
    "tests/html/test_html_browser.py": "browser",
    "tests/packaging/test_wheel_layout.py": "wheel",
}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist load` (xdist's default with -n), with the files above as one unit each."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Grouped(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return XDIST_GROUPS.get(nodeid.split("::", 1)[0], nodeid)

    return Grouped(config, log)

REPO = Path(__file__).resolve().parent.parent
# Leading rows of the Mooncake FAST'25 traces (Apache-2.0), see tests/cases/mooncake/README.md.
MOONCAKE = REPO / "tests" / "cases" / "mooncake"


def unpack_slice(name: str, factory: pytest.TempPathFactory) -> Path:
    """The vendored slice `name` (.jsonl.gz) as a plain JSONL file, for readers that take paths."""
    path = factory.mktemp("mooncake") / f"{name}.jsonl"
    with gzip.open(MOONCAKE / f"{name}.jsonl.gz", "rb") as packed, path.open("wb") as plain:
        shutil.copyfileobj(packed, plain)
    return path


@pytest.fixture(scope="session")
def conversation_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first 2,000 rows of the Mooncake conversation trace."""
    return unpack_slice("conversation_trace-head2000", tmp_path_factory)


@pytest.fixture(scope="session")
def synthetic_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first 1,000 rows of the Mooncake synthetic trace."""
    return unpack_slice("synthetic_trace-head1000", tmp_path_factory)


class JsonSnapshot(SingleFileSnapshotExtension):
    """Snapshots stored as exact .json text (compiled specs, canonical reports)."""

    _write_mode = WriteMode.TEXT
    file_extension = "json"


@pytest.fixture
def json_snapshot(snapshot):  # type: ignore[no-untyped-def]
    return snapshot.use_extension(JsonSnapshot)


@pytest.fixture(scope="session")
def conversation_2000(conversation_trace: Path) -> tuple[list[dict[str, Any]], Path]:
    """The first 2,000 rows of the conversation trace, parsed and as a JSONL file."""
    with conversation_trace.open() as f:
        rows = [json.loads(line) for line in f]
    assert len(rows) == 2000
    return rows, conversation_trace


SWEEP_SLICE = REPO / "tests" / "data" / "sweep" / "mooncake-conversation-2000.jsonl"
# 2 x 2 grid points over the KV-router example's deployment (copied beside the sweep file, so
# that the sweep file's bytes do not depend on where the tests run), then one the support matrix
# refuses (G2-BACKEND); the SLA splits the points that ran. Small on purpose.
SMALL_SWEEP = """\
kind: sweep
base: base.yaml
traces: [trace-200.jsonl]
grid:
  engine.workers.aggregated.parallelism.replicas: [1, 2]
  router.policy: [round_robin, kv_router]
points:
  - engine.backend: sglang
    engine.workers.aggregated.kv_cache.host_offload: {num_host_blocks: 4000}
sla:
  p90_ttft_ms: {max: 300}
"""


@pytest.fixture(scope="session")
def small_sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """SMALL_SWEEP over the first 200 rows of the sweep slice, run once with `--html` on one
    local process: (sweep file, results folder holding sweep.html)."""
    from kvreplay.cli.main import main

    folder = tmp_path_factory.mktemp("small-sweep")
    lines = SWEEP_SLICE.read_text(encoding="utf-8").splitlines(keepends=True)[:200]
    (folder / "trace-200.jsonl").write_text("".join(lines), encoding="utf-8")
    shutil.copy(REPO / "examples" / "kv-router-mooncake.yaml", folder / "base.yaml")
    sweep = folder / "sweep.yaml"
    sweep.write_text(SMALL_SWEEP, encoding="utf-8")
    out = folder / "results"
    code = main(["sweep", str(sweep), "-o", str(out), "-j", "1", "--html", "--no-progress",
                 "-q"])
    assert code == 0 and (out / "sweep.html").is_file()
    return sweep, out
