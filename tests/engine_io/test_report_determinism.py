"""The report text is the same in every process: it does not depend on PYTHONHASHSEED."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = r"""
import random, sys
sys.path.insert(0, sys.argv[1])
from engine_io_support import record
from kvreplay.engine.report import ReportFacts, Sla, build_report, dumps_report
rng = random.Random(5)
records = []
for i in range(200):
    start = rng.uniform(0, 1000)
    tokens = [start + rng.uniform(5, 50)]
    for _ in range(rng.randrange(0, 12)):
        tokens.append(tokens[-1] + rng.choice([0.5, 1.25, 7.0, rng.uniform(0.1, 30)]))
    records.append(record(i, start, tokens, input_length=rng.randrange(1, 900),
                          reused=rng.randrange(0, 2) * 64, session_id=f"s{i % 13}",
                          turn_index=i // 13))
facts = ReportFacts(decode_workers=3, decode_gpus_per_worker=2,
                    sla=Sla(ttft_ms=30.0, itl_ms=9.0), committed_prefill_tokens=12345,
                    summary_extra={"g2_domains": []})
sys.stdout.write(dumps_report(build_report(records, facts, version="pinned")))
"""


def test_report_bytes_are_identical_across_hash_seeds() -> None:
    """Two processes with different PYTHONHASHSEED write byte-identical reports."""
    support = str(Path(__file__).resolve().parent)
    texts = []
    for seed in ("1", "987"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", SCRIPT, support], env=env,
                              capture_output=True, text=True, timeout=120, check=True)
        texts.append(done.stdout)
    assert texts[0] == texts[1]
    assert '"completed_requests": 200' in texts[0]
