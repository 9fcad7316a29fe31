"""The Mooncake FAST'25 trace slices load cleanly and keep the facts their README measures
(tests/cases/mooncake/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_io_support import trace_traffic

from kvreplay.engine.traces import MooncakeWorkload, check_traffic, workload_from_traffic


@pytest.mark.parametrize(("name", "rows", "distinct_times", "hit_ratio"), [
    ("conversation", 2_000, 224, 0.289),
    ("synthetic", 1_000, 998, 0.168),
])
def test_trace_slices_replay_with_their_measured_facts(request: pytest.FixtureRequest, name: str,
                                                       rows: int, distinct_times: int,
                                                       hit_ratio: float) -> None:
    """No diagnostics, every row released once in file order, the README's prefix hit ratio."""
    path: Path = request.getfixturevalue(f"{name}_trace")
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
        for req in workload.release(now):
            released += 1
            times.add(req.release_ms)
            ordinals.append(req.ordinal)
            parent, missed = -1, False
            for value, _ in req.prompt:  # one run per hash id (512-token block)
                blocks += 1
                node = prefixes.get((parent, value))
                if node is None:
                    node = prefixes[(parent, value)] = len(prefixes)
                    missed = True
                elif not missed:
                    hits += 1
                parent = node
            workload.on_terminal(req, now)
    assert released == rows and ordinals == sorted(ordinals)
    assert len(times) == distinct_times
    assert round(hits / blocks, 3) == hit_ratio
