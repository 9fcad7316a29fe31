"""A progress bar on stderr for replays longer than a second (rich when installed)."""

from __future__ import annotations

import sys
import time
from typing import Any

_DELAY_S = 1.0


class ProgressDisplay:
    """Callable the engine reports to: `(simulated ms, fraction done or None)`."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.counts: dict[str, int] = {}  # set by the engine before each call
        self.started = time.perf_counter()
        self.bar: Any = None
        self.task: Any = None
        self.plain = False

    def __call__(self, sim_ms: float, fraction: float | None) -> None:
        if not self.enabled or time.perf_counter() - self.started < _DELAY_S:
            return
        if self.bar is None and not self.plain:
            self._open()
        label = f"simulated {sim_ms / 1000:,.1f} s"
        counts = self.counts
        if "requests" in counts:
            label += f", {counts['requests']:,} requests done"
        if "plays" in counts:
            label += f", {counts['plays']:,} of {counts['plays_started']:,} plays settled"
        if self.plain:
            done = "" if fraction is None else f" {fraction:6.1%}"
            sys.stderr.write(f"\rreplaying{done}  {label}   ")
            sys.stderr.flush()
        else:
            self.bar.update(self.task, completed=None if fraction is None else fraction * 100,
                            description=f"replaying ({label})")

    def _open(self) -> None:
        try:
            from rich.progress import BarColumn, Progress, TaskProgressColumn, TimeElapsedColumn
        except ImportError:
            self.plain = True
            return
        self.bar = Progress("{task.description}", BarColumn(), TaskProgressColumn(),
                            TimeElapsedColumn(), transient=True)
        self.bar.start()
        self.task = self.bar.add_task("replaying", total=100)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
        elif self.plain:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            self.plain = False
