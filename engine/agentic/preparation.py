"""Warmup preparation: primers and warmup requests per lane, and the barrier (engine.md section 6).

Per lane, in lane order: a one-token primer for each live conversation that has history (the
full original input of its latest historical request, in conversation order), then ten
one-token warmups cycling the primers (or the earliest retained request when there are none).
A lane's requests run one after another, each ready at its predecessor's causal terminal.
The barrier opens when every issued preparation request is quiescent, every lane has issued
everything, and the engine is drained (G2 stores included); the first failed preparation
request aborts the run instead. Preparation uuids are 2**127 + k.
"""

from __future__ import annotations

from typing import Any

from kvreplay.engine.agentic.snapshot import Instance, SnapshotContext

SCHEMA = "aisimulate.agentic.phases.v1"
WARMUPS_PER_LANE = 10
UUID_BASE = 1 << 127
BARRIER = "all_preparation_succeeded_and_server_quiescent"


class PrepRequest:
    __slots__ = ("admit_ms", "dispatched_ms", "expected", "identity", "index", "input_length",
                 "lane", "output_tokens", "phase", "quiescent_ms", "reused", "source",
                 "status", "terminal_ms")

    def __init__(self, index: int, lane: int, phase: str, source: int, identity: dict[str, str],
                 input_length: int, expected: int) -> None:
        self.index = index
        self.lane = lane
        self.phase = phase
        self.source = source
        self.identity = identity
        self.input_length = input_length
        self.expected = expected
        self.dispatched_ms: float | None = None
        self.status: str | None = None
        self.terminal_ms: float | None = None
        self.quiescent_ms: float | None = None
        self.admit_ms: float | None = None
        self.reused: int | None = None
        self.output_tokens = 0

    @property
    def ordinal(self) -> int:
        """The record ordinal (uuid - 1)."""
        return UUID_BASE + self.index - 1


class _Lane:
    __slots__ = ("instance", "next", "ready_at", "requests", "running")

    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        self.requests: list[PrepRequest] = []
        self.next = 0
        self.running: PrepRequest | None = None
        self.ready_at = 0.0


class Preparation:
    """The preparation phase of a warm run; `transition` is None, "profile" or "aborted"."""

    def __init__(self, ctx: SnapshotContext, instances: list[Instance],
                 engine_block_size: int) -> None:
        self.ctx = ctx
        self.lanes: list[_Lane] = []
        self.requests: list[PrepRequest] = []
        self.failure: PrepRequest | None = None
        self.failure_reason: str | None = None
        self.transition: str | None = None
        self.finished_ms: float | None = None
        nodes = ctx.graph.nodes
        bs = max(engine_block_size, 1)
        for inst in instances:
            lane = _Lane(inst)
            primers = list(inst.primers)
            if primers:
                sources = primers
            else:
                retained = [r for r in inst.requests if not r.historical]
                first = min(retained, key=lambda r: r.recorded_start_ms)  # first of equal starts
                sources = [first.source]
            plan = primers + [sources[k % len(sources)] for k in range(WARMUPS_PER_LANE)]
            for k, source in enumerate(plan):
                phase = "primer" if k < len(primers) else "warmup"
                identity = dict(ctx.identity(inst, source))
                identity["request_id"] = f"{inst.play_id}:{phase}:{k}"
                n = nodes[source].input_length
                req = PrepRequest(len(self.requests), inst.lane, phase, source, identity, n,
                                  n // bs * bs)
                self.requests.append(req)
                lane.requests.append(req)
            self.lanes.append(lane)

    # -- dispatch ------------------------------------------------------------------------------

    def next_ready_ms(self) -> float | None:
        if self.failure is not None or self.transition is not None:
            return None
        times = [lane.ready_at for lane in self.lanes
                 if lane.running is None and lane.next < len(lane.requests)]
        return min(times) if times else None

    def pop_ready(self, now: float) -> list[tuple[PrepRequest, Instance, float]]:
        """(request, its lane's instance, scheduled time) for each lane ready at `now`."""
        if self.failure is not None or self.transition is not None:
            return []
        out = []
        for lane in self.lanes:
            if lane.running is not None or lane.next >= len(lane.requests) or lane.ready_at > now:
                continue
            req = lane.requests[lane.next]
            lane.next += 1
            lane.running = req
            req.dispatched_ms = now
            out.append((req, lane.instance, lane.ready_at))
        return out

    # -- feedback ------------------------------------------------------------------------------

    def on_terminal(self, req: PrepRequest, now: float, status: str, output_tokens: int) -> None:
        req.status = status
        req.terminal_ms = now
        req.output_tokens = min(output_tokens, 1) if status == "completed" else output_tokens
        if self.failure is None:
            if status != "completed":
                self.failure = req
                self.failure_reason = f"preparation request ended with {status.capitalize()}"
            elif output_tokens != 1:
                self.failure = req
                self.failure_reason = ("preparation request completed without exactly one "
                                       "output token")
        lane = self.lanes[req.lane]  # lanes are built in lane order
        lane.running = None
        lane.ready_at = now

    def on_quiescent(self, req: PrepRequest, now: float) -> None:
        req.quiescent_ms = now

    def ready_transition(self) -> str | None:
        """"profile" or "aborted" once the client side allows it (the engine must be drained)."""
        if self.transition is not None:
            return None
        if any(r.dispatched_ms is not None and r.quiescent_ms is None for r in self.requests):
            return None
        if self.failure is not None:
            return "aborted"
        if all(lane.next == len(lane.requests) for lane in self.lanes):
            return "profile"
        return None

    def finish(self, transition: str, now: float) -> None:
        self.transition = transition
        self.finished_ms = now

    # -- report --------------------------------------------------------------------------------

    def phase(self) -> str:
        if self.transition is not None:
            return self.transition
        if any(r.phase == "primer" and r.status is None for r in self.requests):
            return "primer"
        return "warmup"

    def evidence(self, uuid_for: Any) -> dict[str, Any]:
        """The `agentic_phases` report object (the reference's fields and order)."""
        lanes = []
        for lane in self.lanes:
            reqs = lane.requests
            done = [r for r in reqs if r.status == "completed" and r.output_tokens == 1]
            lanes.append({
                "lane_id": lane.instance.lane, "play_id": lane.instance.play_id,
                "primers_expected": sum(1 for r in reqs if r.phase == "primer"),
                "primers_completed": sum(1 for r in done if r.phase == "primer"),
                "warmup_expected": WARMUPS_PER_LANE,
                "warmup_completed": sum(1 for r in done if r.phase == "warmup"),
                "requests_quiescent": sum(1 for r in reqs if r.quiescent_ms is not None)})
        nodes = self.ctx.graph.nodes
        requests = [{
            "uuid": uuid_for(r.ordinal), "phase": r.phase, "lane_id": r.lane,
            "source_request_id": nodes[r.source].request_id, "identity": r.identity,
            "input_length": r.input_length, "max_output_tokens": 1,
            "expected_full_block_tokens": r.expected, "dispatched_at_ms": r.dispatched_ms,
            "terminal_status": r.status, "causal_terminal_at_ms": r.terminal_ms,
            "quiescent_at_ms": r.quiescent_ms, "first_admit_ms": r.admit_ms,
            "first_admission_reused_input_tokens": r.reused,
            "observed_output_tokens": r.output_tokens} for r in self.requests]
        return {
            "schema": SCHEMA, "phase": self.phase(), "barrier_condition": BARRIER,
            "profile_start_ms": self.finished_ms if self.transition == "profile" else None,
            "finished_at_ms": self.finished_ms,
            "failure_request_id": None if self.failure is None else uuid_for(self.failure.ordinal),
            "failure_reason": self.failure_reason, "lanes": lanes, "requests": requests}
