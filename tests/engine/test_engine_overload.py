"""An overloaded rank (far more requests waiting than it runs): no pass looks through the waiting
queue, so a pass costs the same with ten or ten thousand waiting (issue 29's overload regime,
pinned by counting, never by timing)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

import pytest
from engine_support import ListWorkload, native, native_pd, rank, request

from kvreplay.engine import run_native
from kvreplay.engine import scheduler as scheduler_module

WAITING = 300


class CountingDeque(deque[Any]):
    """A deque that counts the elements iterated over and how deep remove() had to look."""

    visited = 0
    depth = 0

    def __iter__(self) -> Iterator[Any]:
        for item in super().__iter__():
            CountingDeque.visited += 1
            yield item

    def remove(self, value: Any) -> None:
        CountingDeque.depth += self.index(value)
        super().remove(value)


@pytest.mark.parametrize("timing", ["fixed", "polynomial"])
@pytest.mark.parametrize("host", [False, True])
def test_an_overloaded_rank_never_scans_its_waiting_queue(
        timing: str, host: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """300 requests at once on one rank running 2 at a time: every pass admits from the head,
    and removing the admitted request finds it first (with and without a private G2)."""
    monkeypatch.setattr(scheduler_module, "deque", CountingDeque)
    monkeypatch.setattr(CountingDeque, "visited", 0)
    monkeypatch.setattr(CountingDeque, "depth", 0)
    overrides: dict[str, Any] = {"max_num_seqs": 2, "num_gpu_blocks": 16,
                                 "timing_model": {"type": timing}}
    if timing == "fixed":
        overrides["timing_model"].update(prefill_ms=2.0, decode_ms=1.0)
    if host:
        overrides["native_host_offload"] = {"num_host_blocks": 32, "d2h_bandwidth_gbps": 1.0,
                                            "h2d_bandwidth_gbps": 1.0}
    workload = ListWorkload([request(i, 0.0, 8, 3, [i % 7, 100 + i]) for i in range(WAITING)])
    result = run_native(native(rank(**overrides)), workload=workload)
    assert sum(1 for r in result.records if r.output_length == 3) == WAITING
    assert max(r.first_admit_ms or 0.0 for r in result.records) > 0.0  # they did wait
    assert (CountingDeque.visited, CountingDeque.depth) == (0, 0)


class IndexCountingDeque(CountingDeque):
    """CountingDeque that also counts elements read by index."""

    def __getitem__(self, index: Any) -> Any:
        CountingDeque.visited += 1
        return super().__getitem__(index)


def decode_visits(decode: dict[str, Any], host: bool, output: int,
                  monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """P/D runs of 200 and 400 requests at once onto one decode rank of `decode` (plus a
    private G2 with `host`): per run, (queue elements looked at, readmissions)."""
    if host:
        decode = {**decode, "native_host_offload": {
            "num_host_blocks": 64, "d2h_bandwidth_gbps": 1.0, "h2d_bandwidth_gbps": 1.0}}
    visits = []
    for n in (200, 400):
        monkeypatch.setattr(CountingDeque, "visited", 0)
        monkeypatch.setattr(CountingDeque, "depth", 0)
        workload = ListWorkload([request(i, 0.0, 8 + 4 * (i % 5), output,
                                         [i % 7, *(100 * k + i for k in range(1, 6))])
                                 for i in range(n)])
        result = run_native(native_pd(rank(num_gpu_blocks=4096), rank(**decode)),
                            workload=workload)
        assert sum(1 for r in result.records if r.terminal_status == "completed") == n
        visits.append((CountingDeque.visited + CountingDeque.depth,
                       sum(r.readmission_count for r in result.records)))
    return visits


@pytest.mark.parametrize("host", [False, True])
def test_an_overloaded_pd_decode_rank_places_arrivals_from_the_back(
        host: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Destinations arriving on a decode rank running 2 at a time find their place in the
    waiting queue by acceptance order from its back: the queue elements looked at grow
    linearly with the requests (they grew as n^2 / 4 with the scan from the front)."""
    monkeypatch.setattr(scheduler_module, "deque", IndexCountingDeque)
    (small, _), (large, _) = decode_visits({"max_num_seqs": 2, "num_gpu_blocks": 4096}, host,
                                           3, monkeypatch)
    assert large < 10 * 400 and large < 2.5 * small


class SearchCountingDeque(IndexCountingDeque):
    """IndexCountingDeque that also counts how deep index() had to look."""

    def index(self, value: Any, *args: Any) -> int:
        at = super().index(value, *args)
        CountingDeque.depth += at
        return at


@pytest.mark.parametrize("host", [False, True])
def test_a_pd_decode_rank_finds_arrived_requests_behind_preempted_ones_at_once(
        host: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A decode rank with tight KV (8 running, 40 blocks) preempts hundreds of times, so
    preempted requests pile up at its queue's front: the requests whose KV arrived are kept in
    a second queue in queue order, so admitting them, placing new arrivals and taking them out
    never looks through the preempted ones (elements looked at grew as n^2 before: 193,958
    for 400 requests, 62,711 more deep in remove())."""
    monkeypatch.setattr(scheduler_module, "deque", SearchCountingDeque)
    (small, _), (large, readmitted) = decode_visits({"max_num_seqs": 8, "num_gpu_blocks": 40},
                                                    host, 30, monkeypatch)
    assert readmitted > 400  # preempted, many times
    assert large < 25 * 400 and large < 2.5 * small
