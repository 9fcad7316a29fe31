"""schema/sweep.schema.json, written out here (tools/gen_schemas.py writes the file).

Not walked from an attrs model like the config schema: a sweep file is mostly free-form
mappings keyed by dotted config paths and summary figure names, which the walker's layouts do
not describe. Whether a dotted path exists, and whether a figure is a summary figure, is checked
by the sweep planner (SWEEP-PATH, SWEEP-FIGURE), with positions.
"""

from __future__ import annotations

from typing import Any

from kvreplay.schema.schema_facts import MAX_NUM

S = dict[str, Any]

# Bounds that keep a sweep file (and lint) tractable; a bigger sweep is several files.
MAX_POINTS = 10_000
MAX_TRACES = 64
PATH_MAX = 4096
MAX_REJECTED = 2**53  # any count of requests a trace can hold

DEFAULT_OBJECTIVE = {"minimize": "gpu_hours"}


def _bound(op: str) -> S:
    return {"type": "number", "minimum": -MAX_NUM, "maximum": MAX_NUM,
            "description": f"The figure must be {op} this value."}


def sweep_schema() -> S:
    """The sweep file's JSON Schema."""
    path = {"type": "string", "minLength": 1, "maxLength": PATH_MAX}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://kvreplay.dev/schema/sweep.schema.json",
        "title": "kvreplay parameter sweep",
        "description": "A grid and/or a list of points over a base config, replayed on one or "
        "more traces by `kvreplay sweep` (docs/sweeps.md).",
        "type": "object",
        "properties": {
            "kind": {"const": "sweep", "description": "Marks the file as a sweep."},
            "base": {
                "description": "The config every point starts from: a path relative to this "
                "file (a YAML config or a native spec), or a config written inline.",
                "anyOf": [path, {"type": "object"}],
            },
            "traces": {
                "type": "array", "minItems": 1, "maxItems": MAX_TRACES, "items": path,
                "description": "Trace files (or Weka play folders), relative to this file; "
                "every point runs on every trace (default: the base config's own trace).",
            },
            "grid": {
                "type": "object",
                "description": "Dotted config path (as `--set` takes it) -> the values it "
                "takes; the points are the cartesian product, the first path varying slowest.",
                "additionalProperties": {"type": "array", "minItems": 1,
                                         "maxItems": MAX_POINTS},
            },
            "points": {
                "type": "array", "maxItems": MAX_POINTS,
                "description": "Explicit points after the grid's: each a mapping of dotted "
                "config path -> value ({} is the base config as it is).",
                "items": {"type": "object"},
            },
            "sla": {
                "type": "object",
                "description": "Bounds on summary figures a point must meet to be the best "
                "(on every trace), e.g. `p90_ttft_ms: {max: 200}`, and the rejected requests "
                "it may have (`max_rejected`).",
                "properties": {
                    "max_rejected": {
                        "type": "integer", "minimum": 0, "maximum": MAX_REJECTED, "default": 0,
                        "description": "Requests a point may have rejected (a prompt its KV "
                        "cache can never hold) on each trace and still meet the SLA: the "
                        "summary's `rejected_requests`. Default 0: a point that drops a "
                        "request misses the SLA.",
                    },
                },
                "additionalProperties": {
                    "type": "object", "properties": {"max": _bound("<="), "min": _bound(">=")},
                    "additionalProperties": False, "minProperties": 1,
                },
            },
            "objective": {
                "type": "object",
                "description": "The summary figure to minimize or maximize among the points "
                "that meet the SLA (default: minimize gpu_hours).",
                "properties": {
                    "minimize": {"type": "string", "description": "A summary figure."},
                    "maximize": {"type": "string", "description": "A summary figure."},
                },
                "additionalProperties": False, "minProperties": 1, "maxProperties": 1,
                "default": DEFAULT_OBJECTIVE,
            },
        },
        "required": ["kind", "base"],
        "additionalProperties": False,
    }
