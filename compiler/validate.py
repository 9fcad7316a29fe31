"""JSON Schema validation whose every error becomes a positioned diagnostic with a useful hint.

It also returns the paths to prune so later stages can run on what is valid (unknown keys and
invalid values are dropped, defaults then apply).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from kvreplay.compiler.source import Path, SourceMap, format_path, parse_path
from kvreplay.schema.diagnostics import Diagnostic
from kvreplay.schema.frozen import evolve
from kvreplay.schema.json_schemas import known_valid
from kvreplay.schema.json_schemas import load_schema as load_schema
from kvreplay.schema.json_schemas import validator as _validator

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

# Hints for values users carry over from the AISimulate predictor: (field, value) -> hint.
_KNOWN_VALUES: dict[tuple[str, str], str] = {
    ("type", "default"): "kvreplay has no performance database: use `polynomial` (the default) "
    "or `fixed` with prefill_ms and decode_ms",
}

# Hints for unknown keys that users carry over from neighbouring tools.
_KNOWN_ELSEWHERE: dict[str, str] = {
    "planner": "kvreplay writes the planner hook as `scaling: {policy: planner, config: {...}}`",
    "kv_layout_id": "kvreplay derives kv_layout_id itself; remove the key",
    "optimization": "`optimization` belongs to a recommendation input, not a deployment",
    "optimizer": "`optimizer` belongs to a recommendation input, not a deployment",
}


@attrs.frozen
class Validation:
    diagnostics: tuple[Diagnostic, ...]
    prune: frozenset[Path]


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "mapping"
    return type(value).__name__


def _show(value: object) -> str:
    if isinstance(value, (dict, list)):
        return f"a {_type_name(value)}"
    text = json.dumps(value) if not isinstance(value, str) else value
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{_type_name(value)} `{text}`"


def _describe(schema: Mapping[str, Any]) -> str:
    """A short English description of what a (sub)schema accepts."""
    if "const" in schema:
        return f"`{schema['const']}`"
    if "enum" in schema:
        return "one of " + ", ".join(f"`{v}`" for v in schema["enum"])
    if "anyOf" in schema:
        return " or ".join(_describe(s) for s in schema["anyOf"])
    kind = schema.get("type")
    if kind == "null":
        return "null"
    words = {"integer": "an integer", "number": "a number", "string": "a string",
             "boolean": "`true` or `false`", "object": "a mapping", "array": "a list"}
    text = words.get(str(kind), str(kind))
    bounds = []
    if "minimum" in schema:
        bounds.append(f">= {_num(schema['minimum'])}")
    if "exclusiveMinimum" in schema:
        bounds.append(f"> {_num(schema['exclusiveMinimum'])}")
    if bounds and kind in ("integer", "number"):
        text += " " + " and ".join(bounds)
    return text


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(value)


def _field(path: Path) -> str:
    named = [p for p in path if isinstance(p, str)]
    return named[-1] if named else "document"


def _schema(err: ValidationError) -> Mapping[str, Any]:
    return err.schema if isinstance(err.schema, Mapping) else {}


def _value(err: ValidationError) -> Any:
    return err.validator_value


def _instance(err: ValidationError) -> Any:
    return err.instance


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "null": (type(None),), "boolean": (bool,), "integer": (int,), "number": (int, float),
    "string": (str,), "object": (dict,), "array": (list,),
}


def _has_type(value: Any, kind: Any) -> bool:
    if isinstance(value, bool) and kind in ("integer", "number"):
        return False
    return isinstance(kind, str) and isinstance(value, _JSON_TYPES.get(kind, ()))


def _branch_errors(err: ValidationError) -> list[ValidationError] | None:
    """The errors of the one anyOf branch whose type the value has, if exactly one has it:
    a mapping with a bad key is about that key, an integer out of range about its range."""
    branches = _value(err) if isinstance(_value(err), list) else []
    typed = [i for i, branch in enumerate(branches)
             if isinstance(branch, Mapping) and _has_type(_instance(err), branch.get("type"))]
    if len(typed) != 1:
        return None
    return [e for e in err.context or () if e.relative_schema_path[0] == typed[0]]


class _Mapper:
    def __init__(self, source: SourceMap, data: Any, required: dict[Path, list[str]],
                 bad: list[Path]) -> None:
        self.source = source
        self.data = data
        self.required_by_path = required
        self.bad = bad
        self.out: list[Diagnostic] = []
        self.prune: set[Path] = set()

    def reported(self, err: ValidationError) -> bool:
        """Whether the loader already reported this value (it was replaced by null)."""
        path: Path = tuple(err.absolute_path)
        if _under(path, self.bad):
            return True
        if err.validator == "required" and "'" in err.message:
            return _under(path + (err.message.split("'")[1],), self.bad)
        return False

    def emit(self, rule: str, message: str, path: Path, *, key: bool = False,
             hint: str | None = None, at: Path | None = None) -> None:
        """A finding about `path`, located at `at` when given (a key a --set removed)."""
        span = self.source.span(path if at is None else at, key=key)
        if at is not None:
            span = evolve(span, path=format_path(path, self.source.style))
        self.out.append(Diagnostic(rule, "error", message, span, hint=hint))

    def handle(self, err: ValidationError) -> None:
        if self.reported(err):
            return
        path: Path = tuple(err.absolute_path)
        kw = err.validator
        branch = _branch_errors(err) if kw == "anyOf" else None
        if branch:
            for sub in branch:
                self.handle(sub)
            return
        if kw == "additionalProperties":
            allowed = list((_schema(err).get("properties") or {}).keys())
            for key in sorted(set(_instance(err)) - set(allowed)):
                self.unknown_key(path, key, allowed)
        elif kw == "enum" and "propertyNames" in err.relative_schema_path:
            key = str(_instance(err))
            field, value = _variant_from_data(self.data, path)
            applicable = [k for k in _value(err) if k != field]
            self.emit(
                "SCHEMA-NOT-APPLICABLE",
                f"`{key}` does not apply to {_field(path)} with {field} `{value}`",
                path + (key,),
                key=True,
                hint=("keys for this " + field + ": " + ", ".join(f"`{k}`" for k in applicable))
                if applicable
                else f"remove it, or change `{field}`",
            )
            self.prune.add(path + (key,))
        elif kw == "required":
            missing = err.message.split("'")[1] if "'" in err.message else str(_value(err))
            where = "the document" if not path else f"`{_field(path)}`"
            variant = ""
            if "then" in err.relative_schema_path:
                field, value = _variant_from_data(self.data, path)
                variant = f" with {field} `{value}`"
            self.emit("SCHEMA-REQUIRED", f"missing required key `{missing}` in {where}{variant}",
                      path, key=True, at=self.source.replaced_child(path, missing))
        elif kw == "minProperties":
            self.emit("SCHEMA-REQUIRED", f"`{_field(path)}` needs at least one entry", path,
                      key=True, hint=_roles_hint(_schema(err)),
                      at=self.source.replaced_child(path))
        elif kw == "maxProperties":
            given = ", ".join(f"`{k}`" for k in sorted(_instance(err)))
            self.emit("SCHEMA-COMBINATION", f"`{_field(path)}` takes at most {_value(err)} "
                      f"entry, found {given}", path, key=True)
            self.prune.add(path)
        elif kw == "oneOf" and not isinstance(_instance(err), dict):
            pass  # not an object at all: the branches' type errors say so
        elif kw == "oneOf":
            options = [s.get("required", []) for s in _value(err)]
            names = [f"`{r[0]}`" for r in options if r]
            field, value = _variant_from_data(self.data, path)
            present = [n.strip("`") for n in names if n.strip("`") in (_instance(err) or {})]
            what = "both" if len(present) > 1 else "neither"
            removed = [self.source.replaced_child(path, n.strip("`")) for n in names]
            self.emit(
                "SCHEMA-COMBINATION",
                f"`{_field(path)}` with {field} `{value}` needs exactly one of "
                f"{' or '.join(names)} (found {what})",
                path,
                key=True,
                at=next((r for r in removed if r is not None), None) if not present else None,
            )
        elif kw == "type":
            self.type_error(path, err)
        elif kw in ("enum", "const"):
            self.enum_error(path, err)
        elif kw == "anyOf":
            self.emit(
                "SCHEMA-TYPE",
                f"`{_field(path)}` must be {_describe(_schema(err))}, "
                f"found {_show(_instance(err))}",
                path,
                hint=_either_hint(_field(path), _value(err), _instance(err)),
            )
            self.prune.add(path)
        elif kw in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            op = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">",
                  "exclusiveMaximum": "<"}[kw]
            self.emit(
                "SCHEMA-RANGE",
                f"`{_field(path)}` must be {op} {_num(_value(err))}, found "
                f"{_show(_instance(err))}",
                path,
            )
            self.prune.add(path)
        elif kw in ("minLength", "maxLength", "minItems", "maxItems"):
            unit = "characters" if "Length" in kw else "items"
            op = "at least" if kw.startswith("min") else "at most"
            self.emit("SCHEMA-LENGTH",
                      f"`{_field(path)}` must have {op} {_value(err)} {unit}", path)
            self.prune.add(path)
        else:
            self.emit("SCHEMA-INVALID", f"`{_field(path)}`: {err.message}", path)
            self.prune.add(path)

    def unknown_key(self, path: Path, key: str, allowed: list[str]) -> None:
        from kvreplay.schema.suggest import hint_for  # the hints of errors only (difflib)

        where = f"in `{_field(path)}`" if path else "at the top level"
        hint = _KNOWN_ELSEWHERE.get(key) or hint_for(key, allowed, "keys")
        required = set(self._required_at(path))
        if hint and hint.startswith("did you mean") and hint.split("`")[1] in required:
            hint += f" (`{hint.split('`')[1]}` is required)"
        self.emit("SCHEMA-UNKNOWN-KEY", f"unknown key `{key}` {where}", path + (key,),
                  key=True, hint=hint)
        self.prune.add(path + (key,))

    def _required_at(self, path: Path) -> list[str]:
        return self.required_by_path.get(path, [])

    def type_error(self, path: Path, err: ValidationError) -> None:
        from kvreplay.compiler.number_hints import number_hint  # the hints of errors only

        expected = _describe(_schema(err))
        hint = None
        text = self.source.scalar_text.get(path)
        if _value(err) == "string" and isinstance(_instance(err), (int, float)) and not \
                isinstance(_instance(err), bool):
            shown = text or json.dumps(_instance(err))
            hint = f'quote it: "{shown}" (YAML reads unquoted {shown} as a number)'
        elif _value(err) == "integer" and isinstance(_instance(err), float):
            hint = "write a whole number without a decimal point"
        elif _value(err) in ("integer", "number") and isinstance(_instance(err), str):
            hint = number_hint(_field(path), _instance(err), integer=_value(err) == "integer")
        elif _value(err) == "boolean" and isinstance(_instance(err), str):
            hint = "write `true` or `false` (unquoted)"
        found = _show(_instance(err))
        self.emit("SCHEMA-TYPE", f"`{_field(path)}` must be {expected}, found {found}",
                  path, hint=hint)
        self.prune.add(path)

    def enum_error(self, path: Path, err: ValidationError) -> None:
        from kvreplay.schema.suggest import hint_for  # the hints of errors only (difflib)

        choices = [str(v) for v in (_value(err) if err.validator == "enum"
                                    else [_value(err)])]
        value = _instance(err)
        hint = hint_for(value, choices, "values") if isinstance(value, str) else \
            "valid values: " + ", ".join(f"`{c}`" for c in choices)
        if isinstance(value, str):
            hint = _KNOWN_VALUES.get((_field(path), value), hint)
        self.emit("SCHEMA-ENUM",
                  f"`{_field(path)}` must be one of {', '.join(f'`{c}`' for c in choices)}, "
                  f"found {_show(value)}", path, hint=hint)
        self.prune.add(path)


def _either_hint(key: str, branches: Any, value: Any) -> str | None:
    """A string where a number or a named value belongs (`bytes_per_token: auto | N`): the
    name it is close to, else what number would parse."""
    from kvreplay.compiler.number_hints import number_hint  # the hints of errors only
    from kvreplay.schema.suggest import hint_for  # the hints of errors only (difflib)

    mappings = [b for b in branches if isinstance(b, Mapping)] if isinstance(branches, list) \
        else []
    kinds = {b.get("type") for b in mappings}
    if not isinstance(value, str) or not kinds & {"integer", "number"}:
        return None
    names = [str(b["const"]) for b in mappings if isinstance(b.get("const"), str)]
    close = hint_for(value, names) if names else None
    if close and close.startswith("did you mean"):
        return close
    return number_hint(key, value, integer="number" not in kinds)


def _variant_from_data(data: Any, path: Path) -> tuple[str, str]:
    node = data
    for part in path:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return "type", "?"
    if isinstance(node, dict):
        for key in ("type", "kind", "policy"):
            if key in node:
                return key, str(node[key])
    return "type", "?"


def _roles_hint(schema: Mapping[str, Any]) -> str | None:
    names = list((schema.get("properties") or {}).keys())
    return ("add one of: " + ", ".join(f"`{n}`" for n in names)) if names else None


def _under(path: Path, bad: Iterable[Path]) -> bool:
    return any(path[: len(b)] == b for b in bad)


def validate(data: Any, source: SourceMap, schema: str = "config",
             already_reported: Iterable[Path] = ()) -> Validation:
    """Validate against a shipped schema, skipping paths the loader already reported."""
    if known_valid(schema, data):
        return Validation((), frozenset())
    bad = list(already_reported)
    errors = sorted(_validator(schema).iter_errors(data),
                    key=lambda e: [str(p) for p in e.absolute_path])
    required: dict[Path, list[str]] = {}
    for err in errors:
        if err.validator == "required" and "'" in err.message:
            required.setdefault(tuple(err.absolute_path), []).append(err.message.split("'")[1])
    mapper = _Mapper(source, data, required, bad)
    for err in errors:
        mapper.handle(err)
    return Validation(tuple(_fold_typos(mapper.out)), frozenset(mapper.prune))


def _fold_typos(found: list[Diagnostic]) -> list[Diagnostic]:
    """Drop `missing required key K` when a misspelled sibling key already suggests K."""
    suggested: set[tuple[Path, str]] = set()
    for d in found:
        key_path = parse_path(d.span.path or "")
        if d.rule == "SCHEMA-UNKNOWN-KEY" and d.hint and d.hint.startswith("did you mean") \
                and key_path:
            suggested.add((key_path[:-1], d.hint.split("`")[1]))
    return [
        d for d in found
        if not (d.rule == "SCHEMA-REQUIRED" and d.message.startswith("missing required key")
                and (parse_path(d.span.path or ""), d.message.split("`")[1]) in suggested)
    ]


def prune(data: Any, paths: Iterable[Path]) -> Any:
    """A copy of data without the given paths (list items removed from the highest index down)."""
    def order(p: Path) -> tuple[int, list[tuple[int, int | str]]]:
        return len(p), [(0, x) if isinstance(x, int) else (1, x) for x in p]

    ordered = sorted(set(paths), key=order, reverse=True)
    result = json.loads(json.dumps(data))
    for path in ordered:
        if not path:
            return None
        node = result
        for part in path[:-1]:
            try:
                node = node[part]
            except (KeyError, IndexError, TypeError):
                node = None
                break
        last = path[-1]
        if isinstance(node, dict) and isinstance(last, str):
            node.pop(last, None)
        elif isinstance(node, list) and isinstance(last, int) and last < len(node):
            node.pop(last)
    return result
