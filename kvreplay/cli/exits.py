"""Exit codes (cli.md): the one place that decides them."""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kvreplay.io.signals import Terminated

if TYPE_CHECKING:  # imported before the signal handlers are installed: keep it light
    from kvreplay.schema.diagnostics import Diagnostic

OK = 0
FINDINGS = 1
USAGE = 2
INTERRUPTED = 130  # SIGINT (Ctrl-C)
TERMINATED = 143  # SIGTERM

# Findings that mean "the input could not be read or the command was misused": exit 2. So is
# any error in a trace's content (TRACE-*): the config is fine, the data it points to is not.
IO_RULES = frozenset({"FILE-UNREADABLE", "FILE-TOO-LARGE", "FILE-BINARY", "FILE-ENCODING",
                      "CONFIG-OVERRIDE", "TRACE-PATH", "TRACE-ENCODING",
                      "SETTINGS-INVALID"})


def _unreadable(d: Diagnostic) -> bool:
    return d.rule in IO_RULES or (d.rule.startswith("TRACE-") and d.severity == "error")


def for_diagnostics(diagnostics: Iterable[Diagnostic], *, strict: bool = False) -> int:
    """2 if any input was unreadable (trace content included), else 1 on errors (or warnings
    with --strict), else 0."""
    found = list(diagnostics)
    if any(_unreadable(d) for d in found):
        return USAGE
    if any(d.severity == "error" for d in found):
        return FINDINGS
    if strict and any(d.severity == "warning" for d in found):
        return FINDINGS
    return OK


def for_signal(signum: int) -> int:
    """A command stopped by a signal exits 128 + its number, as a shell reports it."""
    return 128 + signum


def stopped(exc: BaseException) -> int:
    """Say on stderr why the command stops (SIGINT or SIGTERM, as kvreplay.io.signals raises
    them), in one line, and return its exit code."""
    if isinstance(exc, Terminated):
        message, code = f"terminated ({signal.Signals(exc.signum).name})", exc.signum
    else:
        message, code = "interrupted", signal.SIGINT
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"kvreplay: {message}\n")
        sys.stderr.flush()
    return for_signal(code)
