"""From a path (or text) to a compiled document: read, detect config vs native spec, compile."""

from __future__ import annotations

from collections.abc import Sequence

from kvreplay.compiler.json_loader import load_json
from kvreplay.compiler.overrides import apply_overrides
from kvreplay.compiler.pipeline import (
    Compiled,
    RuleRunner,
    compile_native_loaded,
    compile_yaml_loaded,
    looks_like_native,
)
from kvreplay.compiler.reading import read_config_text
from kvreplay.compiler.source import Loaded
from kvreplay.schema.diagnostics import Diagnostic


def load_text(text: str, file: str | None) -> tuple[str, Loaded]:
    """Parse text as JSON when it looks like JSON, else YAML; returns (kind, loaded).

    kind is "native" for a native spec, "yaml" for a config (a config may be written as JSON).
    """
    if text.lstrip().startswith("{"):
        loaded = load_json(text, file, style="pointer")
        if looks_like_native(loaded.data) or (loaded.data is None and file and \
                file.endswith(".json")):
            return "native", loaded
        if loaded.data is not None:
            # A config written in JSON: same pipeline as YAML, with `$.a.b` paths.
            return "yaml", load_json(text, file, style="jsonpath")
    from kvreplay.compiler.yaml_loader import load_yaml  # ruamel: not for JSON

    loaded = load_yaml(text, file)
    if looks_like_native(loaded.data):
        return "native", loaded
    return "yaml", loaded


def compile_text(text: str, file: str | None, *, overrides: Sequence[str] = (),
                 rules: RuleRunner | None = None) -> Compiled:
    kind, loaded = load_text(text, file)
    return compile_loaded(kind, loaded, overrides=overrides, rules=rules)


def compile_loaded(kind: str, loaded: Loaded, *, overrides: Sequence[str] = (),
                   rules: RuleRunner | None = None) -> Compiled:
    """A document `load_text` parsed (kind "yaml" or "native"), with `--set` overrides."""
    if kind == "yaml" and looks_like_sweep(loaded.data):
        return Compiled(loaded.source.file, "sweep", None, None, (Diagnostic(
            "SWEEP-NOT-CONFIG", "error", "this is a sweep file, not a config",
            loaded.source.span(()), hint="run it with `kvreplay sweep FILE -o DIR`"),),
            loaded.text)
    loaded = apply_overrides(loaded, overrides)
    if kind == "native":
        return compile_native_loaded(loaded, rules)
    return compile_yaml_loaded(loaded, rules)


def compile_path(path: str, *, display: str | None = None, overrides: Sequence[str] = (),
                 rules: RuleRunner | None = None) -> Compiled:
    """Compile a file; unreadable input becomes FILE-* diagnostics (never an exception)."""
    name = display or path
    text, problems = read_config_text(path, name)
    if text is None:
        return Compiled(name, "unknown", None, None, tuple(problems), None)
    return compile_text(text, name, overrides=overrides, rules=rules)



SWEEP_KEYS = ("grid", "points", "base")


def looks_like_sweep(data: object) -> bool:
    """A sweep file (docs/sweeps.md): `kind: sweep`, or sweep keys and neither a config's
    `engine` nor a native spec's `spec`."""
    if not isinstance(data, dict) or "engine" in data or "spec" in data:
        return False
    return data.get("kind") == "sweep" or any(k in data for k in SWEEP_KEYS)
