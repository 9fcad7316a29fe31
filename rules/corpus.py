"""The rule case corpus: rules/cases/<RULE-ID>/{fail,pass}-*.{yaml,json}.

`explain` shows one failing and one passing case per rule; the tests run all of them. The cases
ship as package data, so an installed wheel can show them too.
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
