"""The shared Mooncake FAST'25 traces load cleanly and keep the facts their README measures."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_io_support import trace_traffic
from kvreplay.engine.traces import MooncakeWorkload, check_traffic, workload_from_traffic


@pytest.mark.parametrize(("name", "rows", "distinct_times", "hit_ratio"), [
    ("conversation", 12_031, 1_180, 0.366),
    ("synthetic", 3_993, None, 0.640),
])
def test_shared_traces_replay_with_their_measured_facts(shared: Path, name: str, rows: int,
                                                        distinct_times: int | None,
                                                        hit_ratio: float) -> None:
    """No diagnostics, every row released once in file order, the README's prefix hit ratio."""
    path = shared / "traces" / "mooncake" / f"{name}_trace.jsonl"
    section = trace_traffic(path, block_size=512)
    assert check_traffic(section, base_dir=".") == []
    workload = workload_from_traffic(section, base_dir=".")
    assert isinstance(workload, MooncakeWorkload)
    prefixes: dict[tuple[int, int], int] = {}
    hits = blocks = released = 0
    times: set[float] = set()
    ordinals: list[int] = []
    while not workload.exhausted():
        now = workload.next_release_ms()
        assert now is not None
        for request in workload.release(now):
            released += 1
            times.add(request.release_ms)
            ordinals.append(request.ordinal)
            parent, missed = -1, False
            for value, _ in request.prompt:  # one run per hash id (512-token block)
                blocks += 1
                node = prefixes.get((parent, value))
                if node is None:
                    node = prefixes[(parent, value)] = len(prefixes)
                    missed = True
                elif not missed:
                    hits += 1
                parent = node
            workload.on_terminal(request, now)
    assert released == rows and ordinals == sorted(ordinals)
    if distinct_times is not None:
        assert len(times) == distinct_times
    assert round(hits / blocks, 3) == hit_ratio
