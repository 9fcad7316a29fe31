"""SIGINT and SIGTERM as exceptions: every phase stops at once, cleanup runs in `finally` blocks,
and the command exits 130 / 143 (kvreplay.cli.exits.stopped) with one line on stderr instead of
a traceback."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterable, Iterator
from types import FrameType
from typing import Any

# SIGHUP (the terminal closed) stops a command like SIGTERM does: no traceback, no temp file.
_HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Terminated(BaseException):
    """SIGTERM arrived. A BaseException, like KeyboardInterrupt, so `except Exception` in the
    middle of a replay cannot swallow it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


STOPS = (KeyboardInterrupt, Terminated)


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signum)


def install() -> None:
    """SIGINT raises KeyboardInterrupt and SIGTERM raises Terminated, wherever the command is.

    A signal the parent ignores (`nohup`, a background job of a script) stays ignored."""
    handlers = (signal.default_int_handler, _terminate, _terminate)
    for signum, handler in zip(_HANDLED, handlers, strict=True):
        _set(signum, handler)


def uninstall() -> None:
    """Default actions again: a signal while the command exits ends it quietly, at once."""
    for signum in _HANDLED:
        _set(signum, signal.SIG_DFL)


def _set(signum: int, handler: Callable[[int, FrameType | None], Any] | signal.Handlers,
         ) -> None:
    with contextlib.suppress(ValueError):  # not the main thread: leave the handlers alone
        if signal.getsignal(signum) != signal.SIG_IGN:
            signal.signal(signum, handler)


@contextlib.contextmanager
def deferred(signums: Iterable[int] = _HANDLED) -> Iterator[None]:
    """Hold SIGINT and SIGTERM (or `signums`) back while a cleanup must finish; they arrive
    right after it. Processes started meanwhile inherit the blocked set."""
    try:
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, signums)
    except (AttributeError, OSError, ValueError):  # no sigmask on this platform
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
