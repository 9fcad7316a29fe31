"""The rule case corpus: rules/cases/<RULE-ID>/{fail,pass}-*.{yaml,json}.

Support-matrix rules and the built-in codes a config can show (YAML-*, SCHEMA-*, ...) have
cases. `explain` and SARIF's rule help show one failing and one passing case per ID (`example`);
the tests run all of them. The cases ship as package data, so an installed wheel can show them.
"""

from __future__ import annotations

from pathlib import Path

CASES_DIR = Path(__file__).resolve().parent / "cases"
SUFFIXES = (".yaml", ".yml", ".json")


def cases(rule_id: str, kind: str) -> list[Path]:
    """The `kind` ("fail" or "pass") cases of a rule, sorted by file name."""
    folder = CASES_DIR / rule_id
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.iterdir()
                   if p.name.startswith(f"{kind}-") and p.suffix in SUFFIXES),
                  key=lambda p: p.name)


def all_cases() -> list[Path]:
    if not CASES_DIR.is_dir():
        return []
    return sorted((p for p in CASES_DIR.glob("*/*") if p.suffix in SUFFIXES),
                  key=lambda p: (p.parent.name, p.name))


def example(rule_id: str, kind: str) -> Path | None:
    """The case `explain` and SARIF show: the first YAML case by name (configs are YAML), else
    the first case."""
    found = cases(rule_id, kind)
    yaml = [p for p in found if p.suffix in (".yaml", ".yml")]
    return (yaml or found)[0] if found else None
