"""A kvreplay scaling policy in native JSON: its config takes the policy's keys, each of its type
(the schema's free-form mapping cannot say so); the compiler reports the first problem at its
pointer and the engine refuses the document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import kvreplay
from kvreplay.engine import EngineConfigError
from kvreplay.engine.config import read_engine_spec
from kvreplay.engine.policies import build_policy

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "scaling-load.yaml"


def native(config: Any, provider: str = "load") -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(kvreplay.compile_config(EXAMPLE).emitted())
    doc["spec"]["adapters"]["scaling"] = {"provider": provider, "config": config}
    return doc


def findings(doc: dict[str, Any], tmp_path: Path) -> list[tuple[str, str]]:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return [(d.rule, d.message) for d in kvreplay.compile_config(path).diagnostics]


def test_the_compiled_policy_reads_back(tmp_path: Path) -> None:
    """The example's native document holds its policy's keys with their defaults, and reads
    back into the same policy."""
    doc = native(None)
    compiled = kvreplay.compile_config(EXAMPLE)
    doc["spec"]["adapters"]["scaling"] = json.loads(compiled.emitted())["spec"]["adapters"][
        "scaling"]
    assert findings(doc, tmp_path) == []
    spec = read_engine_spec(doc)
    assert spec.scaling == compiled.spec.scaling
    assert build_policy(spec).initial_tick_ms() == 1000.0


@pytest.mark.parametrize(("config", "message"), [
    ({"bogus": 1}, "`bogus` is not an option of scaling policy `load`"),
    ({"schedule": []}, "`schedule` is not an option of scaling policy `load`"),
    ({"scale_up": {"queue_depth": "8"}}, "scaling policy `load`:"),
    ([1], "scaling policy `load` needs its options in `config`"),
])
def test_a_bad_config_is_a_native_shape_finding(config: Any, message: str,
                                                tmp_path: Path) -> None:
    """Unknown keys, keys of another policy and values of the wrong type are NATIVE-SHAPE."""
    found = findings(native(config), tmp_path)
    assert any(rule == "NATIVE-SHAPE" and message in text for rule, text in found), found


def test_the_engine_refuses_a_config_that_does_not_read() -> None:
    """Run directly, the engine names the config by its pointer."""
    from kvreplay.engine.api import Replay

    spec = read_engine_spec(native({"scale_up": {"queue_depth": "8"}}))
    with pytest.raises(EngineConfigError, match="/spec/adapters/scaling/config"):
        Replay(spec).run(None)  # type: ignore[arg-type]
