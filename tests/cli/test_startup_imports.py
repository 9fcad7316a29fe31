"""What start-up imports (issue 29): a clean lint loads no engine and no jsonschema, a run loads
only the engine modules its traffic needs, and `import kvreplay` loads none of the heavy parts.
Each probe is a fresh interpreter; each also shows a module that should be there is seen, so a
broken probe cannot pass."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kvreplay
from kvreplay.schema.digest import SMALL, sha256

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "kv-router-mooncake.yaml"
HEAVY = ("jsonschema", "ruamel.yaml", "lark", "rich", "cattrs", "attrs", "kvreplay.engine",
         "kvreplay.engine.loop", "kvreplay.engine.agentic.driver", "kvreplay.compiler.model",
         "kvreplay.schema.native_model", "kvreplay.rules.syntax", "kvreplay.compiler.validate",
         "hashlib", "tempfile", "kvreplay.engine.row_text", "difflib",
         "kvreplay.compiler.number_hints", "kvreplay.trace_hints")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A rules cache, warm (compiling the rules imports lark, once)."""
    folder = tmp_path_factory.mktemp("cache")
    env = {**os.environ, "KVREPLAY_CACHE_DIR": str(folder)}
    env.pop("KVREPLAY_NO_CACHE", None)
    subprocess.run([sys.executable, "-c", "from kvreplay.rules.runner import compiled_rules; "
                    "compiled_rules()"], env=env, check=True)
    return folder


def _loaded(cache: Path, argv: list[str] | None, before: str = "") -> tuple[int, set[str]]:
    """(exit code, which of HEAVY are imported) after kvreplay's main(argv) in a fresh process
    (argv None: only `import kvreplay`), with the rules cache warm."""
    call = "code = 0" if argv is None else \
        f"from kvreplay.cli.main import main\ncode = main({argv!r})"
    probe = (f"import json, sys\n{before}\nimport kvreplay\n{call}\n"
             f"print(code, json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n")
    env = {**os.environ, "KVREPLAY_CACHE_DIR": str(cache)}
    env.pop("KVREPLAY_NO_CACHE", None)
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                          text=True, check=True, cwd=cache)
    code, names = done.stdout.strip().splitlines()[-1].split(" ", 1)
    return int(code), set(json.loads(names))


def test_import_kvreplay_loads_nothing_heavy(cache: Path) -> None:
    """`import kvreplay` loads none of the heavy modules; the probe sees one imported before."""
    assert _loaded(cache, None) == (0, set())
    assert _loaded(cache, None, before="import attrs") == (0, {"attrs"})


def test_clean_lint_loads_no_engine_no_jsonschema(cache: Path, tmp_path: Path) -> None:
    """Linting a valid config loads the config model but no engine module, no jsonschema, no
    lark (warm cache), no cattrs (the quick structuring walk), no attrs (the models are Frozen
    classes, schema/frozen.py), no rich and none of the errors' hints (difflib, number hints);
    an invalid one does load jsonschema, for its diagnostics."""
    code, names = _loaded(cache, ["lint", "--format", "concise", str(EXAMPLE)])
    assert code == 0
    assert {"kvreplay.compiler.model", "ruamel.yaml"} <= names
    assert not names & {"jsonschema", "lark", "rich", "cattrs", "attrs", "hashlib",
                        "kvreplay.engine", "kvreplay.rules.syntax", "difflib",
                        "kvreplay.compiler.number_hints"}
    bad = tmp_path / "bad.yaml"
    bad.write_text(EXAMPLE.read_text(encoding="utf-8").replace("replicas: 4", "replicas: -4"),
                   encoding="utf-8")
    code, names = _loaded(cache, ["lint", "--format", "concise", str(bad)])
    assert code == 1 and "jsonschema" in names and "kvreplay.engine" not in names


def test_run_of_a_native_spec_loads_only_what_it_replays(cache: Path, tmp_path: Path) -> None:
    """`kvreplay run` of a native spec over a one-row Mooncake trace loads the engine, but not
    ruamel (no YAML to read), jsonschema (the spec is valid), cattrs (the quick structuring
    walk), attrs (Frozen models, plain engine records), hashlib (OpenSSL: small inputs are
    hashed by schema/digest.py), the row printer and tempfile (no rows are kept) or the agentic
    modules."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(kvreplay.compile_config(EXAMPLE, matrix=False).native()),
                    encoding="utf-8")
    trace = tmp_path / "one.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 600, "output_length": 4, '
                     '"hash_ids": [0, 1]}\n', encoding="utf-8")
    argv = ["run", str(spec), "--trace", str(trace), "--no-progress", "--quiet"]
    code, names = _loaded(cache, argv)
    assert code == 0
    assert {"kvreplay.engine", "kvreplay.engine.loop", "kvreplay.schema.native_model"} <= names
    assert not names & {"ruamel.yaml", "jsonschema", "lark", "rich", "cattrs", "attrs", "hashlib",
                        "tempfile", "kvreplay.engine.row_text", "difflib",
                        "kvreplay.trace_hints", "kvreplay.engine.agentic.driver",
                        "kvreplay.compiler.model"}


@pytest.mark.parametrize("size", [0, 1, SMALL, SMALL + 1])
def test_digest_is_hashlibs_sha256(size: int) -> None:
    """schema/digest.py's sha256 (CPython's own below SMALL bytes, hashlib's beyond) gives
    hashlib's digest."""
    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    digest = sha256(size)
    digest.update(data)
    assert digest.hexdigest() == hashlib.sha256(data).hexdigest()
