"""Workloads are the same in every process: release sequences do not depend on PYTHONHASHSEED."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from engine_io_support import write_trace

SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[2])
from engine_io_support import drive, trace_traffic, traffic
from kvreplay.engine.traces import workload_from_traffic
sections = [
    trace_traffic(sys.argv[1], fmt="mooncake-delta"),
    trace_traffic(sys.argv[1], load="concurrency", concurrency=2),
    traffic(source_type="synthetic-session", input_tokens=16, output_tokens=3,
            turns_per_session=3, shared_prefix_ratio=0.5, num_prefix_groups=3,
            inter_turn_delay_ms=2.5, load_type="poisson", request_rate=40.0, arrival_seed=9,
            stop_sessions=12),
    traffic(source_type="synthetic", input_tokens=16, output_tokens=3, cached_prefix_tokens=8,
            load_type="constant_rate", request_rate=7.0, stop_requests=9),
]
out = []
for section in sections:
    done = drive(workload_from_traffic(section, base_dir=".", block_size=4))
    out.append([[d.ordinal, d.session_id, d.turn_index, repr(d.release_ms), d.prompt]
                for d in done])
print(json.dumps(out))
"""


def test_release_sequences_are_identical_across_hash_seeds(tmp_path: Path) -> None:
    """Two processes with different PYTHONHASHSEED produce the same releases and prompts."""
    rows: list[dict[str, object]] = []
    for i in range(30):
        if i % 3:  # session turns in time order; single rows out of order
            rows.append({"timestamp": 20 + i, "output_length": 1 + i % 3, "hash_ids": [i % 4, i],
                         "session_id": f"user-{i % 7}"})
        else:
            rows.append({"timestamp": (i * 37) % 11, "output_length": 2, "hash_ids": [i % 4]})
    path = write_trace(tmp_path / "t.jsonl", rows)
    support = str(Path(__file__).resolve().parent)
    outputs = []
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", SCRIPT, str(path), support], env=env,
                              capture_output=True, text=True, timeout=120, check=True)
        outputs.append(json.loads(done.stdout))
    assert outputs[0] == outputs[1]
    assert all(outputs[0])
