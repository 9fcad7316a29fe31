"""Sweep files under `kvreplay lint`: located findings with rule IDs, the expansion order, the
schema, and a sweep file given where a config is expected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sweep_support import SLICE, invoke, plan_of, write_sweep

REPO = Path(__file__).resolve().parents[2]
BASE = """\
kind: sweep
base:
  engine:
    model: meta-llama/Llama-3.1-8B-Instruct
    workers: {aggregated: {kv_cache: {block_size: 512}}}
"""


Capture = pytest.CaptureFixture[str]


def _lint(capsys: Capture, path: Path) -> tuple[int, list[dict[str, object]]]:
    ran = invoke(capsys, "lint", "--format", "json", str(path))
    found = json.loads(ran.out)
    return ran.code, [d for f in found["files"] for d in f["diagnostics"]]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_examples_lint_clean(capsys: Capture, tmp_path: Path) -> None:
    """`kvreplay lint examples/` is clean even with --strict: the shipped sweep's refused point
    is a warning, suppressed on its line; without the suppressions it is reported."""
    ran = invoke(capsys, "lint", "--format", "concise", "--strict", str(REPO / "examples"))
    assert ran.code == 0, ran.out
    assert ran.out == ""
    folder = REPO / "examples" / "sweeps"
    text = (folder / "kv-router-capacity.yaml").read_text(encoding="utf-8")
    bare = _write(tmp_path, text.replace("  # kvreplay: ignore[SWEEP-POINT-SKIPPED]", "")
                  .replace("../", f"{folder.parent}/"))
    ran = invoke(capsys, "lint", "--format", "concise", str(bare))
    assert ran.code == 0 and "warning SWEEP-POINT-SKIPPED" in ran.out and "G2-BACKEND" in ran.out


def test_unknown_dotted_path_is_located_at_its_key(capsys: Capture,
                                                   tmp_path: Path) -> None:
    """SWEEP-PATH at the grid key's line and column, with a did-you-mean hint."""
    path = _write(tmp_path, BASE + "grid:\n  engine.workers.aggregated.parallelism.replica: [1]\n")
    code, found = _lint(capsys, path)
    assert code == 1
    (d,) = found
    assert (d["rule"], d["line"], d["column"]) == ("SWEEP-PATH", 7, 3)
    assert d["hint"] == "did you mean `replicas`?"


def test_paths_of_a_native_base_follow_the_native_schema(capsys: Capture,
                                                         tmp_path: Path) -> None:
    """With a native spec as the base, dotted paths are native paths (through its role
    alternatives); a config path is not one."""
    import kvreplay

    native = kvreplay.compile_config(REPO / "examples" / "g2-restore-mooncake.yaml").emitted()
    (tmp_path / "spec.json").write_text(native, encoding="utf-8")
    text = ("kind: sweep\nbase: spec.json\ngrid:\n"
            "  spec.engine.rank.native_host_offload.num_host_blocks: [2, 8]\n"
            "  spec.engine.rank.host_offload.num_host_blocks: [2]\n")
    code, found = _lint(capsys, _write(tmp_path, text))
    assert code == 1 and [(d["rule"], d["line"]) for d in found] == [("SWEEP-PATH", 5)]


def test_sweeping_the_trace_paths_is_refused(capsys: Capture, tmp_path: Path) -> None:
    """Trace paths are the sweep's `traces`, not a grid axis."""
    path = _write(tmp_path, BASE + "grid:\n  traffic.source.paths: [[a.jsonl]]\n")
    code, found = _lint(capsys, path)
    assert code == 1 and [d["rule"] for d in found] == ["SWEEP-PATH"]
    assert "`traces`" in str(found[0]["message"])


def test_empty_grid_is_reported(capsys: Capture, tmp_path: Path) -> None:
    """A sweep without any point: SWEEP-EMPTY at `grid`."""
    code, found = _lint(capsys, _write(tmp_path, BASE + "grid: {}\n"))
    assert code == 1 and [(d["rule"], d["line"]) for d in found] == [("SWEEP-EMPTY", 6)]


def test_unknown_figure_in_sla_and_objective(capsys: Capture, tmp_path: Path) -> None:
    """SWEEP-FIGURE for an SLA bound and an objective that name no summary figure."""
    text = BASE + "points: [{}]\nsla:\n  p90_ttft: {max: 200}\nobjective: {maximize: goodput}\n"
    code, found = _lint(capsys, _write(tmp_path, text))
    assert code == 1
    assert [(d["rule"], d["line"]) for d in found] == [("SWEEP-FIGURE", 8), ("SWEEP-FIGURE", 9)]
    assert "p90_ttft_ms" in str(found[0]["hint"])


def test_an_sla_range_no_value_meets_is_reported(capsys: Capture, tmp_path: Path) -> None:
    """`{min: 100, max: 1}` (issue 30) is SWEEP-SLA at the figure; bounding rejected_requests
    as a figure is SWEEP-SLA too, with the `max_rejected` to write instead."""
    text = BASE + ("points: [{}]\nsla:\n  p90_ttft_ms: {min: 100, max: 1}\n"
                   "  rejected_requests: {max: 3}\n  max_rejected: 1\n")
    code, found = _lint(capsys, _write(tmp_path, text))
    assert code == 1
    assert [(d["rule"], d["line"], d["column"]) for d in found] == [("SWEEP-SLA", 8, 3),
                                                                   ("SWEEP-SLA", 9, 3)]
    assert "min 100 is above its max 1" in str(found[0]["message"])
    assert "max_rejected: 3" in str(found[1]["hint"])


def test_max_rejected_is_a_count(capsys: Capture, tmp_path: Path) -> None:
    """`sla.max_rejected` takes a count of requests (the schema refuses -1 and 1.5) and is read
    into the plan (default 0)."""
    for bad in ("-1", "1.5"):
        text = BASE + f"points: [{{}}]\nsla: {{max_rejected: {bad}}}\n"
        code, found = _lint(capsys, _write(tmp_path, text))
        assert code == 1 and [d["line"] for d in found] == [7], bad
    assert plan_of(_write(tmp_path, BASE + "points: [{}]\nsla: {max_rejected: 4}\n")
                   ).max_rejected == 4
    assert plan_of(_write(tmp_path, BASE + "points: [{}]\n")).max_rejected == 0


def test_unreadable_base_is_located_at_base(capsys: Capture, tmp_path: Path) -> None:
    """SWEEP-BASE at the `base` value when the file is missing."""
    code, found = _lint(capsys, _write(tmp_path, "kind: sweep\nbase: nothere.yaml\npoints: [{}]\n"))
    assert code == 1 and [(d["rule"], d["line"], d["column"]) for d in found] == [
        ("SWEEP-BASE", 2, 7)]


def test_invalid_value_is_located_at_the_value(capsys: Capture,
                                               tmp_path: Path) -> None:
    """A swept value the schema refuses is a schema error at that very value."""
    text = BASE + "grid:\n  engine.workers.aggregated.parallelism.replicas: [1, -2]\n"
    code, found = _lint(capsys, _write(tmp_path, text))
    assert code == 1
    assert [(d["rule"], d["line"], d["column"]) for d in found] == [("SCHEMA-RANGE", 7, 55)]


def test_matrix_violation_is_a_skip_warning(capsys: Capture, tmp_path: Path) -> None:
    """A point that violates the support matrix is a SWEEP-POINT-SKIPPED warning naming the
    rule, at the swept value that causes it."""
    text = BASE + ("points:\n  - {}\n  - engine.backend: sglang\n"
                   "    engine.workers.aggregated.kv_cache.host_offload: {num_host_blocks: 9}\n")
    code, found = _lint(capsys, _write(tmp_path, text))
    assert code == 0
    (d,) = found
    assert (d["rule"], d["severity"], d["line"]) == ("SWEEP-POINT-SKIPPED", "warning", 9)
    assert "point 1" in str(d["message"]) and "G2-BACKEND" in str(d["message"])


def test_grid_order_is_cartesian_first_path_slowest_then_points(tmp_path: Path) -> None:
    """Points: the grid's product in file order (last path fastest), then explicit points."""
    text = BASE + ("grid:\n  engine.backend: [vllm, trtllm]\n"
                   "  router.policy: [round_robin, kv_router]\n"
                   "points:\n  - {engine.workers.aggregated.parallelism.replicas: 3}\n")
    plan = plan_of(_write(tmp_path, text))
    assert [p.parameters() for p in plan.points] == [
        {"engine.backend": "vllm", "router.policy": "round_robin"},
        {"engine.backend": "vllm", "router.policy": "kv_router"},
        {"engine.backend": "trtllm", "router.policy": "round_robin"},
        {"engine.backend": "trtllm", "router.policy": "kv_router"},
        {"engine.workers.aggregated.parallelism.replicas": 3},
    ]
    assert plan.axes == ("engine.backend", "router.policy",
                         "engine.workers.aggregated.parallelism.replicas")


def test_equal_specs_share_a_digest(tmp_path: Path) -> None:
    """A value equal to the default gives the same spec, the same digest, one report."""
    text = BASE + "grid:\n  engine.workers.aggregated.parallelism.replicas: [1]\npoints: [{}]\n"
    plan = plan_of(_write(tmp_path, text))
    assert plan.points[0].spec_digest == plan.points[1].spec_digest is not None


def test_sweep_with_errors_runs_nothing(capsys: Capture, tmp_path: Path) -> None:
    """`kvreplay sweep` on a file with errors prints them, exits 1 and writes nothing."""
    path = _write(tmp_path, BASE + "grid: {}\n")
    ran = invoke(capsys, "sweep", str(path), "-o", str(tmp_path / "out"))
    assert ran.code == 1 and "SWEEP-EMPTY" in ran.err
    assert not (tmp_path / "out").exists()


def test_run_refuses_a_sweep_file(capsys: Capture, tmp_path: Path) -> None:
    """`kvreplay run` on a sweep file says what it is and how to run it."""
    ran = invoke(capsys, "run", str(write_sweep(tmp_path, SLICE)))
    assert ran.code == 1 and "SWEEP-NOT-CONFIG" in ran.err


def test_schema_sweep_is_the_shipped_file(capsys: Capture) -> None:
    """`kvreplay schema sweep` prints schema/sweep.schema.json."""
    ran = invoke(capsys, "schema", "sweep")
    assert ran.out == (REPO / "schema" / "sweep.schema.json").read_text()


def test_jobs_must_be_positive(capsys: Capture, tmp_path: Path) -> None:
    """--jobs 0 is a usage error."""
    ran = invoke(capsys, "sweep", str(write_sweep(tmp_path, SLICE)), "-o", str(tmp_path / "o"),
                 "-j", "0")
    assert ran.code == 2 and "--jobs" in ran.err


WIDE = BASE + """\
    backend: vllm
grid:
  engine.workers.aggregated.parallelism.replicas: [1, 2, -1, 2.5]
  engine.workers.aggregated.kv_cache.capacity: [{type: fixed, blocks: 10}, {type: fixed},
                                                {type: nope, blocks: 3}, {blocks: -4}]
  engine.backend: [vllm, sglang, trtllm]
points:
  - {engine.workers.aggregated.kv_cache.block_size: 0}
  - {engine.backend: sglang, engine.workers.aggregated.kv_cache.host_offload: {num_host_blocks: 4}}
  - {engine.workers.aggregated: null}
"""


def test_shared_subtrees_give_the_findings_of_a_full_validation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Points share the base's unchanged objects and each shared subtree is validated once
    (kvreplay.schema.json_schemas.ValidMemo): the plan, every finding and every point, equals the
    plan made validating every point in full (valid values, schema errors, combinations,
    removals)."""
    import contextlib

    from kvreplay.sweep import plan as plan_module

    path = _write(tmp_path, WIDE)
    fast = plan_of(path)
    monkeypatch.setattr(plan_module, "remembering", lambda memo: contextlib.nullcontext())
    full = plan_of(path)
    assert len(fast.points) == 4 * 4 * 3 + 3
    assert fast.diagnostics == full.diagnostics and fast.points == full.points
    assert {d.rule for d in fast.diagnostics} >= {"SCHEMA-RANGE", "SCHEMA-TYPE",
                                                 "SWEEP-POINT-SKIPPED"}


def test_the_schemas_have_no_context_dependent_keyword() -> None:
    """The memo skips a (subschema, instance) pair it saw valid: exact only while no keyword's
    result depends on more than the two (JSON Schema 2020-12's unevaluated* and dynamic
    references)."""
    for name in ("config", "native", "sweep", "report"):
        text = (REPO / "schema" / f"{name}.schema.json").read_text(encoding="utf-8")
        for keyword in ("unevaluatedProperties", "unevaluatedItems", "$dynamicRef",
                        "$dynamicAnchor", "$recursiveRef"):
            assert f'"{keyword}"' not in text, (name, keyword)
