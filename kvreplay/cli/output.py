"""Writing results: outputs that replace only what they should, and a stdout that reports a
full disk instead of failing at exit (a reader that went away is not an error).

Where an output path leads is decided before the command does any work (docs/cli.md):
- `-`, `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`: that descriptor, written in place;
- a device, a FIFO or a socket: opened and written in place, never replaced;
- a regular file, or a symlink to one (followed): a temp file beside the target, renamed over it
  by `commit()` with the target's mode (and owner, when allowed); a new file follows the umask;
- a directory, or any input of the command (same path once resolved, or same device and inode):
  refused with an `OutputError`.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import sys
from collections.abc import Sequence
from types import TracebackType
from typing import IO

from kvreplay.cli import signals

_DESCRIPTORS = {"-": 1, "/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
_FD_PATH = re.compile(r"/(?:dev/fd|proc/self/fd)/(\d+)")

# Temp files not yet renamed into place or removed: main() removes them whatever stopped it.
_PENDING: set[str] = set()


class OutputError(Exception):
    """An output that cannot or must not be written: the command stops with exit 2."""


def same_file(a: str, b: str) -> bool:
    """One file under two names: equal once symlinks are resolved, or one device and inode
    (hard links)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        first, second = os.stat(a), os.stat(b)
    except (OSError, ValueError):
        return False
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


def _descriptor(path: str) -> int | None:
    match = _FD_PATH.fullmatch(path)
    return int(match.group(1)) if match else _DESCRIPTORS.get(path)


class Output:
    """One output of a command. Construct it (refusals) and enter it (the temp file: an
    unwritable folder fails here) before the work, write, then `commit()`; leaving the `with`
    block uncommitted keeps the previous file as it was."""

    def __init__(self, path: str, inputs: Sequence[tuple[str, str]] = ()) -> None:
        self.path = path
        self.fd = _descriptor(path)
        self.real = path  # what is replaced: the symlink's target
        self.existing: os.stat_result | None = None
        self.replace = False
        self.tmp: str | None = None
        self.fh: IO[str] | None = None
        self.done = False
        if self.fd is None:
            self._resolve()
            self.refuse(inputs)

    def _resolve(self) -> None:
        try:
            found = os.stat(self.path)
        except FileNotFoundError:  # a new file (or a dangling symlink's target)
            self.real, self.replace = os.path.realpath(self.path), True
            return
        except OSError as exc:
            raise self._error(exc) from None
        if stat.S_ISDIR(found.st_mode):
            raise OutputError(f"cannot write {self.path}: it is a directory")
        if stat.S_ISREG(found.st_mode):
            self.real, self.replace, self.existing = os.path.realpath(self.path), True, found

    def refuse(self, inputs: Sequence[tuple[str, str]]) -> None:
        """OutputError if a file this output replaces is one of `inputs` ((role, path) pairs)."""
        if not self.replace:  # a device or a descriptor is written in place, never replaced
            return
        for role, given in inputs:
            if same_file(self.real, given):
                raise OutputError(f"refusing to write {self.path}: it is {role} {given}")

    def __enter__(self) -> Output:
        if self.replace:
            folder = os.path.dirname(self.real)
            with signals.deferred():  # the temp file is registered as soon as it exists
                try:
                    fd, self.tmp = _create(folder)
                except OSError as exc:
                    if not os.path.exists(self.real):
                        raise self._error(exc) from None
                    # The file exists but its folder takes no new file (a /proc entry): say so.
                    raise OutputError(
                        f"cannot write {self.path}: no new file can be created in {folder} "
                        f"for the atomic replacement ({exc.strerror or exc})") from None
                _PENDING.add(self.tmp)
                self.fh = os.fdopen(fd, "w", encoding="utf-8", newline="\n")
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if not self.done:
            self.abort()

    def write(self, text: str) -> None:
        if self.fd == 1:
            write_stdout(text)
            return
        try:
            self._file().write(text)
        except OSError as exc:
            raise self._error(exc) from None

    def write_bytes(self, data: bytes) -> None:
        """Text already encoded in UTF-8, written as it is (stdout takes it as text)."""
        if self.fd == 1:
            self.write(data.decode("utf-8"))
            return
        try:
            self.binary().write(data)
        except OSError as exc:
            raise self._error(exc) from None

    def binary(self) -> IO[bytes]:
        """The byte stream under the text file (for binary formats), text written so far
        flushed first."""
        if self.fd == 1:
            write_stdout("")
            return sys.stdout.buffer
        fh = self._file()
        fh.flush()
        return fh.buffer  # type: ignore[attr-defined, no-any-return]

    def _file(self) -> IO[str]:
        """The open file; a device, FIFO or descriptor is opened at the first write (a FIFO
        without a reader blocks only then, after the work)."""
        if self.fh is None:
            if self.replace:
                raise RuntimeError("an Output that replaces a file is written inside `with`")
            fd = os.dup(self.fd) if self.fd is not None else os.open(self.path, os.O_WRONLY)
            self.fh = os.fdopen(fd, "w", encoding="utf-8", newline="\n")
        return self.fh

    def commit(self) -> None:
        """Publish what was written: rename the temp file over the target, or flush in place."""
        try:
            if self.fd == 1:
                write_stdout("")
            elif self.tmp is None:
                self._file().close()
            else:
                fh = self._file()
                fh.flush()
                os.fsync(fh.fileno())
                _keep_mode(fh.fileno(), self.existing)
                fh.close()
                os.replace(self.tmp, self.real)
                _PENDING.discard(self.tmp)
        except OSError as exc:
            raise self._error(exc) from None
        self.done = True

    def abort(self) -> None:
        """Drop the temp file; the previous file, if any, is left as it was."""
        self.done = True
        with signals.deferred():
            if self.fh is not None:
                with contextlib.suppress(OSError):
                    self.fh.close()
            if self.tmp is not None:
                _remove(self.tmp)

    def _error(self, exc: OSError) -> OutputError:
        return OutputError(f"cannot write {self.path}: {exc.strerror or exc}")


def _create(folder: str) -> tuple[int, str]:
    """A new, empty, private temp file in `folder` (the mode is set when it is committed)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        path = os.path.join(folder, f".kvreplay-{os.urandom(6).hex()}.tmp")
        try:
            return os.open(path, flags, 0o600), path
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temp file name in {folder}")


def _keep_mode(fd: int, existing: os.stat_result | None) -> None:
    """The replaced file's owner (when allowed) and mode; for a new file, what the umask gives."""
    if existing is None:
        mask = os.umask(0o077)
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)
        return
    with contextlib.suppress(OSError):  # only root may give a file away
        os.fchown(fd, existing.st_uid, existing.st_gid)
    os.fchmod(fd, stat.S_IMODE(existing.st_mode))


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
    _PENDING.discard(path)


def discard_pending() -> None:
    """Remove the temp files of outputs that were never committed (an interrupted command)."""
    with signals.deferred():
        for path in list(_PENDING):
            _remove(path)


def emit(path: str | None, text: str, inputs: Sequence[tuple[str, str]] = ()) -> bool:
    """The command's result to a file (atomically) or stdout; False (reported) if unwritable."""
    try:
        with Output(path or "-", inputs) as out:
            out.write(text)
            out.commit()
    except OutputError as exc:
        write_stderr(f"kvreplay: {exc}\n")
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
