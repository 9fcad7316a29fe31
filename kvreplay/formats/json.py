"""`--format json`: every checked file with its findings and a summary, keys sorted, ASCII only.

```
{"files": [{"diagnostics": [...], "path": "a.yaml"}], "summary": {"errors": 1, "files": 1,
 "warnings": 0}, "version": 1}
```
Each finding is `Diagnostic.to_dict()`. Non-ASCII text is `\\u` escaped so the bytes do not
depend on the output encoding (and undecodable file names survive as lone surrogates).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from kvreplay.formats.result import FileResult, summarize

JSON_FORMAT_VERSION = 1


def render_json(results: Sequence[FileResult]) -> str:
    """The document for these results, indented by two spaces, ending with a newline."""
    summary = summarize(results)
    document = {
        "version": JSON_FORMAT_VERSION,
        "files": [
            {"path": r.path, "diagnostics": [d.to_dict() for d in r.diagnostics]} for r in results
        ],
        "summary": {
            "files": summary.files,
            "errors": summary.errors,
            "warnings": summary.warnings,
        },
    }
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=True) + "\n"
