"""Rule file text -> syntax tree (kvreplay.rules.syntax), through the lark grammar `grammar.lark`.

lark is imported, and its LALR tables built, only the first time a rule file is actually parsed:
the usual start-up path reads the parsed rule set from the cache (loader.py) and never gets here.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import re
from collections.abc import Iterable
from pathlib import Path as FsPath
from typing import TYPE_CHECKING, Any

from kvreplay.rules import syntax as s
from kvreplay.rules.errors import Problem, RuleFileError
from kvreplay.rules.loader import GRAMMAR_PATH, cache_dir

if TYPE_CHECKING:
    from lark import Lark

LARK_CACHE_PREFIX = "lark-"


def grammar_text() -> str:
    return GRAMMAR_PATH.read_text(encoding="utf-8")


def lark_cache_path(grammar: str) -> str | bool:
    """Where lark caches its LALR tables for this grammar (next to the rules cache), or False."""
    directory = cache_dir()
    if directory is None:
        return False
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    digest = hashlib.sha256(grammar.encode("utf-8")).hexdigest()[:16]
    return str(directory / f"{LARK_CACHE_PREFIX}{digest}.cache")


@functools.cache
def _lark() -> Lark:
    from lark import Lark

    grammar = grammar_text()
    options: dict[str, Any] = {"parser": "lalr", "start": ["start", "expr"],
                               "propagate_positions": True, "maybe_placeholders": True}
    cache = lark_cache_path(grammar)
    if cache:
        try:
            return Lark(grammar, cache=cache, **options)
        except Exception:  # a damaged table cache (e.g. a concurrent write): rebuild
            FsPath(str(cache)).unlink(missing_ok=True)
    return Lark(grammar, **options)


@functools.cache
def _token_names() -> dict[str, str]:
    """Terminal name -> how to show it in an error: keywords quoted, classes by name."""
    from lark.lexer import PatternStr

    shown: dict[str, str] = {"$END": "end of file"}
    for terminal in _lark().terminals:
        pattern = terminal.pattern
        if isinstance(pattern, PatternStr):
            shown[terminal.name] = f'"{pattern.value}"'
        else:
            shown[terminal.name] = terminal.name
    return shown


def _expected(names: Iterable[str]) -> tuple[str, ...]:
    shown = _token_names()
    return tuple(sorted({shown.get(n, n) for n in names or ()}))


def _caret(text: str, line: int, column: int) -> str:
    lines = text.splitlines()
    if not 1 <= line <= len(lines):
        return ""
    source = lines[line - 1]
    return f"  {source}\n  {' ' * (column - 1)}^"


def _syntax_problem(exc: Exception, text: str, file: str, line0: int = 1,
                    col0: int = 1, end: str = "end of file") -> Problem:
    """A lark UnexpectedInput as a Problem, shifted by (line0, col0) for embedded text."""
    from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedToken

    lines = text.split("\n")
    line = getattr(exc, "line", None)
    column = getattr(exc, "column", None)
    at_end = isinstance(exc, UnexpectedEOF) or (
        isinstance(exc, UnexpectedToken) and exc.token.type == "$END")
    if at_end or not isinstance(line, int) or line < 1 or not isinstance(column, int) \
            or column < 1:
        line, column = len(lines), len(lines[-1]) + 1
    candidates: Iterable[str]
    if isinstance(exc, UnexpectedToken):
        token = exc.token
        found = end if token.type == "$END" else f"`{token}`"
        message = f"unexpected {found}"
        candidates = exc.expected
    elif isinstance(exc, UnexpectedCharacters):
        message = f"unexpected character `{exc.char}`"
        candidates = exc.allowed
    elif isinstance(exc, UnexpectedEOF):
        message = f"unexpected {end}"
        candidates = exc.expected
    else:  # pragma: no cover - lark raises only the three above
        message = str(exc)
        candidates = set()
    # LALR merges the lookaheads of states with one core, so `expected` can list tokens that
    # would fail a step later; the interactive parser replays each one to keep the exact set.
    interactive = getattr(exc, "interactive_parser", None)
    if interactive is not None:
        candidates = interactive.accepts()
    expected = _expected(candidates)
    before = lines[line - 1][: column - 1] if line <= len(lines) else ""
    if re.search(r"\b(any|every|no)\s+$", before) and not at_end:
        message += " (inside `and`, `or` or `not`, write a quantifier in parentheses: " \
                   "`(any role r: ...)`)"
    context = _caret(text, line, column)
    abs_line = line0 + line - 1
    abs_col = col0 + column - 1 if line == 1 else column
    return Problem(file, abs_line, abs_col, message, expected, context or None)


def parse_file(text: str, file: str) -> s.RuleFile:
    """Parse one rule file; raises RuleFileError (file:line:col, expected tokens) when malformed."""
    from lark.exceptions import UnexpectedInput

    try:
        tree = _lark().parse(text, start="start")
    except UnexpectedInput as exc:
        raise RuleFileError([_syntax_problem(exc, text, file)]) from None
    builder = _Builder(file)
    heading, summary = _header(text, FsPath(file).stem)
    result = builder.rule_file(tree, heading, summary)
    if builder.problems:
        raise RuleFileError(builder.problems)
    return result


def parse_expr(text: str, file: str = "<expr>") -> s.Expr:
    """Parse one condition expression (tests and tools)."""
    from lark.exceptions import UnexpectedInput

    try:
        tree = _lark().parse(text, start="expr")
    except UnexpectedInput as exc:
        raise RuleFileError([_syntax_problem(exc, text, file)]) from None
    builder = _Builder(file)
    expr = builder.expr(tree)
    if builder.problems:
        raise RuleFileError(builder.problems)
    return expr


def _header(text: str, fallback: str) -> tuple[str, str]:
    """The file's concern from its first line, `# Heading: summary` (the matrix sections)."""
    first = text.lstrip().splitlines()[0] if text.strip() else ""
    if not first.startswith("#"):
        return fallback, ""
    heading, _, summary = first.lstrip("#").strip().partition(":")
    return heading.strip(), summary.strip()


_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


def _unescape(raw: str) -> str:
    return _ESCAPE.sub(lambda m: _ESCAPES.get(m.group(1), m.group(1)), raw)


def _quote_width(token: str) -> int:
    return 3 if token.startswith('"""') else 1


class _Builder:
    """Lark tree -> syntax values, collecting problems (bad templates) instead of stopping."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.problems: list[Problem] = []

    # --- positions and leaves ---------------------------------------------------------------

    def pos(self, node: Any) -> s.Pos:
        if hasattr(node, "meta") and not node.meta.empty:
            return s.Pos(self.file, node.meta.line, node.meta.column)
        if hasattr(node, "line") and node.line is not None:
            return s.Pos(self.file, node.line, node.column)
        for child in getattr(node, "children", ()):
            if child is not None:
                return self.pos(child)
        return s.Pos(self.file, 1, 1)

    def text(self, tree: Any) -> str:
        """Adjacent strings concatenate; triple-quoted ones are dedented like docstrings."""
        out = []
        for token in tree.children:
            width = _quote_width(token)
            inner = _unescape(str(token)[width:-width])
            out.append(inspect.cleandoc(inner) if width == 3 else inner)
        return "".join(out)

    def template(self, tree: Any) -> s.Template:
        parts: list[str | s.Expr] = []
        for token in tree.children:
            parts.extend(self._template_token(token))
        merged: list[str | s.Expr] = []
        for part in parts:
            if isinstance(part, str) and merged and isinstance(merged[-1], str):
                merged[-1] += part
            elif part != "":
                merged.append(part)
        return s.Template(tuple(merged), self.pos(tree))

    def _template_token(self, token: Any) -> list[str | s.Expr]:
        raw = str(token)
        width = _quote_width(raw)
        body = raw[width:-width]
        parts: list[str | s.Expr] = []
        literal: list[str] = []
        i = 0
        while i < len(body):
            ch = body[i]
            if ch in "{}" and body[i + 1 : i + 2] == ch:
                literal.append(ch)
                i += 2
                continue
            if ch == "}":
                self._problem_at(token, width + i, "unmatched `}` in message (write `}}`)")
                i += 1
                continue
            if ch != "{":
                literal.append(ch)
                i += 1
                continue
            end = body.find("}", i + 1)
            if end < 0:
                self._problem_at(token, width + i, "unclosed `{` in message (write `{{`)")
                break
            parts.append(_unescape("".join(literal)))
            literal = []
            parts.append(self._embedded(token, width + i + 1, body[i + 1 : end]))
            i = end + 1
        parts.append(_unescape("".join(literal)))
        return parts

    def _offset_pos(self, token: Any, offset: int) -> tuple[int, int]:
        raw = str(token)
        before = raw[:offset]
        newlines = before.count("\n")
        if newlines:
            return token.line + newlines, offset - before.rfind("\n")
        return token.line, token.column + offset

    def _problem_at(self, token: Any, offset: int, message: str) -> None:
        line, column = self._offset_pos(token, offset)
        self.problems.append(Problem(self.file, line, column, message))

    def _embedded(self, token: Any, offset: int, text: str) -> s.Expr:
        from lark.exceptions import UnexpectedInput

        line, column = self._offset_pos(token, offset)
        try:
            tree = _lark().parse(text, start="expr")
        except UnexpectedInput as exc:
            self.problems.append(_syntax_problem(exc, text, self.file, line, column,
                                                 end="end of the `{...}` expression"))
            return s.Lit("", s.Pos(self.file, line, column))
        inner = _Builder(self.file)
        expr = inner.expr(tree)
        return _shift(expr, line, column)

    # --- file structure ---------------------------------------------------------------------

    def rule_file(self, tree: Any, heading: str, summary: str) -> s.RuleFile:
        rules: list[s.Rule] = []
        defines: list[s.Define] = []
        accepted: list[s.Accepted] = []
        for item in tree.children:
            if item.data == "rule":
                rules.append(self.rule(item))
            elif item.data == "define":
                defines.append(self.define(item))
            else:
                accepted.append(self.accepted(item))
        return s.RuleFile(self.file, heading, summary, tuple(rules), tuple(defines),
                          tuple(accepted))

    def rule(self, tree: Any) -> s.Rule:
        rule_id, severity, title, rationale, checks = tree.children
        if checks.data == "single_check":
            bodies = [checks.children[0]]
        else:
            bodies = [block.children[0] for block in checks.children]
        return s.Rule(
            id=str(rule_id),
            severity=severity.data,
            title=self.text(title.children[0]),
            rationale=self.text(rationale.children[0]),
            checks=tuple(self.check(b) for b in bodies),
            pos=self.pos(rule_id),
        )

    def check(self, tree: Any) -> s.Check:
        children = list(tree.children)
        binders_tree, when, at_clause = children[0], children[1], children[2]
        hint_tree = children[-1]
        message_tree = children[-2]
        related_trees = children[3:-2]
        binders = () if binders_tree is None else tuple(
            self.binder(b) for b in binders_tree.children)
        return s.Check(
            binders=binders,
            when=self.expr(when),
            at=self.path(at_clause.children[0]),
            related=tuple(
                s.RelatedClause(self.path(r.children[0]), self.template(r.children[1]))
                for r in related_trees
            ),
            message=self.template(message_tree.children[0]),
            hint=None if hint_tree is None else self.template(hint_tree.children[0]),
            pos=self.pos(when) if binders_tree is None else self.pos(binders_tree),
        )

    def binder(self, tree: Any) -> s.Binder:
        quant, *rest = (c for c in tree.children if c is not None)
        kind = {"role_binder": "role", "pair_binder": "pair", "field_binder": "field"}[tree.data]
        names = tuple(str(t) for t in rest if not hasattr(t, "data"))
        paths = tuple(self.path(t) for t in rest if hasattr(t, "data"))
        return s.Binder(quant.data, kind, names, paths, self.pos(tree))  # type: ignore[arg-type]

    def define(self, tree: Any) -> s.Define:
        children = [c for c in tree.children if c is not None]
        name, *params, body = children
        return s.Define(str(name), tuple(str(p) for p in params), self.expr(body), self.pos(name))

    def accepted(self, tree: Any) -> s.Accepted:
        text, *cases = tree.children
        return s.Accepted(self.text(text), tuple(str(c)[1:-1] for c in cases), self.pos(text))

    # --- expressions ------------------------------------------------------------------------

    def path(self, tree: Any) -> s.Path:
        return s.Path(tuple(str(t) for t in tree.children), self.pos(tree))

    def literal(self, tree: Any) -> s.Lit:
        pos = self.pos(tree)
        if tree.data == "string":
            token = str(tree.children[0])
            width = _quote_width(token)
            return s.Lit(_unescape(token[width:-width]), pos)
        if tree.data == "number":
            token = str(tree.children[0])
            is_int = re.fullmatch(r"-?\d+", token) is not None
            return s.Lit(int(token) if is_int else float(token), pos)
        return s.Lit(tree.data == "true", pos)

    def expr(self, tree: Any) -> s.Expr:
        data = tree.data
        pos = self.pos(tree)
        kids = tree.children
        if data == "path":
            return self.path(tree)
        if data in ("string", "number", "true", "false"):
            return self.literal(tree)
        if data == "list":
            return s.ListLit(tuple(self.literal(c) for c in kids if c is not None), pos)
        if data in ("or_expr", "and_expr"):
            operands = tuple(self.expr(c) for c in kids)
            return s.BoolOp("or" if data == "or_expr" else "and", operands, pos)
        if data == "negation":
            return s.Not(self.expr(kids[0]), pos)
        if data == "quantified":
            quantifier, var, body = kids
            return s.Quantified(quantifier.data, str(var), self.expr(body), pos)
        if data == "compare":
            left, op, right = kids
            return s.Compare(str(op), self.expr(left), self.expr(right), pos)
        if data in ("member", "not_member"):
            items = self.expr(kids[1])
            assert isinstance(items, s.ListLit)
            return s.Member(self.expr(kids[0]), items, data == "not_member", pos)
        if data == "has":
            return s.Has(self.path(kids[0]), pos)
        if data in ("is_null", "is_not_null"):
            return s.IsNull(self.expr(kids[0]), data == "is_not_null", pos)
        if data in ("is_default", "is_not_default"):
            return s.IsDefault(self.expr(kids[0]), data == "is_not_default", pos)
        if data == "call":
            name, *args = kids
            return s.Call(str(name), tuple(self.expr(a) for a in args if a is not None),
                          self.pos(name))
        raise AssertionError(f"unhandled tree {data}")  # pragma: no cover


def _shift(expr: s.Expr, line: int, column: int) -> s.Expr:
    """Move an expression parsed from embedded text to its place in the rule file."""

    def move(pos: s.Pos) -> s.Pos:
        if pos.line == 1:
            return s.Pos(pos.file, line, column + pos.column - 1)
        return s.Pos(pos.file, line + pos.line - 1, pos.column)

    def walk(value: Any) -> Any:
        if isinstance(value, s.Pos):
            return move(value)
        if isinstance(value, tuple):
            return tuple(walk(v) for v in value)
        if hasattr(type(value), "__attrs_attrs__"):
            import attrs

            return attrs.evolve(value, **{
                f.name: walk(getattr(value, f.name)) for f in attrs.fields(type(value))
            })
        return value

    return walk(expr)  # type: ignore[no-any-return]
