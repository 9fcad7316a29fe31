"""The rules language as data: what the parser builds and the evaluator compiles.

Plain frozen values; codegen.py turns a checked RuleSet into Python.
"""

from __future__ import annotations

from typing import Literal as TypingLiteral
from typing import TypeAlias

import attrs

Severity: TypeAlias = TypingLiteral["error", "warning"]
LiteralValue: TypeAlias = str | int | float | bool

@attrs.frozen
class Pos:
    """Where a construct starts in a rule file (1-based)."""

    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


@attrs.frozen
class Path:
    """A dotted field path: a variable or Spec field, then attribute names."""

    parts: tuple[str, ...]
    pos: Pos

    @property
    def root(self) -> str:
        return self.parts[0]


@attrs.frozen
class Lit:
    value: LiteralValue
    pos: Pos


@attrs.frozen
class ListLit:
    items: tuple[Lit, ...]
    pos: Pos


@attrs.frozen
class Call:
    name: str
    args: tuple[Expr, ...]
    pos: Pos


@attrs.frozen
class Compare:
    op: str  # == != < <= > >=
    left: Expr
    right: Expr
    pos: Pos


@attrs.frozen
class Member:
    operand: Expr
    items: ListLit
    negated: bool
    pos: Pos


@attrs.frozen
class Has:
    path: Path
    pos: Pos


@attrs.frozen
class IsNull:
    operand: Expr
    negated: bool
    pos: Pos


@attrs.frozen
class IsDefault:
    operand: Expr
    negated: bool
    pos: Pos


@attrs.frozen
class Not:
    operand: Expr
    pos: Pos


@attrs.frozen
class BoolOp:
    op: TypingLiteral["and", "or"]
    operands: tuple[Expr, ...]
    pos: Pos


@attrs.frozen
class Quantified:
    """`any|every|no role x: body` over the roles present in the topology."""

    kind: TypingLiteral["any", "every", "no"]
    var: str
    body: Expr
    pos: Pos


Expr: TypeAlias = (
    Path | Lit | ListLit | Call | Compare | Member | Has | IsNull | IsDefault | Not | BoolOp
    | Quantified
)


@attrs.frozen
class Binder:
    """`each|some role r`, `each|some pair a, b of roles`, `each|some field f in [paths]`."""

    quant: TypingLiteral["each", "some"]
    kind: TypingLiteral["role", "pair", "field"]
    names: tuple[str, ...]
    paths: tuple[Path, ...]
    pos: Pos


@attrs.frozen
class Template:
    """Message text: literal pieces and interpolated expressions, in order."""

    parts: tuple[str | Expr, ...]
    pos: Pos


@attrs.frozen
class RelatedClause:
    path: Path
    message: Template


@attrs.frozen
class Check:
    binders: tuple[Binder, ...]
    when: Expr
    at: Path
    related: tuple[RelatedClause, ...]
    message: Template
    hint: Template | None
    pos: Pos


@attrs.frozen
class Rule:
    id: str
    severity: Severity
    title: str
    rationale: str
    checks: tuple[Check, ...]
    pos: Pos

    @property
    def file(self) -> str:
        return self.pos.file


@attrs.frozen
class Define:
    """A named predicate, expanded in place where it is called."""

    name: str
    params: tuple[str, ...]
    body: Expr
    pos: Pos


@attrs.frozen
class Accepted:
    """A configuration family accepted on purpose, and the corpus cases that show it passes."""

    text: str
    cases: tuple[str, ...]
    pos: Pos


@attrs.frozen
class RuleFile:
    """One rule file: a concern. Its first comment line reads `# Heading: summary`."""

    name: str
    heading: str
    summary: str
    rules: tuple[Rule, ...]
    defines: tuple[Define, ...]
    accepted: tuple[Accepted, ...]


@attrs.frozen
class RuleSet:
    """Every rule file, in load order, as written (predicates are expanded when compiled)."""

    files: tuple[RuleFile, ...]

    @property
    def rules(self) -> tuple[Rule, ...]:
        return tuple(r for f in self.files for r in f.rules)

    @property
    def defines(self) -> tuple[Define, ...]:
        return tuple(d for f in self.files for d in f.defines)

    @property
    def accepted(self) -> tuple[Accepted, ...]:
        return tuple(a for f in self.files for a in f.accepted)
