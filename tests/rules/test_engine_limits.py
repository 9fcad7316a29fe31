"""The engine's limits (kvreplay.engine.config.check_spec) and the support-matrix rules that
state them for lint say the same thing: over the generated ranks and shared pools of the
reference-parity tests, the engine refuses a spec exactly when one of those rules fires (with
the rule's own error), so a config that lints clean never fails in the engine."""

from __future__ import annotations

import pytest
from rules_support import path_origin
from test_rules_reference import POOL_RULES, generated_pools, generated_roles

from kvreplay.engine import EngineConfigError
from kvreplay.engine.config import check_spec
from kvreplay.rules import run_rules
from kvreplay.schema.spec import Spec

# The rank-local rules the engine enforces itself (n-gram it refuses as a feature).
LIMIT_RULES = frozenset({"G2-BACKEND", "G2-SCOPE", "NATIVE-LAYOUT-ID", "G2-BYTES",
                         "G2-PREFIX-CACHING", "BACKEND-SGLANG-CHUNKED-PREFILL",
                         "G2-SPECULATION", "G3-REQUIRES-G2", "G3-DP", "G3-BACKEND",
                         "G3-TOPOLOGY", "BACKEND-PREFILL-SCHEDULE-INTERVAL"})


def refused(spec: Spec) -> str | None:
    try:
        check_spec(spec)
    except EngineConfigError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("kind", ["ranks", "pools"])
def test_the_engine_refuses_exactly_what_the_rules_refuse(kind: str) -> None:
    """Each generated spec: check_spec raises iff a rule of the same limit fires."""
    if kind == "ranks":
        specs = [Spec(model="m", roles=(role,)) for role in generated_roles()]
        rules = LIMIT_RULES
    else:
        specs = generated_pools()
        rules = POOL_RULES
    refusals = 0
    for spec in specs:
        fired = {d.rule for d in run_rules(spec, path_origin())
                 if d.severity == "error"} & rules
        message = refused(spec)
        assert (message is not None) == bool(fired), (spec.roles, message, fired)
        refusals += message is not None
    assert 0 < refusals < len(specs)
