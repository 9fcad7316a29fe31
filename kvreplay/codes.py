"""The stable diagnostic codes that are not support-matrix rules (those live in rules/*.rules).

Codes are a public contract: users suppress, grep and link them. Keep them; add new ones; never
reuse a retired code.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class CodeInfo:
    code: str
    summary: str
    category: str  # file | yaml | json | schema | config | native | trace | lint


_CODES = [
    CodeInfo("FILE-UNREADABLE", "The file cannot be read (missing, no permission, or not a regular file: a directory, FIFO, device or socket).", "file"),
    CodeInfo("FILE-TOO-LARGE", "The file is larger than a config or spec can be.", "file"),
    CodeInfo("FILE-BINARY", "The file holds binary data, not YAML or JSON text.", "file"),
    CodeInfo("FILE-ENCODING", "The file is not valid UTF-8.", "file"),
    CodeInfo("YAML-SYNTAX", "The YAML cannot be parsed (tabs, bad indentation, unclosed quotes...).", "yaml"),
    CodeInfo("YAML-DUPLICATE-KEY", "A mapping defines the same key twice.", "yaml"),
    CodeInfo("YAML-TAG", "An explicit YAML tag (`!!python/...`, `!foo`) is used.", "yaml"),
    CodeInfo("YAML-NOT-MAPPING", "The document is empty or not a mapping.", "yaml"),
    CodeInfo("YAML-MULTI-DOCUMENT", "The file holds more than one YAML document.", "yaml"),
    CodeInfo("YAML-ALIAS", "Aliases expand too far (alias bomb) or recursively.", "yaml"),
    CodeInfo("YAML-NON-JSON", "A value is a YAML-only type (date, timestamp, binary, set).", "yaml"),
    CodeInfo("YAML-NON-FINITE", "A number is NaN, infinite or out of range.", "yaml"),
    CodeInfo("YAML-KEY", "A mapping key is not a string.", "yaml"),
    CodeInfo("JSON-SYNTAX", "The JSON cannot be parsed.", "json"),
    CodeInfo("JSON-DUPLICATE-KEY", "A JSON object defines the same key twice.", "json"),
    CodeInfo("JSON-NON-FINITE", "A JSON number is NaN, Infinity or out of range.", "json"),
    CodeInfo("JSON-NOT-OBJECT", "The JSON document is not an object.", "json"),
    CodeInfo("SCHEMA-UNKNOWN-KEY", "A key the schema does not define (did-you-mean hint).", "schema"),
    CodeInfo("SCHEMA-NOT-APPLICABLE", "A key that does not apply to the chosen type/kind.", "schema"),
    CodeInfo("SCHEMA-REQUIRED", "A required key is missing.", "schema"),
    CodeInfo("SCHEMA-TYPE", "A value has the wrong type (no silent coercion).", "schema"),
    CodeInfo("SCHEMA-ENUM", "A value is not one of the allowed names.", "schema"),
    CodeInfo("SCHEMA-RANGE", "A number is out of its allowed range.", "schema"),
    CodeInfo("SCHEMA-LENGTH", "A string or list is too short or too long.", "schema"),
    CodeInfo("SCHEMA-COMBINATION", "Keys that must (not) appear together.", "schema"),
    CodeInfo("SCHEMA-INVALID", "Another schema violation.", "schema"),
    CodeInfo("MODEL-INVALID", "The document does not fit the config model.", "config"),
    CodeInfo("CONFIG-CAPACITY-BYTES", "A capacity in bytes cannot be turned into blocks.", "config"),
    CodeInfo("CONFIG-RATE-UNIT", "A rate key does not match the source type.", "config"),
    CodeInfo("CONFIG-OVERRIDE", "A --set override cannot be applied.", "config"),
    CodeInfo("NATIVE-SHAPE", "A native spec's engine/topology shape is inconsistent.", "native"),
    CodeInfo("LINT-UNUSED-SUPPRESSION", "An inline `kvreplay: ignore[...]` suppresses nothing.", "lint"),
]

CODES: dict[str, CodeInfo] = {c.code: c for c in _CODES}

