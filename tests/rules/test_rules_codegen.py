"""The generated rule code agrees with a plain interpreter of the rules' syntax tree.

The interpreter below is written from the language's definition (docs/rules.md: Kleene logic,
binders, `is default`) and walks the expanded syntax tree directly; hypothesis draws Specs with
unknown (None) values in many places, and both must report exactly the same findings.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kvreplay.rules import fields as f
from kvreplay.rules import functions as fn
from kvreplay.rules import syntax as s
from kvreplay.rules.expand import expand_check
from kvreplay.rules.loader import shipped_ruleset
from kvreplay.rules.runner import Runner
from kvreplay.schema import spec as sp

Env = dict[str, Any]  # role variables -> Role; field variables -> (value, path, name, default)


def _path_value(p: s.Path, env: Env, spec: sp.Spec) -> Any:
    bound = env.get(p.root)
    if isinstance(bound, tuple):
        return bound[0]
    value: Any = bound if bound is not None else spec
    for name in p.parts[1 if bound is not None else 0:]:
        if value is None:
            return None
        value = getattr(value, name)
    return value


def _span(p: s.Path, env: Env, spec: sp.Spec) -> tuple[str, ...]:
    bound = env.get(p.root)
    if isinstance(bound, tuple):
        return bound[1]  # type: ignore[no-any-return]
    if bound is not None:
        return ("roles", bound.name, *p.parts[1:])
    if p.parts == ("traffic", "agentic"):
        return fn.agentic_source(spec.traffic)
    return p.parts


def _default(p: s.Path, env: Env) -> Any:
    bound = env.get(p.root)
    if isinstance(bound, tuple):
        return bound[3]
    cls: Any = f.ROLE_CLASS if bound is not None else f.ROOT_CLASS
    info = None
    for name in p.parts[1 if bound is not None else 0:]:
        info = f.fields_of(cls)[name]
        cls = info.cls
    assert info is not None
    return info.default


def ev(e: s.Expr, env: Env, spec: sp.Spec) -> Any:
    """Kleene logic, straight from the definition."""
    if isinstance(e, s.Path):
        return _path_value(e, env, spec)
    if isinstance(e, s.Lit):
        return e.value
    if isinstance(e, s.Compare):
        a, b = ev(e.left, env, spec), ev(e.right, env, spec)
        if a is None or b is None:
            return None
        return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b,
                ">=": a >= b}[e.op]
    if isinstance(e, s.Member):
        a = ev(e.operand, env, spec)
        return None if a is None else (a in [i.value for i in e.items.items]) != e.negated
    if isinstance(e, s.Has):
        return ev(e.path, env, spec) is not None
    if isinstance(e, s.IsNull):
        return (ev(e.operand, env, spec) is None) != e.negated
    if isinstance(e, s.IsDefault):
        assert isinstance(e.operand, s.Path)
        value, default = ev(e.operand, env, spec), _default(e.operand, env)
        if value is None:
            return (not e.negated) if default is None else None
        return (value == default) != e.negated
    if isinstance(e, s.Not):
        v = ev(e.operand, env, spec)
        return None if v is None else not v
    if isinstance(e, s.BoolOp):
        values = [ev(o, env, spec) for o in e.operands]
        decisive = e.op == "or"
        if decisive in values:
            return decisive
        return None if None in values else not decisive
    if isinstance(e, s.Quantified):
        values = [ev(e.body, {**env, e.var: r}, spec) for r in spec.roles]
        if e.kind == "every":
            return False if False in values else None if None in values else True
        some = True if True in values else None if None in values else False
        return some if e.kind == "any" else (None if some is None else not some)
    if isinstance(e, s.Call):
        if e.name == "name":
            arg = e.args[0]
            assert isinstance(arg, s.Path)
            return env[arg.root][2]
        if e.name == "key":
            arg = e.args[0]
            assert isinstance(arg, s.Path)
            return fn.key_ref(_span(arg, env, spec))
        impl = getattr(fn, fn.BUILTINS[e.name].py or "")
        return impl(*(ev(a, env, spec) for a in e.args))
    raise AssertionError(e)


def _text(t: s.Template, env: Env, spec: sp.Spec) -> str:
    return "".join(p if isinstance(p, str) else fn.show(ev(p, env, spec)) for p in t.parts)


def _domain(b: s.Binder, env: Env, spec: sp.Spec) -> list[Env]:
    if b.kind == "role":
        return [{b.names[0]: r} for r in spec.roles]
    if b.kind == "pair":
        return [dict(zip(b.names, pair, strict=True))
                for pair in itertools.combinations(spec.roles, 2)]
    return [{b.names[0]: (_path_value(p, env, spec), _span(p, env, spec), p.parts[-1],
                          _default(p, env))} for p in b.paths]


def _bindings(binders: list[s.Binder], env: Env, spec: sp.Spec) -> list[Env]:
    if not binders:
        return [env]
    return [full for part in _domain(binders[0], env, spec)
            for full in _bindings(binders[1:], {**env, **part}, spec)]


def interpret(spec: sp.Spec) -> list[tuple[Any, ...]]:
    ruleset = shipped_ruleset()
    out = []
    for rule in ruleset.rules:
        for raw in rule.checks:
            check = expand_check(raw, ruleset.defines)
            each = [b for b in check.binders if b.quant == "each"]
            some = [b for b in check.binders if b.quant == "some"]
            for env in _bindings(each, {}, spec):
                match = next((full for full in _bindings(some, env, spec)
                              if ev(check.when, full, spec) is True), None)
                if match is None:
                    continue
                related = tuple((_span(r.path, match, spec), _text(r.message, match, spec))
                                for r in check.related)
                hint = None if check.hint is None else _text(check.hint, match, spec)
                out.append((rule.id, rule.severity, (
                    _text(check.message, match, spec), _span(check.at, match, spec), hint,
                    related)))
    return out


def maybe(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), values)


host_offloads = st.builds(
    sp.HostOffload,
    # cluster_shared twice as likely: pool rules need two shared participants.
    scope=st.sampled_from(["cluster_shared", "cluster_shared", "dp_rank_local", "worker_local"]),
    num_host_blocks=maybe(st.sampled_from([8, 16])),
    shared_d2h_bandwidth_gbps=st.sampled_from([80.0, 40.0]),
    shared_h2d_bandwidth_gbps=st.sampled_from([80.0, 40.0]),
    kv_layout_id=maybe(st.sampled_from(["", "  ", "a", "b"])),
)


@st.composite
def roles(draw: st.DrawFn) -> tuple[sp.Role, ...]:
    names = draw(st.lists(st.sampled_from(sp.ROLE_ORDER), min_size=0, max_size=3, unique=True))
    return tuple(sp.Role(
        name=name,
        backend=draw(st.sampled_from(["vllm", "sglang", "trtllm"])),
        dp_size=draw(st.sampled_from([1, 2])),
        tensor_parallel_size=draw(st.sampled_from([1, 2])),
        block_size=draw(st.sampled_from([16, 64])),
        kv_cache_bytes_per_token=draw(maybe(st.sampled_from([1000, 2000]))),
        enable_prefix_caching=draw(st.booleans()),
        speculation=draw(maybe(st.builds(sp.Speculation, kind=st.sampled_from(["ngram", "mtp"])))),
        host_offload=draw(maybe(host_offloads)),
        g3_offload=draw(maybe(st.builds(sp.G3Offload, scope=st.just("worker_local"),
                                        num_g3_blocks=st.just(64)))),
        kv_transfer_bytes_per_token=draw(maybe(st.just(1000))),
        kv_transfer_bandwidth=draw(maybe(st.just(10.0))),
        kv_transfer_timing_mode=draw(st.sampled_from(["destination_missing", "full_prompt"])),
    ) for name in sorted(names, key=sp.ROLE_ORDER.index))


traffics = st.builds(
    sp.Traffic,
    source_type=st.sampled_from(["synthetic", "synthetic-session", "trace"]),
    trace_format=maybe(st.sampled_from(["mooncake", "weka", "agentic_mooncake"])),
    weka_nested_timestamp_basis=maybe(st.just("absolute")),
    input_tokens=maybe(st.sampled_from([100, 1000])),
    cached_prefix_tokens=maybe(st.sampled_from([0, 500, 2000])),
    shared_prefix_ratio=maybe(st.sampled_from([0.0, 0.5])),
    num_prefix_groups=maybe(st.sampled_from([0, 2])),
    load_type=st.sampled_from(["trace_timestamps", "concurrency", "poisson", "constant_rate"]),
    request_rate=maybe(st.just(2.0)),
    agentic_lanes=maybe(st.just(2)),
    agentic_snapshot_seed=maybe(st.just(7)),
    agentic_warmup=st.booleans(),
    agentic_profile=maybe(st.just(sp.AgenticProfile())),
    stop_requests=maybe(st.just(10)),
    stop_sessions=maybe(st.just(5)),
)

specs = st.builds(
    sp.Spec,
    model=maybe(st.just("m")),
    roles=roles(),
    mode=st.sampled_from(["aggregated", "disaggregated"]),
    router=st.builds(sp.Router, policy=st.sampled_from(["round_robin", "kv_router"]),
                     kv_event_lag_ms=st.sampled_from([0.0, 5.0]),
                     temperature=st.sampled_from([0.0, 0.5])),
    scaling=st.sampled_from([sp.Scaling(), sp.Scaling("planner", {}, "{}")]),
    max_sim_time_ms=maybe(st.just(1000.0)),
    traffic=traffics,
)


@settings(max_examples=300, deadline=None)
@given(specs)
def test_generated_code_matches_the_interpreter(spec: sp.Spec) -> None:
    """For any Spec, the compiled rules report exactly what the tree interpreter reports."""
    compiled = Runner().findings(spec)
    assert sorted(compiled, key=repr) == sorted(interpret(spec), key=repr)
