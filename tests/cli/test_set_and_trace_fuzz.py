"""Fuzz `--set` and Mooncake trace rows through the real CLI: never an internal error.

Values come from the edges that once crashed: integers past Python's 4,300-digit limit, 1e-300
speedups, lone surrogates, control characters, deep nesting, wrong types.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
CONFIG = str(REPO / "examples" / "g2-restore-mooncake.yaml")
FUZZ = settings(max_examples=80, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

REAL_PATHS = [
    "engine.mode", "engine.model", "engine.backend", "engine.context_length",
    "engine.workers.aggregated.parallelism.replicas",
    "engine.workers.aggregated.scheduler.max_batched_tokens",
    "engine.workers.aggregated.kv_cache.block_size",
    "engine.workers.aggregated.kv_cache.capacity.blocks",
    "engine.workers.aggregated.kv_cache.host_offload.num_host_blocks",
    "engine.workers.aggregated.kv_cache.host_offload.d2h_bandwidth_gbps",
    "engine.workers.aggregated.kv_cache.host_offload.latency_to_first_byte_ms",
    "engine.workers.aggregated.timing.prefill_ms", "engine.workers.aggregated.timing.speedup_ratio",
    "router.policy", "router.seed", "router.kv_event_lag_ms", "traffic.source.type",
    "traffic.source.block_size", "traffic.load.type", "traffic.load.speedup",
    "traffic.stop.requests", "traffic.stop.max_virtual_time_seconds", "scaling.config.x",
]
# Worker counts multiply objects (65,536 replicas take seconds): lint them, do not run them.
RUN_PATHS = [p for p in REAL_PATHS if "parallelism" not in p]
EDGE_VALUES = [
    "9" * 5000, "-" + "9" * 5000, "0x" + "f" * 400, "1e-300", "-1e-300", "5e-324", "1e308",
    "1e999", ".nan", "-.inf", '"\\ud800"', "\udcff", "a\x01b", "\x00", "\t", "[" * 300 + "]" * 300,
    "{a: " * 120 + "1" + "}" * 120, "[[[", "{", "null", "~", "", "&a [*a]", "!!binary aGk=",
    "2001-01-01", "190:20:30", "a\n---\nb", "0", "-1", "true", "{type: fixed, blocks: 1e-300}",
]
segments = st.one_of(st.sampled_from(["engine", "workers", "aggregated", "traffic", "load", "a"]),
                     st.text(min_size=0, max_size=6))
paths = st.one_of(st.sampled_from(REAL_PATHS),
                  st.lists(segments, min_size=1, max_size=6).map(".".join),
                  st.integers(150, 1200).map(lambda n: ".".join(["a"] * n)))
yaml_values = st.one_of(st.sampled_from(EDGE_VALUES), st.text(max_size=20),
                        st.integers().map(str), st.floats().map(repr))


def _clean(code: int, err: str) -> None:
    assert code in (0, 1, 2), code
    assert "internal error" not in err and "Traceback" not in err, err


@FUZZ
@given(st.lists(st.tuples(paths, yaml_values), min_size=1, max_size=3))
def test_set_fuzz_lint(cli: Callable[..., Any], assignments: list[tuple[str, str]]) -> None:
    """`kvreplay lint --set PATH=VALUE ...`: a finding or a usage error, never a crash."""
    sets = [a for path, value in assignments for a in ("--set", f"{path}={value}")]
    ran = cli("lint", "--format", "json", CONFIG, *sets)
    _clean(ran.code, ran.err)
    if ran.code != 2:
        json.loads(ran.out)


def test_an_override_that_looks_like_an_option_is_a_usage_error(cli: Callable[..., Any]) -> None:
    """`--set -=1` (a path starting with `-`): argparse's usage error, exit 2, no traceback
    (found by the fuzz; `--set=-=1` passes it as a value)."""
    ran = cli("lint", CONFIG, "--set", "-=1")
    assert ran.code == 2 and "expected one argument" in ran.err
    _clean(ran.code, ran.err)


@FUZZ
@given(st.sampled_from(RUN_PATHS), yaml_values)
def test_set_fuzz_run(cli: Callable[..., Any], tmp_path: Path, path: str, value: str) -> None:
    """`kvreplay run --set` on a real example: a report, a refusal or a usage error."""
    report = tmp_path / "report.json"
    report.unlink(missing_ok=True)
    ran = cli("run", CONFIG, "-q", "--set", f"{path}={value}", "-o", str(report))
    _clean(ran.code, ran.err)
    if ran.code == 0:
        json.loads(report.read_text("utf-8"))


FIELDS = ["timestamp", "input_length", "output_length", "hash_ids", "session_id", "request_id",
          "delay", "output_token_ids", "priority", "policy_class", "extra"]
EDGE_NUMBERS = [10**400, -(10**400), 2**64, -1, 0, 1e308, -1e308, 5e-324, 0.5, 1e15, 1e15 + 1]
row_values = st.one_of(
    st.sampled_from(EDGE_NUMBERS), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["NaN", "Infinity", "-1", "\ud800", "a\udfffb", "\x00\x1b[31m", "\n", ""]),
    st.text(max_size=8), st.booleans(), st.none(),
    st.lists(st.one_of(st.integers(), st.sampled_from(EDGE_NUMBERS), st.text(max_size=3)),
             max_size=4),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
base_row = {"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": [1]}
keys = st.one_of(st.sampled_from(FIELDS), st.sampled_from(["\ud800", "\x1b[2J", "a\nb"]))
rows = st.lists(st.dictionaries(keys, row_values, max_size=4)
                .map(lambda changes: {**base_row, **changes}), min_size=1, max_size=4)
raw_lines = st.sampled_from([
    '{"timestamp": NaN, "output_length": 1, "hash_ids": [1]}',
    '{"timestamp": ' + "9" * 5000 + ', "output_length": 1, "hash_ids": [1]}',
    '{"timestamp": 0, "output_length": 1, "hash_ids": [1], "session_id": "\\ud800"}',
    "[" * 2000 + "]" * 2000, "\x00", "{}",
])


@FUZZ
@given(rows, st.lists(raw_lines, max_size=1))
@example([{**base_row}, {**base_row, "timestamp": 1e15}], [])  # 64-bit token gaps overflowed
def test_mooncake_row_fuzz_run(cli: Callable[..., Any], tmp_path: Path,
                               trace_rows: list[dict[str, Any]], raw: list[str]) -> None:
    """`kvreplay run --trace` over random rows: a report, or located TRACE-* findings."""
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in trace_rows)
                     + "".join(line + "\n" for line in raw), encoding="utf-8")
    report = tmp_path / "report.json"
    report.unlink(missing_ok=True)
    ran = cli("run", CONFIG, "-q", "--trace", str(trace), "-o", str(report))
    _clean(ran.code, ran.err)
    if ran.code == 0:
        json.loads(report.read_text("utf-8"))
    else:
        assert not report.exists()
