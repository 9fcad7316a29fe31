"""Every lint format over the whole invalid-case corpus, through the CLI: pinned and valid."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from kvreplay.cli.main import main

REPO = Path(__file__).resolve().parents[2]
CORPUS = sorted(p.relative_to(REPO).as_posix()
                for p in (REPO / "tests" / "cases" / "invalid").iterdir())
SARIF_SCHEMA = REPO / "tests" / "cases" / "sarif" / "sarif-schema-2.1.0.json"


def _lint(fmt: str, monkeypatch: pytest.MonkeyPatch,
          capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    code = main(["lint", "--no-color", "--format", fmt, "--root", ".", *CORPUS])
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err
    return code, out


def _rules_shape(out: str) -> str:
    """The SARIF log with each rule cut to one line (ID, level, precision, tags, help anchor) and
    the distinct key sets of the rules: the catalog's text is pinned elsewhere (one full entry
    in test_format_sarif_rules, every entry's help checked in tests/rules/test_rule_docs.py)."""
    log = json.loads(out)
    driver = log["runs"][0]["tool"]["driver"]
    shapes = {(tuple(sorted(r)), tuple(sorted(r.get("help", {})))) for r in driver["rules"]}
    driver["rule_shapes"] = [{"keys": list(keys), "help": list(help)} for keys, help in
                             sorted(shapes)]
    driver["rules"] = [" ".join([r["id"], r["defaultConfiguration"]["level"],
                                 r["properties"]["precision"], ",".join(r["properties"]["tags"]),
                                 r["helpUri"].rsplit("/", 1)[-1]]) for r in driver["rules"]]
    return json.dumps(log, indent=2, sort_keys=True, ensure_ascii=True) + "\n"


@pytest.mark.parametrize("fmt", ["text", "concise", "json", "sarif", "github"])
def test_corpus_output_is_pinned(fmt: str, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str], snapshot: Any) -> None:
    """The output of each format over the corpus equals its snapshot (exit 2: unreadable files);
    SARIF rules are pinned by shape, not by their help text."""
    code, out = _lint(fmt, monkeypatch, capsys)
    assert code == 2
    # SARIF names the repository root as an absolute URI: pin it independently of the checkout.
    root = REPO.as_uri() + "/"
    assert fmt != "sarif" or root in out
    out = out.replace(root, "file:///REPO/")
    assert (_rules_shape(out) if fmt == "sarif" else out) == snapshot


def test_corpus_sarif_validates(monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    """The corpus SARIF validates against the official 2.1.0 schema, with stable rule IDs."""
    _, out = _lint("sarif", monkeypatch, capsys)
    log = json.loads(out)
    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    jsonschema.validators.validator_for(schema)(schema).validate(log)
    (run,) = log["runs"]
    rule_ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert rule_ids == sorted(rule_ids)
    assert {"G2-BACKEND", "SCHEMA-UNKNOWN-KEY", "YAML-DUPLICATE-KEY"} <= set(rule_ids)
    uris = {loc["physicalLocation"]["artifactLocation"]["uri"]
            for result in run["results"] for loc in result["locations"]}
    assert uris and all(u.startswith("tests/cases/invalid/") for u in uris)
    for result in run["results"]:
        assert rule_ids[result["ruleIndex"]] == result["ruleId"]


def test_corpus_github_lines_round_trip(monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Each github line of the corpus parses back to file, line, col and a rule title."""
    _, out = _lint("github", monkeypatch, capsys)
    parsed = 0
    for line in out.splitlines():
        command, _, rest = line.partition(" ")
        assert command in ("::error", "::warning", "::notice")
        props, _, message = rest.partition("::")
        fields = dict(p.split("=", 1) for p in props.split(","))
        assert fields["file"].startswith("tests/cases/invalid/")
        assert fields["title"] and message
        parsed += 1
    assert parsed >= len(CORPUS)
