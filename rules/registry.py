"""What each matrix rule is, for SARIF rule lists and --select/--ignore: read without lark.

The generated rule module (loader.py) carries every rule's ID, severity, title and rationale, so
listing them costs no parsing.
"""

from __future__ import annotations

import attrs

from kvreplay.rules.loader import shipped_module


@attrs.frozen
class RuleInfo:
    id: str
    severity: str
    title: str  # the short description
    rationale: str  # the full description
    file: str
    line: int


def rule_infos() -> dict[str, RuleInfo]:
    """Rule ID -> RuleInfo, in rule-file order."""
    return {row[0]: RuleInfo(*row) for row in shipped_module()["CATALOG"]}


def catalog() -> dict[str, tuple[str, str]]:
    """Rule ID -> (short description, severity), in rule-file order."""
    return {rule_id: (info.title, info.severity) for rule_id, info in rule_infos().items()}
