"""The rules language: syntax errors, static checks, three-valued logic, binders and messages."""

from __future__ import annotations

import pytest
from rules_support import RULE_HEAD, fires, path_origin, runner_for, truth

from kvreplay.rules.errors import RuleFileError
from kvreplay.rules.loader import parse_sources
from kvreplay.rules.parser import parse_expr
from kvreplay.schema.spec import HostOffload, Role, Router, Spec, Traffic


def problems(text: str, name: str = "rules/bad.rules") -> list[str]:
    with pytest.raises(RuleFileError) as info:
        parse_sources([(name, text)])
    return [str(p).splitlines()[0] for p in info.value.problems]


def agg(**fields: object) -> Role:
    return Role(name="aggregated", **fields)  # type: ignore[arg-type]


# --- syntax errors --------------------------------------------------------------------------


def test_syntax_error_has_position_and_exact_expected_tokens() -> None:
    """A rule without `when` reports file:line:col and exactly the tokens that could come next."""
    text = RULE_HEAD + "  at mode\n}\n"
    with pytest.raises(RuleFileError) as info:
        parse_sources([("rules/bad.rules", text)])
    (problem,) = info.value.problems
    assert (problem.file, problem.line, problem.column) == ("rules/bad.rules", 4, 3)
    assert problem.message == "unexpected `at`"
    # After the rationale: another string (adjacent strings join), or a check: `for` binders,
    # `when`, or a `check { ... }` block.
    assert problem.expected == ('"check"', '"for"', '"when"', 'STRING')
    assert str(problem).startswith("rules/bad.rules:4:3: unexpected `at`")


def test_unexpected_character_lists_allowed_tokens() -> None:
    """A character no token starts with is reported where it is, with the tokens allowed there."""
    text = RULE_HEAD + '  when mode = "x"\n  at mode\n  message "m"\n}\n'
    with pytest.raises(RuleFileError) as info:
        parse_sources([("rules/bad.rules", text)])
    (problem,) = info.value.problems
    assert (problem.line, problem.column) == (4, 13)
    assert problem.message == "unexpected character `=`"
    assert "COMPARATOR" in problem.expected and '"and"' in problem.expected
    assert problem.context is not None and problem.context.endswith(" " * 12 + "^")


def test_error_inside_a_message_expression_points_into_the_string() -> None:
    """An interpolated expression is parsed in place: its error column is inside the message."""
    text = RULE_HEAD + '  when mode == "x"\n  at mode\n  message "mode {mode ==}"\n}\n'
    with pytest.raises(RuleFileError) as info:
        parse_sources([("rules/bad.rules", text)])
    (problem,) = info.value.problems
    assert (problem.line, problem.column) == (6, 25)  # the end of `mode ==`: the closing brace
    assert problem.message == "unexpected end of the `{...}` expression"


def test_unclosed_brace_in_message_is_reported() -> None:
    """A lone `{` in a message is an error that says how to write a literal brace."""
    text = RULE_HEAD + '  when mode == "x"\n  at mode\n  message "a {b"\n}\n'
    assert problems(text) == ["rules/bad.rules:6:14: unclosed `{` in message (write `{{`)"]


def test_unexpected_end_of_file() -> None:
    """A truncated rule reports the end of the file and what could have come next."""
    with pytest.raises(RuleFileError) as info:
        parse_sources([("rules/bad.rules", RULE_HEAD)])
    (problem,) = info.value.problems
    assert problem.message == "unexpected end of file"
    assert problem.expected == ('"check"', '"for"', '"when"', 'STRING')


# --- static checks --------------------------------------------------------------------------


def check(body: str) -> list[str]:
    return problems(RULE_HEAD + body + "\n}\n")


def test_unknown_field_suggests_the_nearest() -> None:
    """A misspelt field names the class and suggests the field meant."""
    found = check('  for each role r\n  when r.host_offload.scop == "x"\n  at r\n  message "m"')
    assert found == ["rules/bad.rules:5:8: `HostOffload` has no field `scop` (did you mean "
                     "`scope`?)"]


def test_unknown_root_name() -> None:
    """A name that is neither a variable nor a Spec field is reported with a suggestion."""
    found = check('  when traffik.load_type == "x"\n  at mode\n  message "m"')
    assert found == ["rules/bad.rules:4:8: unknown name `traffik` (did you mean `traffic`?)"]


def test_comparing_a_string_with_a_number_is_rejected() -> None:
    """Kinds are checked at load time: a string field compared with a number is an error."""
    found = check("  when mode == 3\n  at mode\n  message \"m\"")
    assert found == ["rules/bad.rules:4:8: `==` compares a str with a num"]


def test_ordering_needs_numbers() -> None:
    """`<` between strings is rejected."""
    found = check('  when mode < "b"\n  at mode\n  message "m"')
    assert found == ["rules/bad.rules:4:8: `<` needs numbers, got str and str"]


def test_is_default_needs_a_default() -> None:
    """`is default` on a field without a default (a role's name) is an error."""
    found = check("  for each role r\n  when r.name is default\n  at r\n  message \"m\"")
    assert found == ["rules/bad.rules:5:8: `r.name` has no default to compare with"]


def test_unknown_function_and_wrong_arity() -> None:
    """Calls resolve to built-ins or predicates with the right number of arguments."""
    found = check("  for each role r\n  when blank(r.name, r.name) or frob(r)\n  at r\n"
                  '  message "m"')
    assert "rules/bad.rules:5:8: `blank` takes 1 argument(s), got 2" in found


def test_each_after_some_is_rejected() -> None:
    """`each` binders must come first: findings are per `each` combination."""
    found = check("  for some role g, each role r\n  when has g.host_offload\n  at r\n"
                  '  message "m"')
    assert found == ["rules/bad.rules:4:20: `each` binders come before `some` binders"]


def test_duplicate_rule_id_names_the_first() -> None:
    """A rule ID defined twice points at the first definition."""
    rule = RULE_HEAD + '  when mode == "x"\n  at mode\n  message "m"\n}\n'
    found = problems(rule + rule)
    assert found == ["rules/bad.rules:8:6: rule T-RULE is already defined at rules/bad.rules:1:6"]


def test_predicate_arity_and_recursion() -> None:
    """Predicates are checked where they are called."""
    text = ("define loop(r): loop(r)\n"
            + RULE_HEAD + "  for each role r\n  when loop(r)\n  at r\n  message \"m\"\n}\n")
    assert problems(text) == ["rules/bad.rules:1:17: predicate `loop` calls itself"]


def test_quantifier_must_be_parenthesised_inside_and() -> None:
    """`any role x: ...` extends to the end, so inside `and` it needs parentheses."""
    with pytest.raises(RuleFileError) as info:
        parse_expr('mode == "x" and any role r: has r.host_offload')
    assert info.value.problems[0].message == (
        "unexpected `role` (inside `and`, `or` or `not`, write a quantifier in parentheses: "
        "`(any role r: ...)`)")


# --- three-valued logic ---------------------------------------------------------------------

UNKNOWN_BLOCKS = Spec(model="m", roles=(
    agg(host_offload=HostOffload(scope="cluster_shared", num_host_blocks=None)),))


@pytest.mark.parametrize(("condition", "expected"), [
    ("r.host_offload.num_host_blocks == 8", None),
    ("r.host_offload.num_host_blocks != 8", None),
    ("r.host_offload.num_host_blocks > 0", None),
    ("r.host_offload.num_host_blocks in [8, 16]", None),
    ("not r.host_offload.num_host_blocks == 8", None),
    ("has r.host_offload.num_host_blocks", False),
    ("r.host_offload.num_host_blocks is null", True),
    ("r.host_offload.num_host_blocks == 8 and false", False),
    ("r.host_offload.num_host_blocks == 8 and true", None),
    ("r.host_offload.num_host_blocks == 8 or true", True),
    ("r.host_offload.num_host_blocks == 8 or false", None),
    ("r.host_offload.scope == \"cluster_shared\"", True),
    ("r.g3_offload.scope == \"worker_local\"", None),
    ("has r.g3_offload", False),
])
def test_unknown_values_make_comparisons_undecidable(condition: str,
                                                     expected: bool | None) -> None:
    """Kleene logic: a comparison reading None is unknown; presence tests are decided."""
    rule = f"(any role r: {condition})"
    assert truth(rule, UNKNOWN_BLOCKS) is expected


def test_quantifiers_are_three_valued() -> None:
    """any/every/no: a decided role wins over an unknown one only when it settles the result."""
    spec = Spec(model="m", roles=(
        Role(name="prefill", host_offload=HostOffload(num_host_blocks=None)),
        Role(name="decode", host_offload=HostOffload(num_host_blocks=8)),
    ))
    assert truth("any role r: r.host_offload.num_host_blocks == 8", spec) is True
    assert truth("any role r: r.host_offload.num_host_blocks == 9", spec) is None
    assert truth("every role r: r.host_offload.num_host_blocks == 9", spec) is False
    assert truth("every role r: r.host_offload.num_host_blocks == 8", spec) is None
    assert truth("no role r: r.host_offload.num_host_blocks == 8", spec) is False
    assert truth("every role r: has r.host_offload", spec) is True


def test_is_default_treats_a_null_default_as_decided() -> None:
    """`is default` is decided when None is the field's default, unknown when it is not."""
    spec = Spec(model="m", roles=(agg(block_size=None),))
    assert truth("any role r: r.kv_transfer_bandwidth is default", spec) is True
    assert truth("any role r: r.block_size is default", spec) is None
    assert truth("traffic.stop_sessions is default", spec) is True


def test_agentic_shorthand_reads_traffic() -> None:
    """`agentic` is `traffic.agentic`: an agentic trace format or any agentic load key."""
    assert fires("agentic", Spec(model="m", roles=(), traffic=Traffic(agentic_lanes=2)))
    assert not fires("agentic", Spec(model="m", roles=()))


# --- binders, spans and messages ------------------------------------------------------------

TWO_ROLES = Spec(model="m", mode="disaggregated", roles=(
    Role(name="prefill", dp_size=2, host_offload=HostOffload(num_host_blocks=8)),
    Role(name="decode", dp_size=4),
))


def test_each_role_reports_one_finding_per_role_with_its_span() -> None:
    """`each role` gives one finding per matching role, at that role's field."""
    runner = runner_for(RULE_HEAD + "  for each role r\n  when r.dp_size > 1\n  at r.dp_size\n"
                        '  message "{r.name} has {r.dp_size}"\n}\n')
    found = runner(TWO_ROLES, path_origin())
    assert [(d.message, d.path) for d in found] == [
        ("decode has 4", "$.roles.decode.dp_size"),
        ("prefill has 2", "$.roles.prefill.dp_size"),
    ]


def test_some_role_binds_the_first_witness_for_related_spans() -> None:
    """`some role g` picks the first role (in order) that makes the condition true."""
    runner = runner_for(RULE_HEAD + "  for each role r, some role g\n"
                        "  when has g.host_offload and r.dp_size > 2\n  at r.dp_size\n"
                        '  related g.host_offload "{g.name} offloads"\n  message "m"\n}\n')
    (finding,) = runner(TWO_ROLES, path_origin())
    assert finding.path == "$.roles.decode.dp_size"
    assert [(r.message, r.span.path) for r in finding.related] == [
        ("prefill offloads", "$.roles.prefill.host_offload")]


def test_pairs_compare_two_roles_and_show_both_values() -> None:
    """`each pair a, b of roles` visits each unordered pair once, a before b."""
    runner = runner_for(RULE_HEAD + "  for each pair a, b of roles\n  when a.dp_size != b.dp_size\n"
                        "  at b.dp_size\n  related a.dp_size \"{a.name}: {a.dp_size}\"\n"
                        '  message "{a.dp_size} vs {b.dp_size}"\n}\n')
    (finding,) = runner(TWO_ROLES, path_origin())
    assert (finding.message, finding.path) == ("2 vs 4", "$.roles.decode.dp_size")
    assert finding.related[0].span.path == "$.roles.prefill.dp_size"


def test_field_binder_reports_each_field_at_its_own_span() -> None:
    """`each field f in [...]`: one finding per field, `name(f)` and `{f}` in the message."""
    spec = Spec(model="m", roles=(), router=Router(temperature=0.5, seed=3))
    runner = runner_for(RULE_HEAD + "  for each field f in [router.temperature, router.seed, "
                        "router.kv_event_lag_ms]\n  when f is not default\n  at f\n"
                        '  message "{name(f)}={f}"\n}\n')
    found = runner(spec, path_origin())
    assert sorted((d.message, d.path) for d in found) == [
        ("seed=3", "$.router.seed"), ("temperature=0.5", "$.router.temperature")]


def test_message_escapes_and_unknown_values() -> None:
    """`{{`/`}}` are literal braces; an unknown value shows as `unknown`, booleans as YAML."""
    spec = Spec(model="m", roles=(agg(host_offload=HostOffload(num_host_blocks=None)),))
    runner = runner_for(RULE_HEAD + "  for each role r\n  when has r.host_offload\n  at r\n"
                        '  message "{{x}} {r.host_offload.num_host_blocks} '
                        '{r.enable_prefix_caching}"\n  hint "\\"q\\""\n}\n')
    (finding,) = runner(spec, path_origin())
    assert (finding.message, finding.hint) == ("{x} unknown true", '"q"')


def test_multiple_checks_share_one_rule_id() -> None:
    """A rule with `check { }` blocks reports each under the same ID and severity."""
    runner = runner_for('rule T-MULTI warning {\n  title "t"\n  rationale "r"\n'
                        '  check {\n    when mode == "aggregated"\n    at mode\n'
                        '    message "a"\n  }\n'
                        '  check {\n    when model == "m"\n    at model\n    message "b"\n  }\n}\n')
    found = runner(Spec(model="m", roles=()), path_origin())
    assert [(d.rule, d.severity, d.message) for d in found] == [
        ("T-MULTI", "warning", "a"), ("T-MULTI", "warning", "b")]


def test_predicates_expand_with_their_arguments() -> None:
    """`define p(r): ...` inlines with the argument substituted into paths."""
    text = ("define big(x): x.dp_size > 2\n" + RULE_HEAD
            + "  for each role r\n  when big(r)\n  at r\n  message \"{r.name}\"\n}\n")
    found = runner_for(text)(TWO_ROLES, path_origin())
    assert [d.message for d in found] == ["decode"]


def test_key_names_a_field_as_the_entry_point_writes_it() -> None:
    """`key(p)` goes through the origin: each entry point sees its own key, role paths too."""
    from kvreplay.compiler.origin import SourceOrigin

    runner = runner_for(RULE_HEAD + "  for each role r\n  when r.dp_size > 3\n  at r.dp_size\n"
                        '  message "set {key(r.dp_size)}"\n  hint "or {key(traffic.stop_requests)}"'
                        "\n}\n")
    (found,) = runner(TWO_ROLES, SourceOrigin(None, lambda p: ("doc",) + p, file="spec"))
    assert (found.message, found.hint) == ("set doc.roles.decode.dp_size",
                                           "or doc.traffic.stop_requests")


def test_key_takes_a_known_field_path() -> None:
    """`key` of a literal or of a misspelt field is a load-time error."""
    assert check('  when has mode\n  at mode\n  message "{key(3)}"') == [
        'rules/bad.rules:6:17: `key` takes a field path']
    assert check('  when has mode\n  at mode\n  message "{key(traffic.stop_request)}"')[0] \
        .endswith("has no field `stop_request` (did you mean `stop_requests`?)")
