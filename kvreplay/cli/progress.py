"""Progress of `kvreplay run` on stderr, for replays longer than a second.

On a terminal: a bar (rich when installed, else one rewritten line) with an ETA, then the
phases after the replay (building the report, writing each output). Elsewhere (CI logs): plain
lines, one at each further tenth of the replay or after 10 s without one, and one per phase.
"""

from __future__ import annotations

import time
from typing import Any

from kvreplay.io.display import escape_inline

_DELAY_S = 1.0
LINE_EVERY_S = 10.0
LINE_STEP = 0.1


def duration(seconds: float) -> str:
    """`42 s`, `3 min 05 s`, `2 h 07 min`."""
    s = int(seconds + 0.5)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def eta(elapsed_s: float, fraction: float | None) -> str | None:
    """The time left if the rest goes as fast as what is done (None before there is a rate)."""
    if fraction is None or fraction <= 0.0 or fraction >= 1.0:
        return None
    return duration(elapsed_s * (1.0 - fraction) / fraction)


class ProgressDisplay:
    """Callable the engine reports to: `(simulated ms, fraction done or None)`; `phase(label)`
    names what runs after the replay. `mode`: "bar" (a terminal), "lines" (a log), or None."""

    def __init__(self, mode: str | None, *, clock: Any = time.perf_counter) -> None:
        self.mode = mode
        self.clock = clock
        self.counts: dict[str, int] = {}  # set by the engine before each call
        self.started = clock()
        self.bar: Any = None
        self.task: Any = None
        self.plain = False
        self.last_line_s = -LINE_EVERY_S
        self.last_step = 0

    @property
    def enabled(self) -> bool:
        return self.mode is not None

    def _elapsed(self) -> float:
        return float(self.clock() - self.started)

    def __call__(self, sim_ms: float, fraction: float | None) -> None:
        elapsed = self._elapsed()
        if self.mode is None or elapsed < _DELAY_S:
            return
        label = f"simulated {sim_ms / 1000:,.1f} s"
        counts = self.counts
        if "requests" in counts:
            label += f", {counts['requests']:,} requests done"
        if "plays" in counts:
            label += f", {counts['plays']:,} of {counts['plays_started']:,} plays settled"
        left = eta(elapsed, fraction)
        if self.mode == "lines":
            self._line(elapsed, fraction, label, left)
            return
        if left is not None:
            label += f", ETA {left}"
        self._show(f"replaying ({label})", fraction)

    def _line(self, elapsed: float, fraction: float | None, label: str, left: str | None) -> None:
        step = int(fraction / LINE_STEP + 1e-9) if fraction is not None else 0
        if step <= self.last_step and elapsed - self.last_line_s < LINE_EVERY_S:
            return
        self.last_step = max(step, self.last_step)
        self.last_line_s = elapsed
        done = "" if fraction is None else f" {fraction:.0%}"
        tail = f", ETA {left}" if left is not None else ""
        _write(f"kvreplay: replaying{done} ({label}), {duration(elapsed)} elapsed{tail}\n")

    def phase(self, label: str, fraction: float | None = None) -> None:
        """A step after the replay (`building the report`, `writing report.json`); the path
        in it is shown terminal-safe."""
        elapsed = self._elapsed()
        if self.mode is None or elapsed < _DELAY_S:
            return
        label = escape_inline(label)
        if self.mode == "lines":
            if fraction is None:  # one line per phase; its progress stays on the terminal
                _write(f"kvreplay: {label} ({duration(elapsed)} elapsed)\n")
            return
        self._show(label, 1.0 if fraction is None else fraction)

    def _show(self, description: str, fraction: float | None) -> None:
        if self.bar is None and not self.plain:
            self._open()
        if self.plain:
            done = "" if fraction is None else f" {fraction:6.1%}"
            _write(f"\r\033[K{description}{done}")
        else:
            from rich.markup import escape

            self.bar.update(self.task, completed=None if fraction is None else fraction * 100,
                            description=escape(description))  # a path's [...] is not markup

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
            _write("\r\033[K")
            self.plain = False


def _write(text: str) -> None:
    from kvreplay.io.output import write_stderr

    write_stderr(text)


def mode_for(stream: Any, *, quiet: bool, disabled: bool) -> str | None:
    """"bar" on a terminal, "lines" on anything else, None with --quiet or --no-progress."""
    if quiet or disabled or stream is None:
        return None
    try:
        tty = stream.isatty()
    except (OSError, ValueError):
        return None
    return "bar" if tty else "lines"
