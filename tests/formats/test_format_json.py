"""The `json` reporter: the documented shape, `Diagnostic.to_dict()` per finding, stable bytes."""

from __future__ import annotations

import json

from syrupy.assertion import SnapshotAssertion

from kvreplay.formats import FileResult
from kvreplay.formats.json import render_json
from kvreplay.schema.diagnostics import Diagnostic, Span


def test_snapshot(results: tuple[FileResult, ...], snapshot: SnapshotAssertion) -> None:
    """The JSON rendering of the representative results is pinned."""
    assert render_json(results) == snapshot


def test_shape_and_content(results: tuple[FileResult, ...]) -> None:
    """Every file appears with its findings as to_dict(); the summary counts them."""
    document = json.loads(render_json(results))
    assert sorted(document) == ["files", "summary", "version"]
    assert document["version"] == 1
    assert [f["path"] for f in document["files"]] == [r.path for r in results]
    for entry, result in zip(document["files"], results, strict=True):
        assert sorted(entry) == ["diagnostics", "path"]
        assert entry["diagnostics"] == [d.to_dict() for d in result.diagnostics]
    findings = [d for r in results for d in r.diagnostics]
    assert document["summary"] == {
        "files": len(results),
        "errors": sum(d.severity == "error" for d in findings),
        "warnings": sum(d.severity == "warning" for d in findings),
    }


def test_keys_sorted_ascii_and_newline_terminated(results: tuple[FileResult, ...]) -> None:
    """The text is ASCII, ends with a newline and equals a sorted-keys dump of itself."""
    text = render_json(results)
    assert text.isascii()
    assert text.endswith("}\n")
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"


def test_undecodable_file_names_survive() -> None:
    """A path holding a lone surrogate (undecodable bytes) is written escaped and reads back."""
    path = "bad-\udcff.yaml"
    result = FileResult(path, None, (Diagnostic("FILE-ENCODING", "error", "m", Span(path)),))
    document = json.loads(render_json([result]))
    assert document["files"][0]["path"] == path


def test_deterministic(results: tuple[FileResult, ...]) -> None:
    """The same results give the same bytes."""
    assert render_json(results) == render_json(results)
