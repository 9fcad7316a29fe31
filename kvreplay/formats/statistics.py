"""`lint --statistics`: how many findings each rule has, most frequent first (ties by rule ID).

```
3  SCHEMA-UNKNOWN-KEY  error
1  G2-SHARED-LINK      warning
```
As JSON (`--format json`): `[{"count": 3, "rule": "SCHEMA-UNKNOWN-KEY", "severity": "error"}]`.
A rule whose findings have several severities counts each severity on its own row.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence

from kvreplay.formats.result import FileResult
from kvreplay.schema.diagnostics import SEVERITY_ORDER


def count_rules(results: Sequence[FileResult]) -> list[tuple[str, str, int]]:
    """(rule, severity, count) rows sorted by count (descending), rule, then severity."""
    counts = Counter((d.rule, d.severity) for r in results for d in r.diagnostics)
    return sorted(((rule, severity, n) for (rule, severity), n in counts.items()),
                  key=lambda row: (-row[2], row[0], SEVERITY_ORDER.get(row[1], 9)))


def render_statistics(results: Sequence[FileResult], *, as_json: bool = False) -> str:
    rows = count_rules(results)
    if as_json:
        document = [{"rule": rule, "severity": severity, "count": n} for rule, severity, n in rows]
        return json.dumps(document, indent=2, sort_keys=True) + "\n"
    if not rows:
        return ""
    count_width = max(len(str(n)) for _, _, n in rows)
    rule_width = max(len(rule) for rule, _, _ in rows)
    return "".join(f"{n:>{count_width}}  {rule:<{rule_width}}  {severity}\n"
                   for rule, severity, n in rows)
