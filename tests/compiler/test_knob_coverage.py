"""Every knob the reference engine accepts has a YAML path, or is listed as not exposed with why.

`EXPOSED` maps a native knob to the YAML setting that writes it: each row is compiled and the
native document must carry the value (no reference needed). With the reference installed, its
own lists of accepted fields (the rank and role normalizer, the sglang / trtllm blocks, the KV
router config, the replay entry point) are walked: a field in none of the tables fails.
"""

from __future__ import annotations

import copy
import inspect
import os
import re
from typing import Any

import pytest

import kvreplay
from kvreplay.knobs import EXPOSED, NOT_EXPOSED, Knob

BASE: dict[str, Any] = {
    "engine": {"model": "meta-llama/Llama-3.1-8B", "workers": {"aggregated": {}}},
    "traffic": {"source": {"type": "synthetic", "input_tokens": 512, "output_tokens": 16},
                "load": {"type": "concurrency", "concurrency": 2}, "stop": {"requests": 4}},
}


def _set(doc: dict[str, Any], path: str, value: Any) -> None:
    keys = path.split(".")
    for key in keys[:-1]:
        doc = doc.setdefault(key, {})
    doc[keys[-1]] = value


def _get(doc: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        doc = doc[key]
    return doc


def _config(knob: Knob) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    for path, value in knob.context:
        _set(doc, path, copy.deepcopy(value))
    if knob.yaml:
        _set(doc, knob.yaml, copy.deepcopy(knob.value))
    return doc


@pytest.mark.parametrize("knob", EXPOSED, ids=lambda k: k.native)
def test_each_exposed_knob_reaches_the_native_document(knob: Knob) -> None:
    """Setting the YAML path compiles into the native field with the expected value."""
    compiled = kvreplay.compile_config(_config(knob), matrix=False)
    assert compiled.ok, [d.message for d in compiled.diagnostics]
    assert _get(compiled.native(), knob.native_path) == knob.expected


@pytest.mark.parametrize("knob", EXPOSED, ids=lambda k: k.native)
def test_each_knob_value_differs_from_the_default(knob: Knob) -> None:
    """The test value is not what the base config already writes, so the row proves the path."""
    compiled = kvreplay.compile_config(_config(knob.without_value()), matrix=False)
    assert compiled.ok, [d.message for d in compiled.diagnostics]
    try:
        default = _get(compiled.native(), knob.native_path)
    except (KeyError, TypeError):
        return
    assert default != knob.expected


def test_tables_do_not_overlap_and_give_reasons() -> None:
    """A knob is exposed or not exposed, never both; every exclusion says why."""
    exposed = {k.native for k in EXPOSED}
    assert not exposed & set(NOT_EXPOSED)
    assert all(len(reason) > 30 for reason in NOT_EXPOSED.values())


# --- the reference's own lists ------------------------------------------------------------

def _core() -> Any:
    os.environ.setdefault("DYN_LOG", "error")
    return pytest.importorskip("dynamo._core")


def _accepted(core: Any, descriptor: dict[str, Any]) -> list[str]:
    """The field names the normalizer lists when it refuses an unknown one."""
    with pytest.raises(ValueError) as refused:
        core._normalize_mocker_config(descriptor)
    text = str(refused.value)
    listed = re.search(r"expected (?:one of )?(.*)$", text)
    assert listed, text
    return re.findall(r"`([a-z0-9_]+)`", listed.group(1))


def _covered(prefix: str, names: list[str]) -> list[str]:
    known = {k.native for k in EXPOSED} | set(NOT_EXPOSED)
    return [f"{prefix}.{n}" for n in names if f"{prefix}.{n}" not in known]


@pytest.mark.reference
def test_every_rank_field_the_reference_accepts_is_covered() -> None:
    """The rank normalizer's fields, and its sglang / trtllm blocks."""
    core = _core()
    rank = _accepted(core, {"engine": {"backend": "vllm", "no_such_field": 1}})
    assert "preemption_mode" in rank and "enable_chunked_prefill" in rank
    sglang = _accepted(core, {"engine": {"backend": "sglang", "sglang": {"no_such_field": 1}}})
    trtllm = _accepted(core, {"engine": {"backend": "trtllm", "trtllm": {"no_such_field": 1}}})
    missing = (_covered("rank", rank) + _covered("rank.sglang", sglang)
               + _covered("rank.trtllm", trtllm))
    assert not missing, f"no YAML path and no reason for: {missing}"


@pytest.mark.reference
def test_every_role_field_the_reference_accepts_is_covered() -> None:
    """The per-role (engine args) fields around the rank."""
    core = _core()
    role = _accepted(core, {"engine": {"backend": "vllm"}, "no_such_field": 1})
    assert "dp_size" in role
    missing = _covered("role", [n for n in role if n != "engine"])
    assert not missing, f"no YAML path and no reason for: {missing}"


@pytest.mark.reference
def test_every_router_knob_the_reference_accepts_is_covered() -> None:
    """The KV router config's constructor parameters."""
    core = _core()
    params = list(inspect.signature(core.KvRouterConfig).parameters)
    with pytest.raises(ValueError) as refused:  # its JSON reader lists a few more
        core.KvRouterConfig.from_json('{"no_such_field": 1}')
    listed = re.findall(r"`([a-z0-9_]+)`", str(refused.value).split("expected", 1)[1])
    assert "overlap_score_credit_decay" in params and "router_queue_policy" in listed
    missing = _covered("router", sorted(set(params) | set(listed)))
    assert not missing, f"no YAML path and no reason for: {missing}"


@pytest.mark.reference
def test_every_replay_argument_is_covered() -> None:
    """The replay entry point's keyword arguments (traffic, topology and run options)."""
    _core()
    from dynamo.replay import run_trace_replay

    params = [n for n, p in inspect.signature(run_trace_replay).parameters.items()
              if p.kind is inspect.Parameter.KEYWORD_ONLY]
    missing = _covered("replay", params)
    assert not missing, f"no YAML path and no reason for: {missing}"


@pytest.mark.reference
def test_every_synthetic_replay_argument_is_covered() -> None:
    """The synthetic entry point's own arguments (the shared ones are the `replay.*` rows)."""
    _core()
    from dynamo.replay import run_synthetic_trace_replay, run_trace_replay

    shared = set(inspect.signature(run_trace_replay).parameters)
    params = [n for n in inspect.signature(run_synthetic_trace_replay).parameters
              if n not in shared]
    assert "shared_prefix_ratio" in params
    missing = _covered("synthetic", params)
    assert not missing, f"no YAML path and no reason for: {missing}"


@pytest.mark.reference
@pytest.mark.parametrize("knob", [k for k in EXPOSED if k.native.startswith("rank.")],
                         ids=lambda k: k.native)
def test_the_reference_normalizer_keeps_each_rank_knob(knob: Knob) -> None:
    """The emitted rank, knob set, is accepted by the normalizer and echoed unchanged."""
    core = _core()
    native = kvreplay.compile_config(_config(knob), matrix=False).native()
    split = knob.native_path.index("rank")
    role = _get(native, knob.native_path[:split])
    normalized = core._normalize_mocker_config({"engine": role["rank"],
                                                "dp_size": role["dp_size"]})
    assert _get(normalized["engine"], knob.native_path[split + 1:]) == knob.expected


def test_the_rendered_tables_name_every_knob() -> None:
    """`python -m kvreplay.knobs` lists each exposed and each excluded knob once."""
    from kvreplay.knobs import render

    text = render()
    for name in {k.native for k in EXPOSED} | set(NOT_EXPOSED):
        assert text.count(f"| `{name}` |") == 1, name
