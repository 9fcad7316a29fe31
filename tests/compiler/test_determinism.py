"""Compiling is deterministic: same bytes across processes and hash seeds, and idempotent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import kvreplay

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


def _compile_in_subprocess(path: Path, seed: str) -> bytes:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    done = subprocess.run(
        [sys.executable, "-m", "kvreplay", "compile", "--no-matrix", str(path)],
        capture_output=True, env=env, check=True, timeout=120,
    )
    return done.stdout


def test_bytes_identical_across_hash_seeds() -> None:
    """Every example compiles to identical bytes under PYTHONHASHSEED 0, 1 and random."""
    for path in EXAMPLES:
        outputs = {_compile_in_subprocess(path, seed) for seed in ("0", "1", "random")}
        assert len(outputs) == 1, path.name
        assert outputs.pop().endswith(b"}\n")


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_compiling_the_compiled_json_is_identity(path: Path, tmp_path: Path) -> None:
    """compile(compiled) == compiled: a native spec re-emits canonically unchanged."""
    first = kvreplay.compile_config(path, matrix=False).emitted()
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(first, encoding="utf-8")
    again = kvreplay.compile_config(spec_file, matrix=False)
    assert again.kind == "native"
    assert again.emitted() == first


def test_canonical_text_format() -> None:
    """Sorted keys, 2-space indent, one trailing newline, floats written as floats."""
    text = kvreplay.compile_config(EXAMPLES[0], matrix=False).emitted()
    assert text.endswith("}\n") and not text.endswith("\n\n")
    assert "\r" not in text and "\t" not in text
    assert '\n  "spec": {' in text
    assert "NaN" not in text and "Infinity" not in text
