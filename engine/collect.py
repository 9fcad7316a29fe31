"""Cyclic garbage collection while the engine runs: none."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def no_collections() -> Iterator[None]:
    """No cyclic collection inside, the collector's previous state restored afterwards.

    A replay allocates millions of objects that live for a request's stay or to the run's end
    (records, sequences, prompt blocks, block identities, gap runs) and makes no reference cycles
    while it runs (tests/engine/test_engine_fast_forward.py): the collector would only rescan
    live objects (even at 100x the default young threshold, 0.15-0.2 s of the overload bench's
    1.6 s). What a run frees goes by reference counting as before; a run's own object graph,
    cyclic once it ends, is collected after. A bulk load (reading and lowering an agentic corpus)
    uses it too. The collector is process-wide: another thread's cycles wait for the run's end."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            age_survivors()
            gc.enable()


def age_survivors() -> None:
    """Count every object alive now as old: the next young collection would otherwise scan all
    that the run allocated and kept (records, the report's rows) at once. They move to the oldest
    generation without a scan (gc.freeze then gc.unfreeze), so a cycle among them is still
    collected, by the next full collection. Not done when something else froze objects (a
    forking server's gc.freeze): unfreezing would hand its objects back to the collector."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
