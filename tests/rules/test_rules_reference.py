"""Parity with the reference native validator: same accept/reject verdicts on the same ranks.

The reference engine lives in its own venv (it is never a kvreplay dependency): its Python runs
reference_probe.py in a subprocess. Set KVREPLAY_REFERENCE_PYTHON to point elsewhere; the tests
skip when that Python cannot import `dynamo`.

The native normalizer validates ONE rank at a time, so rank-local rules are compared there:
G2-BACKEND, G2-SCOPE, NATIVE-LAYOUT-ID (and G2-BYTES, G2-PREFIX-CACHING, G2-SPECULATION for MTP,
G3-REQUIRES-G2, BACKEND-PREFILL-SCHEDULE-INTERVAL, which it enforces too). Shared-pool
agreement spans two roles, so POOL-* are compared through `run_trace_replay` with one prefill
and one decode rank on a tiny trace.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rules_support import path_origin

from kvreplay.compiler.emit import rank
from kvreplay.rules import run_rules
from kvreplay.schema.layout import derive_layout_id
from kvreplay.schema.native_defaults import block_size_default
from kvreplay.schema.spec import G3Offload, HostOffload, Role, Spec, Speculation

PROBE = Path(__file__).with_name("reference_probe.py")
# The reference is installed into the test environment (tools/install-reference.sh, CI).
REFERENCE_PYTHON = os.environ.get("KVREPLAY_REFERENCE_PYTHON", sys.executable)

# Native message fragment -> the rule that says the same.
NATIVE_RULES = {
    "prefill_schedule_interval is supported only": "BACKEND-PREFILL-SCHEDULE-INTERVAL",
    "is supported only for backend=vllm": "G2-BACKEND",
    "is a G3 scope": "G2-SCOPE",
    "requires a nonempty kv_layout_id": "NATIVE-LAYOUT-ID",
    "requires kv_cache_bytes_per_token": "G2-BYTES",
    "requires enable_prefix_caching=true": "G2-PREFIX-CACHING",
    "does not support aic_nextn": "G2-SPECULATION",
    "g3_offload requires native_host_offload": "G3-REQUIRES-G2",
    "enable_chunked_prefill=false is not supported": "BACKEND-SGLANG-CHUNKED-PREFILL",
}
RANK_RULES = frozenset(NATIVE_RULES.values())
POOL_RULES = frozenset({"POOL-LAYOUT", "POOL-CAPACITY", "POOL-BANDWIDTH"})

pytestmark = pytest.mark.reference


@functools.cache
def reference_available() -> bool:
    if not Path(REFERENCE_PYTHON).exists():
        return False
    probe = subprocess.run([REFERENCE_PYTHON, "-c", "import dynamo._core, dynamo.replay"],
                           capture_output=True, env={**os.environ, "DYN_LOG": "error"})
    return probe.returncode == 0


def native_verdicts(request: dict[str, Any]) -> dict[str, list[str | None]]:
    if not reference_available():
        pytest.skip("the reference engine (dynamo) is not importable")
    done = subprocess.run([REFERENCE_PYTHON, str(PROBE)], input=json.dumps(request),
                          capture_output=True, text=True, check=True, timeout=300,
                          env={**os.environ, "DYN_LOG": "error"})
    result: dict[str, list[str | None]] = json.loads(done.stdout)
    return result


def native_rule(message: str) -> str:
    found = [rule for fragment, rule in NATIVE_RULES.items() if fragment in message]
    assert found, f"native rejection no rule maps to: {message}"
    return found[0]


def generated_roles() -> list[Role]:
    """Aggregated roles over backends, G2 forms, KV bytes, prefix caching, MTP, G3 and DP/TP,
    without chunked prefill, and with vLLM's prefill cadence."""
    g2_forms = ["none", "local", "shared-derived", "shared-missing", "shared-blank",
                "shared-explicit", "worker_local"]
    roles = []
    for backend, g2, kv_bytes, prefix, mtp, g3, (dp, tp) in itertools.product(
            ("vllm", "sglang", "trtllm"), g2_forms, (131072, None), (True, False),
            (False, True), (False, True), ((1, 1), (2, 4))):
        block = block_size_default(backend)
        host = None
        if g2 != "none":
            scope = {"local": "dp_rank_local", "worker_local": "worker_local"}.get(
                g2, "cluster_shared")
            layout = {"shared-derived": derive_layout_id(backend, block, kv_bytes, tp),
                      "shared-blank": "  ", "shared-explicit": "pool-1"}.get(g2)
            host = HostOffload(scope=scope, num_host_blocks=64, kv_layout_id=layout)
        roles.append(Role(
            name="aggregated", backend=backend, block_size=block, dp_size=dp,
            tensor_parallel_size=tp, kv_cache_bytes_per_token=kv_bytes,
            enable_prefix_caching=prefix, host_offload=host,
            speculation=Speculation("mtp", 2, (0.8, 0.5)) if mtp else None,
            g3_offload=G3Offload(scope="worker_local", num_g3_blocks=128) if g3 else None,
        ))
    for backend, prefix, (dp, tp) in itertools.product(("vllm", "sglang", "trtllm"),
                                                       (True, False), ((1, 1), (2, 4))):
        roles.append(Role(name="aggregated", backend=backend,
                          block_size=block_size_default(backend), dp_size=dp,
                          tensor_parallel_size=tp, enable_prefix_caching=prefix,
                          enable_chunked_prefill=False))
    for backend, interval, dp in itertools.product(("vllm", "sglang", "trtllm"), (1, 2, 5),
                                                   (1, 2)):
        roles.append(Role(name="aggregated", backend=backend,
                          block_size=block_size_default(backend), dp_size=dp,
                          prefill_schedule_interval=interval))
    return roles


def test_rank_verdicts_match_the_native_normalizer() -> None:
    """Over hundreds of generated ranks, a rank-local rule fires exactly when native rejects."""
    roles = generated_roles()
    assert len(roles) >= 200
    request = {"ranks": [{"engine": rank(r), "dp_size": r.dp_size,
                          "tensor_parallel_size": r.tensor_parallel_size} for r in roles]}
    verdicts = native_verdicts(request)["ranks"]
    rejected = 0
    for role, verdict in zip(roles, verdicts, strict=True):
        spec = Spec(model="m", roles=(role,))
        ours = {d.rule for d in run_rules(spec, path_origin())} & RANK_RULES
        assert (verdict is not None) == bool(ours), (rank(role), verdict, ours)
        if verdict is not None:
            rejected += 1
            assert native_rule(verdict) in ours, (verdict, ours)
    assert 0 < rejected < len(roles)


def pool_role(name: str, first: bool, blocks: int, shared_d2h: float, shared_h2d: float,
              d2h: float, latency: float, tp: int, kv_bytes: int, ids: str) -> Role:
    """The first participant keeps the defaults; the second takes the varied values."""
    tp = 1 if first else tp
    kv_bytes = 1000 if first else kv_bytes
    layout = {"derived": derive_layout_id("vllm", 64, kv_bytes, tp), "same": "pool",
              "different": "pool-a" if first else "pool-b"}[ids]
    host = HostOffload(
        scope="cluster_shared", num_host_blocks=64 if first else blocks,
        d2h_bandwidth_gbps=32.0 if first else d2h,
        shared_d2h_bandwidth_gbps=80.0 if first else shared_d2h,
        shared_h2d_bandwidth_gbps=80.0 if first else shared_h2d,
        latency_to_first_byte_ms=0.0 if first else latency, kv_layout_id=layout)
    return Role(name=name, block_size=64, num_gpu_blocks=512, tensor_parallel_size=tp,
                kv_cache_bytes_per_token=kv_bytes, host_offload=host)


def generated_pools() -> list[Spec]:
    """Prefill + decode `cluster_shared` pairs differing in each contract field, or not at all."""
    specs = []
    for values in itertools.product((64, 128), (80.0, 40.0), (80.0, 40.0), (32.0, 8.0),
                                    (0.0, 1.5), (1, 2), (1000, 2000),
                                    ("derived", "same", "different")):
        roles = (pool_role("prefill", True, *values), pool_role("decode", False, *values))
        specs.append(Spec(model="m", mode="disaggregated", roles=roles))
    return specs


def test_shared_pool_verdicts_match_native_replay(tmp_path: Path) -> None:
    """A POOL-* rule fires exactly when the native replay refuses the two participants."""
    trace = tmp_path / "tiny.jsonl"
    trace.write_text("".join(
        json.dumps({"timestamp": i, "input_length": 600, "output_length": 4,
                    "hash_ids": [0, i + 1]}) + "\n" for i in range(3)))
    specs = generated_pools()

    def args(role: Role) -> dict[str, Any]:
        return {"engine": rank(role), "dp_size": role.dp_size,
                "tensor_parallel_size": role.tensor_parallel_size}

    request = {"trace": str(trace),
               "pairs": [{"prefill": args(s.roles[0]), "decode": args(s.roles[1])} for s in specs]}
    verdicts = native_verdicts(request)["pairs"]
    refused = 0
    for spec, verdict in zip(specs, verdicts, strict=True):
        ours = {d.rule for d in run_rules(spec, path_origin())} & POOL_RULES
        assert (verdict is not None) == bool(ours), (spec.roles, verdict, ours)
        if verdict is not None:
            refused += 1
            assert "participants are incompatible" in verdict, verdict
    assert 0 < refused < len(specs)
