"""The matrix rendered from the rule files, the catalog, `explain`, and the spec's rule IDs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kvreplay.explainer import explain
from kvreplay.rules import catalog, render_matrix, rule_infos
from kvreplay.rules.corpus import cases
from kvreplay.rules.loader import shipped_ruleset

REPO = Path(__file__).resolve().parents[2]
# The founding specification's table (rule IDs are a public contract), vendored.
SPEC_MATRIX = REPO / "tests" / "cases" / "spec" / "support-matrix.md"


def spec_rows() -> dict[str, str]:
    """Rule ID -> verdict column of the specified support-matrix table."""
    rows = {}
    for line in SPEC_MATRIX.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and re.fullmatch(r"[A-Z][A-Z0-9]*(-[A-Z0-9]+)+", cells[0]):
            rows[cells[0]] = cells[2]
    assert rows, SPEC_MATRIX
    return rows


def test_docs_matrix_is_up_to_date() -> None:
    """docs/support-matrix.md is exactly the rendered matrix (regenerate: `kvreplay matrix`)."""
    rendered = render_matrix("markdown")
    on_disk = (REPO / "docs" / "support-matrix.md").read_text(encoding="utf-8")
    assert on_disk == rendered, (
        "docs/support-matrix.md is stale: run `python -m kvreplay.rules.matrix > "
        "docs/support-matrix.md`")


def test_every_spec_row_is_a_rule_with_its_severity() -> None:
    """Every ID of the written support matrix is a rule, with the severity its verdict names."""
    rows = spec_rows()
    infos = rule_infos()
    assert sorted(set(rows) - set(infos)) == []
    for rule_id, verdict in rows.items():
        assert verdict.split(":")[0].split(";")[0].strip() == infos[rule_id].severity, rule_id


# Rules kvreplay added to the spec's families (hostile-input bounds, not support questions).
OWN_RULES = frozenset({"TOPO-SIZE"})


def test_rules_beyond_the_spec_are_traffic_rules() -> None:
    """New IDs are only kvreplay's own families (TRAFFIC-*, BACKEND-*, HYBRID-*, SCALE-*: its
    scaling policies) and its own bounds (OWN_RULES): no row was renamed."""
    extra = sorted(set(rule_infos()) - set(spec_rows()))
    assert extra and all(i.startswith(("TRAFFIC-", "BACKEND-", "HYBRID-", "SCALE-"))
                         or i in OWN_RULES
                         for i in extra)


def test_markdown_has_one_row_and_anchor_per_rule() -> None:
    """Each rule appears once as a table row with a lower-case anchor (SARIF help links)."""
    text = render_matrix("markdown")
    for rule_id in catalog():
        assert text.count(f'<a id="{rule_id.lower()}"></a>{rule_id} |') == 1


def test_json_matrix_lists_every_rule_with_its_checks() -> None:
    """The JSON matrix holds every rule once, in the same order as the catalog."""
    document = json.loads(render_matrix("json"))
    ids = [r["id"] for c in document["concerns"] for r in c["rules"]]
    assert ids == list(catalog())
    assert all(r["checks"] and r["checks"][0]["when"]
               for c in document["concerns"] for r in c["rules"])
    assert render_matrix("json") == render_matrix("json")


def test_unknown_matrix_format_is_rejected() -> None:
    """Only markdown and json are rendered."""
    with pytest.raises(ValueError, match="unknown matrix format"):
        render_matrix("html")  # type: ignore[arg-type]


def test_catalog_from_the_cache_matches_the_parsed_rules() -> None:
    """The fast catalog (generated module) agrees with the rule files' syntax tree."""
    parsed = {r.id: (r.title, r.severity) for r in shipped_ruleset().rules}
    assert catalog() == parsed
    assert list(catalog()) == list(parsed)


def test_explain_shows_rule_rationale_and_examples() -> None:
    """`explain` gives the title, the rationale, the rule text and both examples with findings."""
    text = explain("G2-SCOPE")
    assert text is not None
    info = rule_infos()["G2-SCOPE"]
    assert text.startswith(f"G2-SCOPE (error, g2): {info.title}\n")
    assert 'when r.host_offload.scope == "worker_local"' in text
    fail, passing = cases("G2-SCOPE", "fail")[0], cases("G2-SCOPE", "pass")[0]
    assert f"Failing example (rules/cases/G2-SCOPE/{fail.name})" in text
    assert f"Passing example (rules/cases/G2-SCOPE/{passing.name})" in text
    assert "error G2-SCOPE role `aggregated`: host_offload.scope `worker_local`" in text
    assert "reports nothing." in text


def test_explain_unknown_rule_is_none() -> None:
    """An unknown ID has no explanation (the CLI exits 2)."""
    assert explain("G2-NOPE") is None


@pytest.mark.parametrize("rule_id", ["NATIVE-LAYOUT-ID", "TOPO-ROLES", "POOL-CAPACITY"])
def test_explain_works_for_native_and_multi_check_rules(rule_id: str) -> None:
    """Rules whose examples are native JSON or which have several checks are explained too."""
    text = explain(rule_id)
    assert text is not None and f"error {rule_id} " in text
