"""The C and pure-Python YAML composers give the same data, positions and findings."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvreplay.compiler import yaml_loader

REPO = Path(__file__).resolve().parents[2]
FILES = sorted((REPO / "examples").glob("*.yaml")) + sorted(
    p for folder in (REPO / "tests" / "cases", REPO / "rules" / "cases")
    for p in folder.rglob("*.yaml"))


def utf8_text(path: Path) -> str | None:
    """The file's text, or None for the reading cases that are not UTF-8 on purpose."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None


TEXTS = {path: text for path in FILES if (text := utf8_text(path)) is not None}


@pytest.mark.parametrize("path", TEXTS, ids=lambda p: str(p.relative_to(REPO)))
def test_c_and_pure_composers_agree(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading with the C extension and with the pure parser yields identical results."""
    text = TEXTS[path]
    fast = yaml_loader.load_yaml(text, "x.yaml")
    original = yaml_loader._compose
    monkeypatch.setattr(yaml_loader, "_compose", lambda t, pure: original(t, pure=True))
    slow = yaml_loader.load_yaml(text, "x.yaml")
    assert fast.data == slow.data
    assert fast.source.values == slow.source.values
    assert fast.source.keys == slow.source.keys
    assert fast.diagnostics == slow.diagnostics
