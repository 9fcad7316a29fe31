"""`kvreplay explain`: every rule ID kvreplay can emit is in the catalog and explainable."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kvreplay.catalog import catalog

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("kvreplay", "compiler", "engine", "rules", "schema")
RULE_ID = re.compile(r"^[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)+$")
NOT_RULE_IDS = {"RULE-ID"}  # argparse's metavar for `explain`


def _emitted_ids() -> dict[str, str]:
    """Every string literal in the library that looks like a rule ID -> a file that holds it."""
    prefixes = {code.split("-")[0] for code in catalog()}
    found: dict[str, str] = {}
    for folder in SOURCES:
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text("utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                        and RULE_ID.match(node.value) and node.value.split("-")[0] in prefixes:
                    found.setdefault(node.value, str(path.relative_to(REPO)))
    for path in sorted((REPO / "rules").glob("*.rules")):
        for match in re.finditer(r"^rule ([A-Z0-9-]+)", path.read_text("utf-8"), re.M):
            found.setdefault(match.group(1), str(path.relative_to(REPO)))
    return found


def test_every_emitted_rule_id_is_in_the_catalog() -> None:
    """A rule ID string anywhere in the code (diagnostics, rule files) is a catalog entry."""
    emitted = _emitted_ids()
    missing = {code: where for code, where in emitted.items()
               if code not in catalog() and code not in NOT_RULE_IDS}
    assert not missing
    assert {"TRACE-JSON", "YAML-ALIAS", "WORKLOAD-VALUE", "G2-BACKEND"} <= set(emitted)


@pytest.mark.parametrize("rule_id", sorted(catalog()))
def test_every_catalog_id_is_explainable(cli: Callable[..., Any], rule_id: str) -> None:
    """`kvreplay explain` knows every catalog ID, in any case."""
    ran = cli("explain", rule_id.lower())
    assert ran.code == 0 and ran.out.startswith(rule_id), ran.err


def test_explain_unknown_rule_suggests_a_real_one(cli: Callable[..., Any]) -> None:
    """An unknown ID is a usage error whose hint names an existing ID."""
    ran = cli("explain", "TRACE-JSN")
    assert ran.code == 2 and "unknown rule ID `TRACE-JSN`" in ran.err and "`TRACE-JSON`" in ran.err
