"""Static checks of a parsed rule set: names resolve, kinds fit, predicates expand.

Everything a rule file can get wrong beyond syntax is found here, at load time, with its
file:line:col, so evaluation never meets an unknown field or a comparison of a string with a
number.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from kvreplay.rules import fields as f
from kvreplay.rules import syntax as s
from kvreplay.rules.errors import Problem, RuleFileError
from kvreplay.rules.expand import Expander
from kvreplay.rules.functions import BUILTINS
from kvreplay.schema.suggest import hint_for

# Expression kinds: a field kind, or "role" for a role variable itself.
ExprKind = str
_COMPARABLE = {"num", "str", "bool", "any"}


@attrs.frozen
class Var:
    kind: str  # "role" | "field"
    options: tuple[s.Path, ...] = ()
    value_kind: ExprKind = "any"
    infos: tuple[f.FieldInfo | None, ...] = ()


Scope = Mapping[str, Var]


@attrs.frozen
class PathInfo:
    kind: ExprKind
    cls: type | None
    infos: tuple[f.FieldInfo | None, ...]  # the final field(s): several for a field variable
    field_var: bool = False


# --- kinds and names ----------------------------------------------------------------------


class Checker:
    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems

    def problem(self, pos: s.Pos, message: str, hint: str | None = None) -> None:
        text = message if hint is None else f"{message} ({hint})"
        self.problems.append(Problem(pos.file, pos.line, pos.column, text))

    def path(self, p: s.Path, scope: Scope) -> PathInfo | None:
        root = p.root
        var = scope.get(root)
        if var is not None and var.kind == "field":
            if len(p.parts) > 1:
                self.problem(p.pos, f"field variable `{root}` has no fields")
                return None
            return PathInfo(var.value_kind, None, var.infos, field_var=True)
        if var is not None:
            cls: type | None = f.ROLE_CLASS
            kind: ExprKind = "role"
            info: f.FieldInfo | None = None
        else:
            roots = f.root_fields()
            if root == "roles":
                self.problem(p.pos, "roles are read through a role variable",
                             "`each role r` or `any role r: ...`")
                return None
            if root not in roots:
                self.problem(p.pos, f"unknown name `{root}`",
                             hint_for(root, [*scope, *roots, "agentic"], "names"))
                return None
            info = roots[root]
            kind, cls = info.kind, info.cls
        for name in p.parts[1:]:
            if cls is None:
                self.problem(p.pos, f"`{'.'.join(p.parts)}`: a {kind} value has no field `{name}`")
                return None
            available = f.fields_of(cls)
            if name not in available:
                self.problem(p.pos, f"`{cls.__name__}` has no field `{name}`",
                             hint_for(name, available, "fields"))
                return None
            info = available[name]
            kind, cls = info.kind, info.cls
        return PathInfo(kind, cls, (info,))

    def value(self, e: s.Expr, scope: Scope) -> ExprKind | None:
        """The kind of an expression used as a value (None after reporting a problem)."""
        if isinstance(e, s.Path):
            info = self.path(e, scope)
            return None if info is None else info.kind
        if isinstance(e, s.Lit):
            return "bool" if isinstance(e.value, bool) else \
                "str" if isinstance(e.value, str) else "num"
        if isinstance(e, s.ListLit):
            self.problem(e.pos, "a list can only follow `in`")
            return None
        if isinstance(e, s.Call):
            return self.call(e, scope)
        return self.condition(e, scope)

    def call(self, e: s.Call, scope: Scope) -> ExprKind | None:
        builtin = BUILTINS.get(e.name)
        if builtin is None:
            self.problem(e.pos, f"unknown function or predicate `{e.name}`",
                         hint_for(e.name, BUILTINS, "functions"))
            return None
        if len(e.args) != len(builtin.params):
            self.problem(e.pos, f"`{e.name}` takes {len(builtin.params)} argument(s), "
                                f"got {len(e.args)}")
            return None
        for arg, want in zip(e.args, builtin.params, strict=True):
            if want == "field":
                var = scope.get(arg.root) if isinstance(arg, s.Path) else None
                if not (isinstance(arg, s.Path) and len(arg.parts) == 1 and var is not None
                        and var.kind == "field"):
                    self.problem(_pos(arg), f"`{e.name}` takes a field variable")
                    return None
                continue
            if want == "path":
                if not isinstance(arg, s.Path):
                    self.problem(_pos(arg), f"`{e.name}` takes a field path")
                    return None
                if self.path(arg, scope) is None:
                    return None
                continue
            kind = self.value(arg, scope)
            if kind is None:
                return None
            if want != "any" and kind not in (want, "any"):
                self.problem(_pos(arg), f"`{e.name}` takes a {want}, got a {kind}")
                return None
        return builtin.result

    def condition(self, e: s.Expr, scope: Scope) -> ExprKind | None:
        """Check an expression that must be a (three-valued) truth value."""
        if isinstance(e, s.BoolOp):
            ok = True
            for o in e.operands:
                ok = self.truth(o, scope) and ok
            return "bool" if ok else None
        if isinstance(e, s.Not):
            return "bool" if self.truth(e.operand, scope) else None
        if isinstance(e, s.Quantified):
            if e.var in scope:
                self.problem(e.pos, f"`{e.var}` is already bound; choose another name")
                return None
            inner = {**scope, e.var: Var("role")}
            return "bool" if self.truth(e.body, inner) else None
        if isinstance(e, s.Compare):
            return self.compare(e, scope)
        if isinstance(e, s.Member):
            kind = self.value(e.operand, scope)
            if kind is None:
                return None
            if kind not in ("str", "num", "any"):
                self.problem(e.pos, f"`in` needs a string or a number, got a {kind}")
                return None
            for item in e.items.items:
                item_kind = self.value(item, scope)
                if kind != "any" and item_kind != kind:
                    self.problem(item.pos, f"list item is a {item_kind}, the value a {kind}")
                    return None
            return "bool"
        if isinstance(e, s.Has):
            info = self.path(e.path, scope)
            if info is not None and info.kind == "role":
                self.problem(e.pos, "`has` needs a field, not a role")
                return None
            return None if info is None else "bool"
        if isinstance(e, s.IsNull):
            kind = self.value(e.operand, scope)
            return None if kind is None else "bool"
        if isinstance(e, s.IsDefault):
            return self.is_default(e, scope)
        return self.value(e, scope)

    def truth(self, e: s.Expr, scope: Scope) -> bool:
        kind = self.condition(e, scope)
        if kind is None:
            return False
        if kind not in ("bool", "any"):
            self.problem(_pos(e), f"expected a condition, got a {kind} value",
                         "compare it, or test it with `has` / `is null`")
            return False
        return True

    def compare(self, e: s.Compare, scope: Scope) -> ExprKind | None:
        left = self.value(e.left, scope)
        right = self.value(e.right, scope)
        if left is None or right is None:
            return None
        for kind, side in ((left, e.left), (right, e.right)):
            if kind not in _COMPARABLE:
                self.problem(_pos(side), f"a {kind} cannot be compared")
                return None
        if "any" not in (left, right) and left != right:
            self.problem(e.pos, f"`{e.op}` compares a {left} with a {right}")
            return None
        if e.op not in ("==", "!=") and not {left, right} <= {"num", "any"}:
            self.problem(e.pos, f"`{e.op}` needs numbers, got {left} and {right}")
            return None
        return "bool"

    def is_default(self, e: s.IsDefault, scope: Scope) -> ExprKind | None:
        if not isinstance(e.operand, s.Path):
            self.problem(e.pos, "`is default` needs a field path")
            return None
        info = self.path(e.operand, scope)
        if info is None:
            return None
        if info.kind in ("role", "obj") or not info.infos or any(
                i is None or not i.has_default for i in info.infos):
            self.problem(e.pos, f"`{'.'.join(e.operand.parts)}` has no default to compare with")
            return None
        return "bool"

    def template(self, t: s.Template, scope: Scope) -> None:
        for part in t.parts:
            if isinstance(part, str):
                continue
            kind = self.value(part, scope)
            if kind == "obj":
                self.problem(_pos(part), "a whole section cannot be shown in a message; "
                                         "name one of its fields")

    def binders(self, binders: tuple[s.Binder, ...]) -> dict[str, Var] | None:
        scope: dict[str, Var] = {}
        ok = True
        seen_some = False
        for b in binders:
            if b.quant == "each" and seen_some:
                self.problem(b.pos, "`each` binders come before `some` binders")
                ok = False
            seen_some = seen_some or b.quant == "some"
            for name in b.names:
                if name in scope or name in f.root_fields() or name == "agentic":
                    self.problem(b.pos, f"`{name}` is already a name; choose another")
                    ok = False
            if b.kind in ("role", "pair"):
                if len(set(b.names)) != len(b.names):
                    self.problem(b.pos, "a pair needs two different names")
                    ok = False
                scope.update({n: Var("role") for n in b.names})
                continue
            infos: list[f.FieldInfo | None] = []
            kinds: set[str] = set()
            for p in b.paths:
                info = self.path(p, scope)
                if info is None:
                    ok = False
                    continue
                if info.kind in ("obj", "role") or info.field_var:
                    self.problem(p.pos, "a field variable ranges over leaf fields")
                    ok = False
                    continue
                infos.extend(info.infos)
                kinds.add(info.kind)
            value_kind = next(iter(kinds)) if len(kinds) == 1 else "any"
            scope[b.names[0]] = Var("field", b.paths, value_kind, tuple(infos))
        return scope if ok else None

    def check(self, c: s.Check) -> None:
        scope = self.binders(c.binders)
        if scope is None:
            return
        self.truth(c.when, scope)
        self.path(c.at, scope)
        for r in c.related:
            self.path(r.path, scope)
            self.template(r.message, scope)
        self.template(c.message, scope)
        if c.hint is not None:
            self.template(c.hint, scope)


def _pos(e: s.Expr) -> s.Pos:
    return e.pos


def analyze(ruleset: s.RuleSet) -> None:
    """Raise RuleFileError listing every problem of a parsed rule set."""
    problems: list[Problem] = []
    expander = Expander(ruleset.defines, problems)
    checker = Checker(problems)
    # Predicates take untyped parameters: their bodies are checked where they are expanded.
    seen: dict[str, s.Rule] = {}
    for rule in ruleset.rules:
        if rule.id in seen:
            checker.problem(rule.pos, f"rule {rule.id} is already defined at {seen[rule.id].pos}")
            continue
        seen[rule.id] = rule
        for check in rule.checks:
            checker.check(expander.check(check))
    for a in ruleset.accepted:
        for case in a.cases:
            rule_id, _, name = case.partition("/")
            if not name:
                checker.problem(a.pos, f"case `{case}` should read RULE-ID/case-file")
            elif rule_id not in seen:
                checker.problem(a.pos, f"case `{case}` names no known rule",
                                hint_for(rule_id, seen, "rule IDs"))
    if problems:
        raise RuleFileError(problems)
