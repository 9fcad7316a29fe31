"""Fuzz `kvreplay lint`: random bytes, random YAML and mutated valid configs never crash it."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from kvreplay.cli.main import main

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
FUZZ = settings(max_examples=80, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _load(path: Path) -> Any:
    return YAML(typ="safe", pure=True).load(path.read_text())


def _dump(data: Any) -> str:
    out = io.StringIO()
    yaml = YAML(typ="safe", pure=True)
    yaml.dump(data, out)
    return out.getvalue()


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=2**60),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12),
    st.sampled_from(["auto", "max", "vllm", "sglang", "cluster_shared", "worker_local", "fixed",
                     "1.10", "no", "8", "-1", "kv_router", "weka"]),
)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=6)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out.extend(_paths(v, prefix + (k,)))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out.extend(_paths(v, prefix + (i,)))
    return out


@st.composite
def mutated_configs(draw: st.DrawFn) -> str:
    data = _load(draw(st.sampled_from(EXAMPLES)))
    for _ in range(draw(st.integers(1, 4))):
        paths = [p for p in _paths(data) if p]
        if not paths:
            break  # every key was deleted: an empty mapping is a fine input too
        path = draw(st.sampled_from(paths))
        parent = data
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["replace", "delete", "rename", "add"]))
        last = path[-1]
        if action == "replace":
            parent[last] = draw(values)
        elif action == "delete" and isinstance(parent, dict):
            del parent[last]
        elif action == "rename" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=10))] = parent.pop(last)
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=10))] = draw(values)
    return _dump(data)


def _lint(tmp_path: Path, name: str, content: bytes,
          capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    target = tmp_path / name
    target.write_bytes(content)
    code = main(["lint", "--format", "json", str(target)])
    out, err = capsys.readouterr()
    assert code in (0, 1, 2)
    assert "internal error" not in err and "Traceback" not in err
    json.loads(out)  # the report is always complete, valid JSON
    return code, out


@FUZZ
@given(st.binary(max_size=400))
def test_random_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str], blob: bytes) -> None:
    """Arbitrary bytes as a .yaml file: a diagnostic, never a crash."""
    _lint(tmp_path, "fuzz.yaml", blob, capsys)


@FUZZ
@given(st.binary(max_size=400))
def test_random_bytes_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                              blob: bytes) -> None:
    """Arbitrary bytes as a .json file (native spec path): a diagnostic, never a crash."""
    _lint(tmp_path, "fuzz.json", b"{" + blob, capsys)


@FUZZ
@given(values)
def test_random_yaml_documents(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                               doc: Any) -> None:
    """Any YAML document, of any shape: exit 0, 1 or 2 with a full report."""
    _lint(tmp_path, "fuzz.yaml", _dump(doc).encode(), capsys)


@FUZZ
@given(mutated_configs())
def test_mutated_valid_configs(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                               text: str) -> None:
    """Valid examples with random subtrees replaced, deleted, renamed or added."""
    _lint(tmp_path, "fuzz.yaml", text.encode(), capsys)


@FUZZ
@given(st.sampled_from(EXAMPLES), st.data())
def test_mutated_native_specs(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                              example: Path, data: st.DataObject) -> None:
    """Compiled native specs with a random value replaced still lint without crashing."""
    import kvreplay

    native = kvreplay.compile_config(example, matrix=False).native()
    paths = [p for p in _paths(native) if p]
    path = data.draw(st.sampled_from(paths))
    parent: Any = native
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = data.draw(values)
    _lint(tmp_path, "spec.json", json.dumps(native).encode(), capsys)
