"""Syntax tree -> rules-language text, with only the parentheses the grammar needs.

The matrix and `explain` show conditions in this form, so the documentation is the rule itself.
"""

from __future__ import annotations

from kvreplay.rules import syntax as s

# Binding strength, loosest first, as in grammar.lark.
_QUANTIFIED, _OR, _AND, _NOT, _TEST, _OPERAND = range(6)


def literal(value: s.LiteralValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return repr(value)


def _wrap(text: str, level: int, needed: int) -> str:
    return f"({text})" if level < needed else text


def expr(e: s.Expr, needed: int = _QUANTIFIED) -> str:
    level, text = _expr(e)
    return _wrap(text, level, needed)


def _expr(e: s.Expr) -> tuple[int, str]:
    if isinstance(e, s.Path):
        return _OPERAND, ".".join(e.parts)
    if isinstance(e, s.Lit):
        return _OPERAND, literal(e.value)
    if isinstance(e, s.ListLit):
        return _OPERAND, "[" + ", ".join(literal(i.value) for i in e.items) + "]"
    if isinstance(e, s.Call):
        return _OPERAND, f"{e.name}(" + ", ".join(expr(a) for a in e.args) + ")"
    if isinstance(e, s.Compare):
        return _TEST, f"{expr(e.left, _OPERAND)} {e.op} {expr(e.right, _OPERAND)}"
    if isinstance(e, s.Member):
        word = "not in" if e.negated else "in"
        return _TEST, f"{expr(e.operand, _OPERAND)} {word} {expr(e.items)}"
    if isinstance(e, s.Has):
        return _TEST, f"has {expr(e.path)}"
    if isinstance(e, s.IsNull):
        return _TEST, f"{expr(e.operand, _OPERAND)} is {'not ' if e.negated else ''}null"
    if isinstance(e, s.IsDefault):
        return _TEST, f"{expr(e.operand, _OPERAND)} is {'not ' if e.negated else ''}default"
    if isinstance(e, s.Not):
        return _NOT, f"not {expr(e.operand, _NOT)}"
    if isinstance(e, s.BoolOp):
        level, inner = (_AND, _NOT) if e.op == "and" else (_OR, _AND)
        return level, f" {e.op} ".join(expr(o, inner) for o in e.operands)
    if isinstance(e, s.Quantified):
        return _QUANTIFIED, f"{e.kind} role {e.var}: {expr(e.body)}"
    raise AssertionError(f"cannot show {e!r}")  # pragma: no cover


def binder(b: s.Binder) -> str:
    if b.kind == "role":
        return f"{b.quant} role {b.names[0]}"
    if b.kind == "pair":
        return f"{b.quant} pair {b.names[0]}, {b.names[1]} of roles"
    return f"{b.quant} field {b.names[0]} in [" + ", ".join(expr(p) for p in b.paths) + "]"


def binders(check: s.Check) -> str | None:
    if not check.binders:
        return None
    return "for " + ", ".join(binder(b) for b in check.binders)


def condition(check: s.Check) -> str:
    """`for ... when ...` on one line: what the matrix shows for a check."""
    head = binders(check)
    when = f"when {expr(check.when)}"
    return when if head is None else f"{head} {when}"


def check_lines(check: s.Check) -> list[str]:
    """The check's decisive clauses, one per line (explain)."""
    lines = [b] if (b := binders(check)) else []
    lines.append(f"when {expr(check.when)}")
    lines.append(f"at {expr(check.at)}")
    return lines


def define(d: s.Define) -> str:
    return f"{d.name}({', '.join(d.params)}): {expr(d.body)}"
