"""YAML to plain data with a position for every key and value, and diagnostics, not crashes."""

from __future__ import annotations

import io
import math
import re
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.reader import ReaderError

from kvreplay.compiler.numbers import bounded_int, number_text
from kvreplay.compiler.source import Loaded, Path, Position, SourceMap, format_path
from kvreplay.compiler.yaml_errors import MAX_DEPTH, oversized, too_deep, unprintable
from kvreplay.schema.diagnostics import Diagnostic, Related, Span

# A config has hundreds of nodes; an alias bomb has billions. Cap the nodes that aliases add
# (a node built again through an alias or a merge key), not the document's own size.
MAX_EXPANDED_NODES = 50_000

_T = "tag:yaml.org,2002:"
_SURROGATE = re.compile("[\ud800-\udfff]")
_NON_JSON = {
    _T + "timestamp": "a date/timestamp",
    _T + "binary": "binary data",
    _T + "set": "a set",
    _T + "omap": "an ordered map",
    _T + "pairs": "a pairs list",
}


class _AliasLimit(Exception):
    pass


class _TooDeep(Exception):
    def __init__(self, node: Node) -> None:
        super().__init__()
        self.node = node


def _pos(node: Node) -> Position:
    s, e = node.start_mark, node.end_mark
    return Position(s.line + 1, s.column + 1, e.line + 1, e.column + 1)


class _Builder:
    """Walks a composed node tree into plain values, recording positions and problems."""

    def __init__(self, source: SourceMap, text: str) -> None:
        self.source = source
        self.lines = text.splitlines()
        self.diagnostics: list[Diagnostic] = []
        self.built = 0
        self.distinct: set[int] = set()
        self.stack: set[int] = set()

    def problem(self, rule: str, message: str, node: Node, path: Path, hint: str | None = None,
                related: tuple[Any, ...] = ()) -> None:
        p = _pos(node)
        span = Span(self.source.file, format_path(path), p.line, p.column, p.end_line, p.end_column)
        self.diagnostics.append(
            Diagnostic(rule, "error", message, span, hint=hint, related=related))

    def build(self, node: Node, path: Path) -> Any:
        self.built += 1
        self.distinct.add(id(node))
        if self.built - len(self.distinct) > MAX_EXPANDED_NODES:
            raise _AliasLimit
        if len(path) > MAX_DEPTH:
            raise _TooDeep(node)
        if id(node) in self.stack:
            self.problem("YAML-ALIAS", "recursive alias: this node contains itself", node, path)
            return None
        self.source.values.setdefault(path, _pos(node))
        tag = self.explicit_tag(node)
        if tag is not None:
            self.problem(
                "YAML-TAG",
                f"YAML tag `{tag}` is not allowed in a config",
                node,
                path,
                hint="remove the tag; configs use plain YAML scalars, lists and mappings",
            )
            return None
        if isinstance(node, ScalarNode):
            return self.scalar(node, path)
        self.stack.add(id(node))
        try:
            if isinstance(node, SequenceNode):
                return [self.build(item, path + (i,)) for i, item in enumerate(node.value)]
            if isinstance(node, MappingNode):
                return self.mapping(node, path)
        finally:
            self.stack.discard(id(node))
        self.problem("YAML-SYNTAX", f"unsupported YAML node {type(node).__name__}", node, path)
        return None

    def explicit_tag(self, node: Node) -> str | None:
        """The tag as written (`!!binary`, `!foo`), or None for an implicitly typed node."""
        ctag = getattr(node, "ctag", None)
        if ctag is not None and getattr(ctag, "handle", None) is not None:
            return f"{ctag.handle}{ctag.suffix}"
        # The C composer does not keep the handle: read the node's first character instead.
        mark = node.start_mark
        line = self.lines[mark.line] if mark.line < len(self.lines) else ""
        if line[mark.column:mark.column + 1] == "!":
            return line[mark.column:].split()[0] if line[mark.column:].split() else "!"
        return None

    def mapping(self, node: MappingNode, path: Path) -> dict[str, Any]:
        out: dict[str, Any] = {}
        first_seen: dict[str, Node] = {}
        merged: list[tuple[MappingNode, Path]] = []
        for key_node, value_node in node.value:
            if key_node.tag == _T + "merge":
                merged.extend(self._merge_sources(value_node, path))
                continue
            if not isinstance(key_node, ScalarNode) or key_node.tag != _T + "str":
                self.problem(
                    "YAML-KEY",
                    "mapping keys must be strings"
                    + (f", found `{key_node.value}`" if isinstance(key_node, ScalarNode) else ""),
                    key_node,
                    path,
                    hint="quote the key" if isinstance(key_node, ScalarNode) else None,
                )
                continue
            key = key_node.value
            child = path + (key,)
            if _SURROGATE.search(key):
                self.problem("YAML-KEY", "key holds a lone UTF-16 surrogate escape", key_node, path)
                continue
            if key in first_seen:
                first = _pos(first_seen[key])
                self.problem(
                    "YAML-DUPLICATE-KEY",
                    f"duplicate key `{key}` (first defined at line {first.line}); "
                    "this later value is ignored",
                    key_node,
                    child,
                    hint="keep one of the two definitions",
                    related=(
                        Related(
                            "first definition",
                            Span(self.source.file, format_path(child), first.line, first.column,
                                 first.end_line, first.end_column),
                        ),
                    ),
                )
                continue
            first_seen[key] = key_node
            self.source.keys[child] = _pos(key_node)
            out[key] = self.build(value_node, child)
        for source_node, at in merged:
            for key, value in self.mapping(source_node, at).items():
                out.setdefault(key, value)
        return out

    def _merge_sources(self, node: Node, path: Path) -> list[tuple[MappingNode, Path]]:
        items = node.value if isinstance(node, SequenceNode) else [node]
        good = [(n, path) for n in items if isinstance(n, MappingNode)]
        if len(good) != len(items):
            self.problem("YAML-SYNTAX", "a merge key `<<` needs a mapping or a list of mappings",
                         node, path)
        return good

    def scalar(self, node: ScalarNode, path: Path) -> Any:
        tag, text = node.tag, node.value
        if tag in _NON_JSON:
            self.problem(
                "YAML-NON-JSON",
                f"`{text}` is read as {_NON_JSON[tag]}, which configs do not accept",
                node,
                path,
                hint=f'quote it if a string is meant: "{text}"',
            )
            return None
        if tag == _T + "str":
            if _SURROGATE.search(text):
                self.problem("YAML-SYNTAX", "string holds a lone UTF-16 surrogate escape, which "
                             "is not valid text", node, path)
                return None
            return text
        if tag == _T + "null":
            return None
        if tag == _T + "bool":
            return text.lower() == "true"
        if tag in (_T + "int", _T + "float"):
            return self.number(node, path)
        self.problem("YAML-TAG", f"unsupported scalar type `{tag}`", node, path)
        return None

    def number(self, node: ScalarNode, path: Path) -> int | float | None:
        text = node.value
        try:
            value = _to_int(text) if node.tag == _T + "int" else _to_float(text)
        except ValueError:  # YAML 1.1 forms (`%YAML 1.1`): sexagesimal 190:20:30
            self.problem("YAML-NON-JSON", f"`{text}` is read as a YAML 1.1 base-60 number, "
                         "which configs do not accept", node, path,
                         hint=f'quote it if a string is meant: "{text}"')
            return None
        if value is None:
            self.problem("YAML-NON-FINITE",
                         f"{number_text(text)} is out of the range of a finite number",
                         node, path, hint="use a finite number")
            return None
        if isinstance(value, float):
            if not math.isfinite(value):
                self.problem("YAML-NON-FINITE", f"`{text}` is not a finite number", node, path,
                             hint="use a finite decimal number")
                return None
            self.source.scalar_text[path] = text
        return value


def _to_int(text: str) -> int | None:
    """The integer, or None beyond a float's range (compiler/numbers.py)."""
    t = text.replace("_", "")
    sign = -1 if t.startswith("-") else 1
    t = t.lstrip("+-")
    base = {"0x": 16, "0o": 8, "0b": 2}.get(t[:2].lower(), 10)
    value = bounded_int(t[2:] if base != 10 else t, base)
    return None if value is None else sign * value


def _to_float(text: str) -> float:
    t = text.replace("_", "").lower()
    if t in (".nan", "+.nan", "-.nan"):
        return math.nan
    if t.endswith(".inf"):
        return -math.inf if t.startswith("-") else math.inf
    return float(t)


def _syntax(exc: YAMLError, file: str | None, text: str) -> Diagnostic:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).strip().splitlines()[0]
    context = getattr(exc, "context", None)
    message = f"{context}, {problem}" if context else str(problem)
    start = getattr(exc, "context_mark", None)
    related: tuple[Related, ...] = ()
    if context and start is not None and mark is not None and start.line != mark.line:
        message += f" (it starts at line {start.line + 1}, column {start.column + 1})"
        related = (Related(context.replace("while ", "").strip(), Span(
            file, "$", start.line + 1, start.column + 1, start.line + 1, start.column + 2)),)
    hint = None
    line = col = None
    if mark is not None:
        line, col = mark.line + 1, mark.column + 1
        lines = text.splitlines()
        if 0 < line <= len(lines) and "\t" in lines[line - 1][: max(col, 1) + 1]:
            hint = "YAML forbids tabs for indentation; indent with spaces"
    if "\t" in message:
        message = message.replace("\t", "\\t")
    return Diagnostic("YAML-SYNTAX", "error", f"YAML syntax error: {message}",
                      Span(file, "$", line, col, line, col + 1 if col else None), hint=hint,
                      related=related)


def _compose(text: str, pure: bool) -> list[Node]:
    """Compose every document (the safe composer keeps all positions and skips comments;
    `pure=False` uses ruamel's C extension when it is installed: about 6x faster)."""
    return list(YAML(typ="safe", pure=pure).compose_all(io.StringIO(text)))


def load_yaml(text: str, file: str | None) -> Loaded:
    """Parse one YAML document into plain data plus positions; problems become diagnostics."""
    return _load(text, file, want_mapping=True)


def load_yaml_value(text: str, file: str | None) -> Loaded:
    """Parse one YAML value of any kind (a `--set` value); an empty text is null."""
    return _load(text, file, want_mapping=False)


def _load(text: str, file: str | None, want_mapping: bool) -> Loaded:
    source = SourceMap(file=file)
    refused = oversized(file, text)
    if refused is not None:
        return Loaded(None, source, text, (refused,))
    try:
        documents = _compose(text, pure=False)
    except YAMLError:
        # Errors are worded and placed by the pure-Python parser, so that diagnostics are the
        # same whether or not ruamel's C extension is installed.
        try:
            documents = _compose(text, pure=True)
        except ReaderError as exc:
            found = unprintable(exc, file, text) or _syntax(exc, file, text)
            return Loaded(None, source, text, (found,))
        except YAMLError as exc:
            return Loaded(None, source, text, (_syntax(exc, file, text),))
        except RecursionError:
            return Loaded(None, source, text, (too_deep(file, text),))
    except RecursionError:
        return Loaded(None, source, text, (too_deep(file, text),))
    documents = [d for d in documents if d is not None]
    if not documents and not want_mapping:
        return Loaded(None, source, text, ())
    if not documents:
        return Loaded(None, source, text, (Diagnostic(
            "YAML-NOT-MAPPING", "error", "the document is empty; expected a mapping with `engine`",
            Span(file, "$", 1, 1, 1, 1)),))
    builder = _Builder(source, text)
    extra: list[Diagnostic] = []
    if len(documents) > 1:
        p = _pos(documents[1])
        extra.append(Diagnostic(
            "YAML-MULTI-DOCUMENT", "error",
            f"the file holds {len(documents)} YAML documents; a config is exactly one",
            Span(file, "$", p.line, p.column, p.line, p.column + 1),
            hint="split the documents into separate files"))
    root = documents[0]
    try:
        data = builder.build(root, ())
    except _AliasLimit:
        p = _pos(root)
        return Loaded(None, source, text, (Diagnostic(
            "YAML-ALIAS", "error",
            f"aliases expand to more than {MAX_EXPANDED_NODES:,} nodes (an alias bomb?)",
            Span(file, "$", p.line, p.column, p.end_line, p.end_column),
            hint="write the config without nested aliases"),))
    except _TooDeep as exc:
        p = _pos(exc.node)
        return Loaded(None, source, text, (too_deep(file, text, (p.line, p.column)),))
    except RecursionError:
        return Loaded(None, source, text, (too_deep(file, text),))
    diagnostics = builder.diagnostics + extra
    if not want_mapping:
        return Loaded(data, source, text, tuple(diagnostics))
    if not isinstance(data, dict):
        p = _pos(root)
        kind = "a list" if isinstance(data, list) else f"the scalar `{root.value}`" \
            if isinstance(root, ScalarNode) else "not a mapping"
        diagnostics.append(Diagnostic(
            "YAML-NOT-MAPPING", "error",
            f"the document is {kind}; expected a mapping with `engine`",
            Span(file, "$", p.line, p.column, p.end_line, p.end_column)))
        return Loaded(None, source, text, tuple(diagnostics))
    return Loaded(data, source, text, tuple(diagnostics))
