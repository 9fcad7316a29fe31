"""Inlining `define`d predicates where they are called, and the `agentic` shorthand.

Predicates are global to the rule set (any rule file may call one defined in another) and take
untyped parameters: a parameter used as `p.x` with argument `r` becomes `r.x`.
"""

from __future__ import annotations

import attrs

from kvreplay.rules import syntax as s
from kvreplay.rules.errors import Problem
from kvreplay.rules.functions import BUILTINS


class Expander:
    """Inlines `define`d predicates and rewrites the `agentic` shorthand to `traffic.agentic`."""

    def __init__(self, defines: tuple[s.Define, ...], problems: list[Problem]) -> None:
        self.problems = problems
        self.defines: dict[str, s.Define] = {}
        for d in defines:
            if d.name in BUILTINS:
                self.problem(d.pos, f"`{d.name}` is a built-in function; choose another name")
            elif d.name in self.defines:
                first = self.defines[d.name].pos
                self.problem(d.pos, f"predicate `{d.name}` is already defined at {first}")
            elif len(set(d.params)) != len(d.params):
                self.problem(d.pos, f"predicate `{d.name}` repeats a parameter name")
            else:
                self.defines[d.name] = d

    def problem(self, pos: s.Pos, message: str) -> None:
        self.problems.append(Problem(pos.file, pos.line, pos.column, message))

    def expr(self, e: s.Expr, stack: tuple[str, ...] = ()) -> s.Expr:
        if isinstance(e, s.Path):
            if e.parts == ("agentic",):
                return s.Path(("traffic", "agentic"), e.pos)
            return e
        if isinstance(e, s.Call):
            args = tuple(self.expr(a, stack) for a in e.args)
            d = self.defines.get(e.name)
            if d is None:
                return s.Call(e.name, args, e.pos)
            if e.name in stack:
                self.problem(e.pos, f"predicate `{e.name}` calls itself")
                return s.Lit(False, e.pos)
            if len(args) != len(d.params):
                self.problem(e.pos, f"predicate `{e.name}` takes {len(d.params)} argument(s), "
                                    f"got {len(args)}")
                return s.Lit(False, e.pos)
            body = _substitute(d.body, dict(zip(d.params, args, strict=True)), self)
            return self.expr(body, (*stack, e.name))
        if isinstance(e, s.Compare):
            return attrs.evolve(e, left=self.expr(e.left, stack), right=self.expr(e.right, stack))
        if isinstance(e, s.Member):
            return attrs.evolve(e, operand=self.expr(e.operand, stack))
        if isinstance(e, s.IsNull | s.IsDefault):
            return attrs.evolve(e, operand=self.expr(e.operand, stack))
        if isinstance(e, s.Not):
            return attrs.evolve(e, operand=self.expr(e.operand, stack))
        if isinstance(e, s.BoolOp):
            return attrs.evolve(e, operands=tuple(self.expr(o, stack) for o in e.operands))
        if isinstance(e, s.Quantified):
            return attrs.evolve(e, body=self.expr(e.body, stack))
        if isinstance(e, s.Has):
            path = self.expr(e.path, stack)
            return attrs.evolve(e, path=path) if isinstance(path, s.Path) else e
        return e

    def template(self, t: s.Template) -> s.Template:
        return s.Template(tuple(p if isinstance(p, str) else self.expr(p) for p in t.parts), t.pos)

    def check(self, c: s.Check) -> s.Check:
        at = self.expr(c.at)
        return attrs.evolve(
            c,
            when=self.expr(c.when),
            at=at if isinstance(at, s.Path) else c.at,
            related=tuple(
                s.RelatedClause(p if isinstance(p := self.expr(r.path), s.Path) else r.path,
                                self.template(r.message))
                for r in c.related
            ),
            message=self.template(c.message),
            hint=None if c.hint is None else self.template(c.hint),
        )


def _substitute(e: s.Expr, args: dict[str, s.Expr], ex: Expander) -> s.Expr:
    """Replace parameter names by argument expressions (paths extend: `p.x` with p := r -> r.x)."""

    def sub(node: s.Expr) -> s.Expr:
        if isinstance(node, s.Path):
            arg = args.get(node.root)
            if arg is None:
                return node
            if len(node.parts) == 1:
                return arg
            if isinstance(arg, s.Path):
                return s.Path(arg.parts + node.parts[1:], node.pos)
            ex.problem(node.pos, f"`{node.root}` is given a value that has no fields")
            return node
        if isinstance(node, s.Quantified):
            if node.var in args or any(
                    isinstance(a, s.Path) and a.root == node.var for a in args.values()):
                ex.problem(node.pos, f"quantifier variable `{node.var}` clashes with a parameter "
                                     "or an argument; rename it")
            return attrs.evolve(node, body=sub(node.body))
        if isinstance(node, s.Call):
            return attrs.evolve(node, args=tuple(sub(a) for a in node.args))
        if isinstance(node, s.Compare):
            return attrs.evolve(node, left=sub(node.left), right=sub(node.right))
        if isinstance(node, s.Member | s.IsNull | s.IsDefault | s.Not):
            return attrs.evolve(node, operand=sub(node.operand))
        if isinstance(node, s.BoolOp):
            return attrs.evolve(node, operands=tuple(sub(o) for o in node.operands))
        if isinstance(node, s.Has):
            path = sub(node.path)
            if isinstance(path, s.Path):
                return attrs.evolve(node, path=path)
            ex.problem(node.pos, "`has` needs a field path")
            return node
        return node

    return sub(e)


def expand_check(check: s.Check, defines: tuple[s.Define, ...]) -> s.Check:
    """A check with its predicates inlined (assumes the rule set passed analysis)."""
    return Expander(defines, []).check(check)
