"""Sizes no run could finish are refused up front with their bound, before anything is built:
4.3 billion ranks (two counts at their schema maximum) and an 8 MiB flow list in a config."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "kv-router-mooncake.yaml"


def test_workers_times_attention_dp_past_the_bound_is_refused(cli: Callable[..., Any],
                                                               tmp_path: Path) -> None:
    """65,536 workers x attention DP 65,536 (a YAML config through --set, and the same as a
    native spec): TOPO-SIZE at the worker count, exit 1, nothing replayed or written."""
    out = tmp_path / "r.json"
    ran = cli("run", str(EXAMPLE), "--set", "engine.workers.aggregated.parallelism.replicas=65536",
              "--set", "engine.workers.aggregated.parallelism.attention_data=65536",
              "-o", str(out))
    assert ran.code == 1
    assert "error TOPO-SIZE role `aggregated` has 65536 workers x attention DP 65536 = " \
           "4294967296 ranks; kvreplay simulates at most 65536 ranks per role" in ran.out + ran.err
    assert not out.exists()
    compiled = cli("compile", str(EXAMPLE))
    native = json.loads(compiled.out)
    native["spec"]["topology"]["workers"]["initial_workers"] = 65536
    native["spec"]["engine"]["dp_size"] = 65536
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(native))
    ran = cli("lint", "--format", "json", str(spec))
    assert ran.code == 1
    (d,) = json.loads(ran.out)["files"][0]["diagnostics"]
    assert (d["rule"], d["path"]) == ("TOPO-SIZE", "/spec/topology/workers/initial_workers")


def test_an_8_mib_flow_list_is_refused_at_the_value_past_the_bound(
        cli: Callable[..., Any], tmp_path: Path) -> None:
    """A config whose unknown key holds a flow list of 2.7 million numbers (8.1 MB, under the
    8 MiB file limit): FILE-TOO-LARGE at value 200,001 (exit 2), not a minute and gigabytes."""
    config = tmp_path / "c.yaml"
    base = EXAMPLE.read_text()
    config.write_text(base + "extra: [" + ", ".join(["1"] * 2_700_000) + "]\n")
    ran = cli("lint", "--format", "json", str(config))
    assert ran.code == 2
    (d,) = json.loads(ran.out)["files"][0]["diagnostics"]
    line = base.count("\n") + 1
    assert (d["rule"], d["line"]) == ("FILE-TOO-LARGE", line)
    assert d["message"] == ("the document holds more than 200,000 values, the limit for "
                            "configs, specs and sweep files")
