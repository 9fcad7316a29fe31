"""What the engine raises: one base class, so the CLI can map every engine failure to exit 1."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvreplay.engine.result import RunResult


class EngineError(Exception):
    """Any failure of a replay run."""


class EngineConfigError(EngineError):
    """The native document cannot be read by the engine (shape or value)."""


class Unsupported(EngineError):
    """The document asks for features the bundled engine does not execute; one message each."""

    def __init__(self, refusals: list[str]) -> None:
        self.refusals = list(refusals)
        super().__init__("; ".join(self.refusals))


class ReplayStalled(EngineError):
    """Requests remain that no future event can ever move (e.g. a sequence outgrew its rank)."""


class Interrupted(EngineError):
    """`should_stop` asked the run to stop; `partial` holds the records and facts so far."""

    def __init__(self, partial: RunResult) -> None:
        self.partial = partial
        super().__init__(f"replay interrupted at simulated time {partial.facts.duration_ms} ms")


class ScalingPolicyError(EngineError):
    """A scaling policy failed or answered nonsense (named by its tick and the value); the CLI
    exits 2, as for any bad input."""
