"""Write schema/{config,native,sweep}.schema.json and docs/config-reference.md.

Run `python tools/gen_schemas.py` after changing a model (compiler/model.py for the YAML config,
schema/native_model.py for native JSON); `--check` only reports stale files (a test runs it).
The schemas are generated from the models' field metadata by compiler/schema_gen.py; the
reference page is generated from the config schema.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from kvreplay.compiler.schema_gen import config_schema, native_schema
from kvreplay.sweep.schema import sweep_schema

S = dict[str, Any]


def render(which: S) -> str:
    return json.dumps(which, indent=2, sort_keys=False, ensure_ascii=False) + "\n"


def _type_of(node: S) -> str:
    if "const" in node:
        return f"`{node['const']}`"
    if "enum" in node:
        return " \\| ".join(f"`{v}`" for v in node["enum"])
    if "anyOf" in node:
        return " or ".join(_type_of(n) for n in node["anyOf"])
    kind = node.get("type", "")
    bounds = []
    if "minimum" in node and kind in ("integer", "number"):
        bounds.append(f">= {node['minimum']:g}")
    if "exclusiveMinimum" in node:
        bounds.append(f"> {node['exclusiveMinimum']:g}")
    if "maximum" in node and node["maximum"] < 1e9 and kind in ("integer", "number"):
        bounds.append(f"<= {node['maximum']:g}")
    return {"object": "mapping", "array": "list", "null": "null"}.get(kind, kind) + (
        " " + ", ".join(bounds) if bounds else "")


def _rows(node: S, prefix: str, out: list[str]) -> None:
    for key, child in node.get("properties", {}).items():
        path = f"{prefix}.{key}" if prefix else key
        default = child.get("default")
        shown = "" if "default" not in child else f"`{json.dumps(default)}`"
        required = key in node.get("required", [])
        meaning = child.get("description", "").replace("|", "\\|")
        out.append(f"| `{path}` | {_type_of(child)} | {'required' if required else shown} | "
                   f"{meaning} |")
        if child.get("type") == "object" and "properties" in child:
            _rows(child, path, out)


def render_reference(schema: S) -> str:
    """docs/config-reference.md: every key of the config schema, generated from it."""
    out = [
        "# Config reference",
        "",
        "Every key of the user YAML, generated from `schema/config.schema.json`",
        "(`python tools/gen_schemas.py`). See [config.md](config.md) for the concepts.",
        "Worker roles (`aggregated`, `prefill`, `decode`) share one shape, shown once under",
        "`engine.workers.aggregated`.",
        "",
    ]
    for section in schema["properties"]:
        out += [f"## `{section}`", "", "| key | type | default | meaning |",
                "| --- | --- | --- | --- |"]
        node = schema["properties"][section]
        if section == "engine":
            node = json.loads(json.dumps(node))
            for role in ("prefill", "decode"):
                node["properties"]["workers"]["properties"].pop(role)
        _rows({"properties": {section: node}, "required": schema["required"]}, "", out)
        out.append("")
    return "\n".join(out)


def outputs(root: Path) -> dict[Path, str]:
    """Every generated file and its text."""
    config = config_schema()
    return {
        root / "schema" / "config.schema.json": render(config),
        root / "schema" / "native.schema.json": render(native_schema()),
        root / "schema" / "sweep.schema.json": render(sweep_schema()),
        root / "docs" / "config-reference.md": render_reference(config),
    }


if __name__ == "__main__":
    repo = Path(__file__).resolve().parent.parent
    generated = outputs(repo)
    if sys.argv[1:] == ["--check"]:
        stale = [p for p, text in generated.items() if p.read_text("utf-8") != text]
        print("\n".join(f"stale: {p.relative_to(repo)}" for p in stale))
        sys.exit(1 if stale else 0)
    for path, text in generated.items():
        path.write_text(text, encoding="utf-8")
