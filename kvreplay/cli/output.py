"""Writing results: atomic files (temp file + rename) and stdout that survives a closed pipe."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterable


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
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): silence the interpreter's own flush at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def write_stderr(text: str) -> None:
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except BrokenPipeError:
        pass
