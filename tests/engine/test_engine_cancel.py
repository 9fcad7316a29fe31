"""Canceling a request through the workload's view of the simulation (the agentic profile's
cancel), wherever the request is: here, still in the KV router's queue.

The case also runs under `python -O` in a subprocess: the cancel must not depend on an assert.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from engine_support import ListWorkload, native, rank, request

from kvreplay.engine.config import read_engine_spec
from kvreplay.engine.loop import Simulation
from kvreplay.engine.traces.request import Host, TraceRequest


class CancelingWorkload(ListWorkload):
    """A list workload that cancels one request at the end of a given instant."""

    acts_at_instants = True

    def __init__(self, requests: list[TraceRequest], ordinal: int, at_ms: float) -> None:
        super().__init__(requests)
        self.victim = ordinal
        self.at_ms = at_ms
        self.host: Host | None = None
        self.committed: bool | None = None

    def bind(self, host: Host) -> None:
        self.host = host

    def at_instant(self, now_ms: float) -> bool:
        if self.committed is None and now_ms >= self.at_ms:
            assert self.host is not None
            self.committed = self.host.cancel(self.victim)
        return False


def queued_cancel() -> dict[str, Any]:
    """One worker behind a KV router whose queue holds every request while any prefill is
    booked (threshold 0): r0 runs its 10 ms prefill, r1 and r2 wait in the queue; r1 is
    canceled at 1 ms (when r3 arrives and queues too). Returns each record's status, end and
    routing decisions."""
    doc = native(rank(), router="kv_router", router_config={"queue_threshold": 0.0})
    reqs = [request(i, 0.0 if i < 3 else 1.0, 8, 3, [10 * i + 1, 10 * i + 2]) for i in range(4)]
    workload = CancelingWorkload(reqs, ordinal=1, at_ms=1.0)
    result = Simulation(read_engine_spec(doc), workload).run()
    return {"committed": workload.committed,
            "terminals": [ordinal for ordinal, _ in workload.terminals],
            "records": [{"status": r.terminal_status, "end": r.terminal_time_ms,
                         "routed": len(r.routing_history)} for r in result.records]}


# r2 is placed at r0's first token (10 ms), r3 at r2's (22 ms); each pass with a prefill lasts
# 10 + 2 ms, a decode pass 2 ms.
EXPECTED = {"committed": False, "terminals": [0, 2, 3],
            "records": [{"status": "completed", "end": 34.0, "routed": 1},
                        {"status": "canceled", "end": 1.0, "routed": 0},
                        {"status": "completed", "end": 36.0, "routed": 1},
                        {"status": "completed", "end": 38.0, "routed": 1}]}


def test_a_request_canceled_in_the_router_queue_leaves_it() -> None:
    """The canceled request ends at once and is never routed; the queue moves on to r2, r3."""
    assert queued_cancel() == EXPECTED


def test_the_cancel_works_without_asserts() -> None:
    """Under `python -O` (asserts stripped) the canceled request leaves the queue too."""
    done = subprocess.run([sys.executable, "-O", __file__], capture_output=True, text=True,
                          check=True, timeout=120, cwd=Path(__file__).parent)
    assert json.loads(done.stdout) == EXPECTED


if __name__ == "__main__":
    print(json.dumps(queued_cancel()))
