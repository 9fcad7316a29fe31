"""Writing results: atomic files (temp file + rename), and a stdout that reports a full disk
instead of failing at exit (a reader that went away is not an error)."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterable
from typing import IO


class OutputError(Exception):
    """An output that cannot or must not be written: the command stops with exit 2."""


def atomic_write(path: str, text: str) -> None:
    """Write text so that readers see the old file or the whole new one, never a partial one."""
    atomic_write_chunks(path, (text,))


def atomic_write_chunks(path: str, chunks: Iterable[str]) -> None:
    """`atomic_write` of text produced piece by piece (never held whole)."""
    folder = os.path.dirname(os.path.abspath(path)) or "."
    fd, tmp = tempfile.mkstemp(prefix=".kvreplay-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            for chunk in chunks:
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


class AtomicLines:
    """A text file written line by line to a temp file beside it, and renamed into place only
    by `commit()` (an interrupted or failed run leaves the previous file, or none)."""

    def __init__(self, path: str) -> None:
        self.path = path
        folder = os.path.dirname(os.path.abspath(path)) or "."
        fd, self.tmp = tempfile.mkstemp(prefix=".kvreplay-", suffix=".tmp", dir=folder)
        self.fh = os.fdopen(fd, "w", encoding="utf-8", newline="\n")

    def write(self, line: str) -> None:
        self.fh.write(line)

    def commit(self) -> None:
        self.fh.flush()
        os.fsync(self.fh.fileno())
        self.fh.close()
        os.replace(self.tmp, self.path)

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            self.fh.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.tmp)


def emit(path: str | None, text: str) -> bool:
    """The command's result to a file (atomically) or stdout; False (reported) if unwritable."""
    if not path:
        write_stdout(text)
        return True
    try:
        atomic_write(path, text)
    except OSError as exc:
        write_stderr(f"kvreplay: cannot write {path}: {exc.strerror or exc}\n")
        return False
    return True


def write_stdout(text: str) -> None:
    """Print to stdout. A reader that went away (`| head`) is not an error; anything else that
    stops the write (a full disk, a closed stdout) is an OutputError."""
    if sys.stdout is None:
        raise OutputError("cannot write to stdout: it is closed")
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        _silence(sys.stdout)
    except OSError as exc:
        raise stdout_error(exc) from None


def stdout_error(exc: OSError) -> OutputError:
    """The error for a stdout that failed (silenced, so that the flush at exit does not fail
    again)."""
    _silence(sys.stdout)
    return OutputError(f"cannot write to stdout: {exc.strerror or exc}")


def flush_stdout() -> bool:
    """Flush what is left for stdout (argparse writes its help there); False, reported, if it
    cannot be written."""
    if sys.stdout is None:  # closed from the start: already reported if anything was due
        return True
    try:
        write_stdout("")
    except OutputError as exc:
        write_stderr(f"kvreplay: {exc}\n")
        return False
    return True


def write_stderr(text: str) -> None:
    if sys.stderr is None:
        return
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except OSError:  # nowhere left to report it
        _silence(sys.stderr)


def _silence(stream: IO[str]) -> None:
    """Point a failed stream at /dev/null so the interpreter's flush at exit does not fail again
    (what it still buffers is dropped)."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
