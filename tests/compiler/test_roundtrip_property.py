"""Property: for generated valid configs, YAML -> JSON -> model -> JSON is the identity."""

from __future__ import annotations

import io
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

import kvreplay
from kvreplay.compiler.documents import compile_text

pos = st.integers(min_value=1, max_value=4096)
small = st.integers(min_value=1, max_value=8)
nonneg = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)
positive = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)
names = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x2FF, exclude_categories=("Cc",)),
                min_size=1, max_size=20)


def _optional(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=fields)


host_offload = st.fixed_dictionaries(
    {"num_host_blocks": pos},
    optional={
        "scope": st.sampled_from(["dp_rank_local", "cluster_shared"]),
        "d2h_bandwidth_gbps": nonneg,
        "h2d_bandwidth_gbps": nonneg,
        "shared_d2h_bandwidth_gbps": nonneg,
        "shared_h2d_bandwidth_gbps": nonneg,
        "latency_to_first_byte_ms": nonneg,
    },
)
capacity = st.one_of(
    st.just({"type": "default"}),
    st.builds(lambda b: {"type": "fixed", "blocks": b}, pos),
)
timing = st.one_of(
    st.just({"type": "polynomial"}),
    st.builds(lambda p, d: {"type": "fixed", "prefill_ms": p, "decode_ms": d}, nonneg, nonneg),
)
worker = _optional(
    parallelism=_optional(replicas=small, tensor=small, pipeline=small, attention_data=small,
                          prefill_context=small, decode_context=small),
    scheduler=_optional(max_batched_tokens=pos, max_sequences=pos,
                        prefill_schedule_interval=small),
    kv_cache=_optional(block_size=st.integers(2, 1024), prefix_caching=st.booleans(),
                       bytes_per_token=st.one_of(st.just("auto"), pos), capacity=capacity,
                       host_offload=host_offload),
    timing=timing,
    speculation=st.builds(
        lambda k, n, seed: {"kind": k, "num_speculative_tokens": n,
                            "acceptance_rates": [0.5] * n, "seed": seed},
        st.sampled_from(["ngram", "mtp"]), st.integers(1, 5), st.integers(0, 2**32)),
    startup_seconds=nonneg,
)


@st.composite
def configs(draw: st.DrawFn) -> dict[str, Any]:
    mode = draw(st.sampled_from(["aggregated", "disaggregated"]))
    roles = ["aggregated"] if mode == "aggregated" else ["prefill", "decode"]
    engine: dict[str, Any] = {
        "mode": mode,
        "model": draw(names),
        "workers": {r: draw(worker) for r in roles},
        **draw(_optional(backend=st.sampled_from(["vllm", "sglang", "trtllm"]),
                         hardware=names, backend_version=names,
                         context_length=st.one_of(st.just("max"), pos))),
    }
    if mode == "disaggregated":
        engine.update(draw(_optional(kv_transfer=_optional(
            bytes_per_token=st.one_of(st.just("auto"), pos),
            bandwidth_gb_per_second=st.one_of(st.none(), positive),
            timing_mode=st.sampled_from(["destination_missing", "full_prompt"]),
            handoff_latency_ms=nonneg))))
    traffic = draw(st.one_of(
        st.builds(lambda p, b, s: {"source": {"type": "trace", "paths": p, "block_size": b},
                                   "load": {"type": "trace_timestamps", "speedup": s}},
                  st.lists(names, min_size=1, max_size=3), pos, positive),
        st.builds(lambda i, o, c, n: {"source": {"type": "synthetic", "input_tokens": i,
                                                 "output_tokens": o},
                                      "load": {"type": "concurrency", "concurrency": c},
                                      "stop": {"requests": n}}, pos, pos, small, pos),
    ))
    router = draw(_optional(policy=st.sampled_from(["round_robin", "kv_router"]),
                            kv_event_lag_ms=nonneg, temperature=nonneg))
    config: dict[str, Any] = {"engine": engine, "traffic": traffic}
    if router:
        config["router"] = router
    return config


def _yaml(data: dict[str, Any]) -> str:
    out = io.StringIO()
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.dump(data, out)
    return out.getvalue()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs())
def test_yaml_json_model_json_is_identity(config: dict[str, Any]) -> None:
    """Compiling the compiled JSON gives the same bytes and the same normalized model."""
    from_yaml = compile_text(_yaml(config), "generated.yaml")
    assert from_yaml.spec is not None, from_yaml.diagnostics
    assert not [d for d in from_yaml.diagnostics if d.severity == "error"], from_yaml.diagnostics
    first = from_yaml.emitted()
    from_json = compile_text(first, "generated.json")
    assert from_json.kind == "native"
    assert from_json.spec == from_yaml.spec
    assert from_json.emitted() == first


@settings(max_examples=30, deadline=None)
@given(configs())
def test_python_mapping_and_yaml_agree(config: dict[str, Any]) -> None:
    """A config given as a Python mapping compiles to the same bytes as its YAML text."""
    via_api = kvreplay.compile_config(config, matrix=False)
    via_yaml = compile_text(_yaml(config), "generated.yaml")
    assert via_api.emitted() == via_yaml.emitted()
