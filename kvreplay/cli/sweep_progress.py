"""Progress over a sweep's points on stderr: one rewritten line on a terminal, a plain line
every few seconds otherwise (logs, CI)."""

from __future__ import annotations

import sys
import time

from kvreplay.sweep.run import Progress

_TTY_EVERY_S = 0.2
_PLAIN_EVERY_S = 10.0


def _seconds(value: float) -> str:
    if value < 60:
        return f"{value:.0f} s"
    minutes, seconds = divmod(int(value), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"


def line(p: Progress) -> str:
    eta = p.eta_s()
    failed = f", {p.failed} failed" if p.failed else ""
    return (f"sweep: {p.done}/{p.total} points run{failed}, {_seconds(p.elapsed_s)} elapsed"
            + (f", ETA {_seconds(eta)}" if eta is not None else ""))


class SweepProgress:
    """Called with each `Progress`; prints at most every so often."""

    def __init__(self, enabled: bool, tty: bool) -> None:
        self.enabled = enabled
        self.tty = tty
        self.every = _TTY_EVERY_S if tty else _PLAIN_EVERY_S
        self.last = time.perf_counter()
        self.shown = False

    def __call__(self, p: Progress) -> None:
        now = time.perf_counter()
        if not self.enabled or (now - self.last < self.every and p.done < p.total):
            return
        if p.done >= p.total and not self.tty:
            return  # the closing summary says it
        self.last = now
        self.shown = True
        try:
            if self.tty:
                sys.stderr.write(f"\r\033[K{line(p)}")
            else:
                sys.stderr.write(line(p) + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            self.enabled = False

    def close(self) -> None:
        if self.enabled and self.tty and self.shown:
            self.shown = False
            try:
                sys.stderr.write("\r\033[K")
                sys.stderr.flush()
            except (OSError, ValueError):
                pass
