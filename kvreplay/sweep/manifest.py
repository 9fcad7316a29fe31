"""sweep.json: what a results folder was made from (the sweep file, the base config, the traces,
the kvreplay version), so that the folder can be rendered later without the sweep file.

Like every output of a sweep it holds no wall time, no executor and no absolute path: the same
sweep gives the same bytes whichever executor ran it, fresh or resumed."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from typing import Any

from kvreplay.sweep.model import SweepPlan
from kvreplay.sweep.results import Row

MANIFEST = "sweep.json"
MANIFEST_VERSION = 1


def shown_path(path: str) -> str:
    """A path as given when relative (normalized), its file name when absolute."""
    return os.path.basename(path) if os.path.isabs(path) else os.path.normpath(path)


def manifest(plan: SweepPlan, rows: Sequence[Row],
             digests: Mapping[str, str]) -> dict[str, Any]:
    """sweep.json's content; the traces (label and content digest) as the rows name them, and
    the digest of each report the rows name, recorded when the report was written."""
    from kvreplay import __version__

    traces: dict[tuple[Any, Any], None] = {}
    for row in rows:
        if row["trace"] is not None:
            traces.setdefault((row["trace"], row["trace_digest"]), None)
    digest = (hashlib.sha256(plan.text.encode("utf-8")).hexdigest()[:16]
              if plan.text is not None else None)
    return {"format": MANIFEST_VERSION, "kvreplay_version": __version__,
            "sweep": shown_path(plan.file), "sweep_digest": digest,
            "base_digest": plan.base_digest, "overrides": list(plan.overrides),
            "traces": [{"trace": label, "digest": d} for label, d in traces],
            "reports": {r["report"]: digests[r["report"]] for r in rows
                        if r["report"] is not None and r["report"] in digests}}
