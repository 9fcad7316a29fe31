"""The stable diagnostic codes that are not support-matrix rules (those live in rules/*.rules).

Codes are a public contract: users suppress, grep and link them. Keep them; add new ones; never
reuse a retired code. Each code carries its default severity (every emitter uses it, a test
checks) and its fix; its failing and passing examples live under rules/cases/<CODE>/ unless
`no_example` says why a config cannot show it.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class CodeInfo:
    code: str
    summary: str
    category: str  # file | yaml | json | schema | config | native | trace | sweep | lint
    fix: str = ""
    severity: str = "error"
    no_example: str | None = None


_FILE = "it is about the file itself (its path, size, bytes or permissions), not text a config shows"

_SWEEP = "it is about a sweep file (docs/sweeps.md), which the rule cases of configs cannot show; tests/sweep checks it"

_CODES = [
    CodeInfo("FILE-UNREADABLE", "The file cannot be read (missing, no permission, or not a regular file: a directory, FIFO, device or socket).", "file",
             "Fix the path or the permissions; name a regular file, not a folder or a pipe.", no_example=_FILE),
    CodeInfo("FILE-TOO-LARGE", "The file is larger than a config or spec can be.", "file",
             "Check that the path names a config, not a trace or a log; split the file if it really is one.", no_example=_FILE),
    CodeInfo("FILE-BINARY", "The file holds binary data, not YAML or JSON text.", "file",
             "Check that the path names a YAML or JSON config, not a binary or compressed file.", no_example=_FILE),
    CodeInfo("FILE-ENCODING", "The file is not valid UTF-8.", "file",
             "Save the file as UTF-8.", no_example=_FILE),
    CodeInfo("YAML-SYNTAX", "The YAML cannot be parsed (tabs, bad indentation, unclosed quotes...).", "yaml",
             "Fix the YAML at the reported position: indent with spaces, close quotes and brackets."),
    CodeInfo("YAML-DUPLICATE-KEY", "A mapping defines the same key twice.", "yaml",
             "Keep one of the two keys (other YAML readers silently keep the last one)."),
    CodeInfo("YAML-TAG", "An explicit YAML tag (`!!python/...`, `!foo`) is used.", "yaml",
             "Remove the tag and write the plain value; configs take plain scalars, lists and mappings."),
    CodeInfo("YAML-NOT-MAPPING", "The document is empty or not a mapping.", "yaml",
             "Write the config as one mapping with a top-level `engine` key."),
    CodeInfo("YAML-MULTI-DOCUMENT", "The file holds more than one YAML document.", "yaml",
             "Put each config in its own file."),
    CodeInfo("YAML-ALIAS", "Aliases expand too far (alias bomb) or recursively.", "yaml",
             "Write the repeated value out, or use aliases that neither contain themselves nor multiply."),
    CodeInfo("YAML-NON-JSON", "A value is a YAML-only type (date, timestamp, binary, set).", "yaml",
             "Quote the value if a string is meant, or write a JSON-compatible value."),
    CodeInfo("YAML-NON-FINITE", "A number is NaN, infinite or out of range.", "yaml",
             "Use a finite number (`.inf` and `.nan` are not values a config takes)."),
    CodeInfo("YAML-KEY", "A mapping key is not a string.", "yaml",
             "Use the key name the config expects (quote it if it really is a number)."),
    CodeInfo("JSON-SYNTAX", "The JSON cannot be parsed.", "json",
             "Fix the JSON at the reported position (no trailing commas, no comments, double quotes)."),
    CodeInfo("JSON-DUPLICATE-KEY", "A JSON object defines the same key twice.", "json",
             "Keep one of the two keys (other JSON readers silently keep the last one)."),
    CodeInfo("JSON-NON-FINITE", "A JSON number is NaN, Infinity or out of range.", "json",
             "Use a finite number; JSON has no NaN or Infinity."),
    CodeInfo("JSON-NOT-OBJECT", "The JSON document is not an object.", "json",
             "Write the document as one JSON object.",
             no_example="a file is read as JSON only when it starts with `{`, so a file never reaches this check (a JSON list or scalar is a YAML-NOT-MAPPING)"),
    CodeInfo("SCHEMA-UNKNOWN-KEY", "A key the schema does not define (did-you-mean hint).", "schema",
             "Fix the spelling (the hint names the closest key), or remove the key."),
    CodeInfo("SCHEMA-NOT-APPLICABLE", "A key that does not apply to the chosen type/kind.", "schema",
             "Remove the key, or change the `type` or `kind` it depends on."),
    CodeInfo("SCHEMA-REQUIRED", "A required key is missing.", "schema",
             "Add the missing key."),
    CodeInfo("SCHEMA-TYPE", "A value has the wrong type (no silent coercion).", "schema",
             "Write the value with the expected type: no quotes around numbers and booleans, a number without its unit (the key's name gives it: `prefill_ms: 20`), quotes around strings that look like numbers."),
    CodeInfo("SCHEMA-ENUM", "A value is not one of the allowed names.", "schema",
             "Use one of the allowed names (the hint lists them or names the closest)."),
    CodeInfo("SCHEMA-RANGE", "A number is out of its allowed range.", "schema",
             "Use a value inside the range the message gives."),
    CodeInfo("SCHEMA-LENGTH", "A string or list is too short or too long.", "schema",
             "Give a string or list of the length the message asks for."),
    CodeInfo("SCHEMA-COMBINATION", "Keys that must (not) appear together.", "schema",
             "Keep exactly one of the keys the message names."),
    CodeInfo("SCHEMA-INVALID", "Another schema violation.", "schema",
             "Change the value as the message says.",
             no_example="it is the fallback for schema violations without a more specific SCHEMA-* code; no small config is known to reach it"),
    CodeInfo("MODEL-INVALID", "The document does not fit the config model.", "config",
             "Pass a JSON-shaped mapping (a config, not a native spec) to the Python API.",
             no_example="only the Python API reaches it (data that is not JSON-shaped, a native spec given to compile_config); a file that passes the schema fits the model"),
    CodeInfo("CONFIG-CAPACITY-BYTES", "A capacity in bytes cannot be turned into blocks.", "config",
             "Give `kv_cache.bytes_per_token` explicitly, or the capacity in blocks."),
    CodeInfo("CONFIG-RATE-UNIT", "A rate key does not match the source type.", "config",
             "Use `requests_per_second` with request sources and `sessions_per_second` with session sources."),
    CodeInfo("CONFIG-OVERRIDE", "A --set override cannot be applied.", "config",
             "Fix the `--set KEY=VALUE` argument: an existing dotted key and a YAML value.",
             no_example="it is about a `--set` argument on the command line, not the config file"),
    CodeInfo("NATIVE-SHAPE", "A native spec's engine/topology shape is inconsistent.", "native",
             "Make the topology and the engine roles agree: the same roles, each with its own worker type."),
    CodeInfo("SWEEP-BASE", "A sweep's base config cannot be read, is a sweep itself, or is not valid on its own.", "sweep",
             "Point `base` at a valid config (a path relative to the sweep file, or an inline mapping); lint the base alone first.", no_example=_SWEEP),
    CodeInfo("SWEEP-PATH", "A sweep names a dotted path that is not a config key (or sweeps the trace paths, which belong under `traces`).", "sweep",
             "Use a dotted config key as `--set` takes it (the hint names the closest); list trace files under `traces`.", no_example=_SWEEP),
    CodeInfo("SWEEP-EMPTY", "A sweep has no point: no grid values and no explicit points.", "sweep",
             "Give `grid` at least one path with values, or list `points`.", no_example=_SWEEP),
    CodeInfo("SWEEP-TOO-LARGE", "A sweep has more points than one sweep file may hold.", "sweep",
             "Split the sweep into several files, or sweep fewer values per path.", no_example=_SWEEP),
    CodeInfo("SWEEP-FIGURE", "An SLA bound or the objective names no number figure of the report summary.", "sweep",
             "Name a number figure of the report's `summary` (the hint names the closest), e.g. `p90_ttft_ms`.", no_example=_SWEEP),
    CodeInfo("SWEEP-SLA", "A sweep's SLA cannot be met or is written the wrong way: a bound whose min is above its max, or `rejected_requests` bounded as a figure instead of with `max_rejected`.", "sweep",
             "Give each figure a range some value meets (min <= max); bound rejected requests with `sla.max_rejected: N`.", no_example=_SWEEP),
    CodeInfo("SWEEP-TRACES", "A sweep lists `traces` but its base config does not replay a trace.", "sweep",
             "Remove `traces`, or give the base a trace source.", no_example=_SWEEP),
    CodeInfo("SWEEP-POINT-INVALID", "A sweep point's values do not make a valid config (beyond the support matrix).", "sweep",
             "Change the point's values so that the config they make is valid (the message names the point and the key).", no_example=_SWEEP),
    CodeInfo("SWEEP-POINT-SKIPPED", "A sweep point violates the support matrix: `kvreplay sweep` skips it and records its rule IDs.", "sweep",
             "Drop the point from the grid, or accept that it is skipped (its row says why).", severity="warning", no_example=_SWEEP),
    CodeInfo("SWEEP-NOT-CONFIG", "A sweep file was given where a config is expected (`compile`, `run`): run it with `kvreplay sweep`.", "sweep",
             "Run the file with `kvreplay sweep FILE -o DIR`.", no_example=_SWEEP),
    CodeInfo("SWEEP-UNSUPPORTED", "A sweep point the bundled engine does not run (a capability refusal): skipped, never run.", "sweep",
             "Drop the point, or change its values to a deployment the bundled engine runs.", severity="warning", no_example=_SWEEP),
    CodeInfo("SETTINGS-INVALID", "The project configuration (`kvreplay.toml`, `[tool.kvreplay]` in `pyproject.toml`) cannot be used: TOML syntax, an unknown setting, a wrong type, an unknown rule ID, or a `compile` pair that leaves the project (an absolute path, `..` above it, a symlink out of it) or shares an output with another pair.", "lint",
             "Fix the setting at the reported position (`kvreplay lint --show-settings` prints what is in effect).",
             no_example="it is about the project's TOML settings file, not a config"),
    CodeInfo("LINT-UNUSED-SUPPRESSION", "An inline `kvreplay: ignore[...]` suppresses nothing.", "lint",
             "Remove the comment, or correct the rule ID it names.", severity="warning"),
]

CODES: dict[str, CodeInfo] = {c.code: c for c in _CODES}
