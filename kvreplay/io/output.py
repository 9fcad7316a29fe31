"""Writing results: outputs that replace only what they should, and a stdout that reports a
full disk instead of failing at exit (a reader that went away is not an error).

Where an output path leads is decided before the command does any work (docs/cli.md):
- `-`, `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`: that descriptor, written in place;
- a device, a FIFO or a socket: opened and written in place, never replaced;
- a regular file, or a symlink to one (followed): a temp file beside the target, renamed over it
  by `commit()` with the target's mode (and owner, when allowed); a new file follows the umask;
- a directory, any input of the command (same path once resolved, or same device and inode), a
  path inside a folder the command reads, or, given `within`, a path that resolves outside that
  folder: refused with an `OutputError`.

The outputs of one command are published together by `commit_all`: every temp file is written
and flushed before the first rename, and a rename that fails puts the earlier ones back. Temp
files are `.kvreplay-<hex>.tmp`, locked (flock) while their writer lives; the first write into a
folder removes the ones no live process holds (left by a SIGKILL).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import io
import os
import re
import stat
import sys
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import IO, BinaryIO

import attrs

from kvreplay.io import signals
from kvreplay.io.display import escape_inline

_DESCRIPTORS = {"-": 1, "/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
_FD_PATH = re.compile(r"/(?:dev/fd|proc/self/fd)/(\d+)")
# kvreplay's temp files: `_create`'s names, and tempfile.mkstemp's that earlier versions made.
_TEMP_NAME = re.compile(r"\.kvreplay-[0-9a-z_]{8,12}\.tmp")
_NO_SPACE = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded"}

# Temp files not yet renamed into place or removed: main() removes them whatever stopped it.
_PENDING: set[str] = set()
# Folders (device, inode) already rid of stale temp files by this process.
_CLEANED: set[tuple[int, int]] = set()


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


def inside(path: str, folder: str) -> bool:
    """`path` is `folder` or below it (both resolved already)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


@attrs.frozen
class _Input:
    """An input of the command, resolved once: what an output must not be (or be inside)."""

    role: str
    given: str
    real: str
    ident: tuple[int, int] | None
    folder: bool


class Inputs:
    """The (role, path) inputs of a command, resolved once for checking many outputs."""

    def __init__(self, inputs: Iterable[tuple[str, str]] = ()) -> None:
        self.items: list[_Input] = []
        for role, given in inputs:
            self.add(role, given)

    def add(self, role: str, given: str) -> None:
        try:
            info: os.stat_result | None = os.stat(given)
        except (OSError, ValueError):
            info = None
        self.items.append(_Input(role, given, os.path.realpath(given),
                                 None if info is None else (info.st_dev, info.st_ino),
                                 info is not None and stat.S_ISDIR(info.st_mode)))

    def refusal(self, shown: str, real: str, existing: os.stat_result | None) -> str | None:
        """Why the output `shown` (resolved to `real`) must not be written, or None."""
        ident = None if existing is None else (existing.st_dev, existing.st_ino)
        for item in self.items:
            if item.real == real or (ident is not None and item.ident == ident):
                return f"refusing to write {shown}: it is {item.role} {item.given}"
            if item.folder and inside(real, item.real):
                return (f"refusing to write {shown}: it is inside {item.role} {item.given}, "
                        "a folder the command reads")
        return None


def _descriptor(path: str) -> int | None:
    match = _FD_PATH.fullmatch(path)
    return int(match.group(1)) if match else _DESCRIPTORS.get(path)


class Output:
    """One output of a command. Construct it (refusals) and enter it (the temp file: an
    unwritable folder fails here) before the work, write, then `commit()` (or `commit_all`
    with the command's other outputs); leaving the `with` block uncommitted keeps the previous
    file as it was. `within`: a folder the output must resolve inside (a project root)."""

    def __init__(self, path: str, inputs: Sequence[tuple[str, str]] | Inputs = (), *,
                 within: str | None = None, follow_symlinks: bool = True) -> None:
        self.path = path
        self.follow_symlinks = follow_symlinks
        self.fd = _descriptor(path)
        self.real = path  # what is replaced: the symlink's target
        self.within = within
        self.existing: os.stat_result | None = None
        self.replace = False
        self.dir_fd: int | None = None  # the folder of a replaced file, held from __enter__
        self.tmp: str | None = None  # the temp file's path until it is renamed or removed
        self.backup: str | None = None  # a hard link to the replaced file during commit_all
        self.fh: IO[str] | None = None
        self.done = False
        if self.fd is None:
            self._resolve()
            self.refuse(inputs)

    def _resolve(self) -> None:
        if self.within is not None:
            self._stay_within(self.within)
        if not self.follow_symlinks and os.path.islink(self.path):
            # The link itself is replaced by a new file; its target is never written.
            self.real, self.replace = os.path.join(
                os.path.realpath(os.path.dirname(self.path) or "."),
                os.path.basename(self.path)), True
            return
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

    def _stay_within(self, folder: str) -> None:
        real, root = os.path.realpath(self.path), os.path.realpath(folder)
        if not inside(real, root):
            raise OutputError(f"refusing to write {self.path}: it leads to {real}, outside "
                              f"{folder} (through a symlink)")

    def _held_within(self, folder: str) -> None:
        """The folder just opened is the output's folder inside `folder`, as checked when the
        output was made (not one that a symlink swapped in since)."""
        assert self.dir_fd is not None
        self._stay_within(folder)
        held = os.fstat(self.dir_fd)
        there = os.stat(os.path.dirname(os.path.realpath(self.path)))
        if (held.st_dev, held.st_ino) != (there.st_dev, there.st_ino):
            raise OutputError(f"cannot write {self.path}: its folder changed while it was "
                              "opened")

    def refuse(self, inputs: Sequence[tuple[str, str]] | Inputs) -> None:
        """OutputError if a file this output replaces is one of `inputs` ((role, path) pairs),
        or lies inside one that is a folder."""
        if not self.replace:  # a device or a descriptor is written in place, never replaced
            return
        checked = inputs if isinstance(inputs, Inputs) else Inputs(inputs)
        problem = checked.refusal(self.path, self.real, self.existing)
        if problem is not None:
            raise OutputError(problem)

    def __enter__(self) -> Output:
        if self.replace:
            folder = os.path.dirname(self.real)
            with signals.deferred():  # the temp file is registered as soon as it exists
                try:
                    # The temp file is made, and renamed, in this folder, whatever happens
                    # to the path later.
                    self.dir_fd = _open_folder(folder)
                    if self.within is not None:
                        self._held_within(self.within)
                    _clean_stale(self.dir_fd, folder)
                    fd, name = _create(self.dir_fd, folder)
                except OSError as exc:
                    self._close_folder()
                    if exc.errno in _NO_SPACE or not os.path.exists(self.real):
                        raise self._error(exc) from None
                    # The file exists but its folder takes no new file (a /proc entry): say so.
                    raise OutputError(
                        f"cannot write {self.path}: no new file can be created in {folder} "
                        f"for the atomic replacement ({exc.strerror or exc})") from None
                except BaseException:
                    self._close_folder()
                    raise
                self.tmp = os.path.join(folder, name)
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
        self.binary().write(data)

    def binary(self) -> BinaryIO:
        """The byte stream under the text file (for binary formats), text written so far
        flushed first; a write that fails raises this output's OutputError."""
        if self.fd == 1:
            write_stdout("")
            return _Bytes(self, sys.stdout.buffer)
        fh = self._file()
        try:
            fh.flush()
        except OSError as exc:
            raise self._error(exc) from None
        return _Bytes(self, fh.buffer)  # type: ignore[attr-defined]

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
        commit_all([self])

    def _prepare(self) -> None:
        """Everything before the rename: the bytes on disk (flushed, for a device or stdout:
        a write error shows now, before any output is renamed), the target's mode. The temp
        file stays open (and locked) until it is renamed."""
        if self.replace and self.tmp is None:
            raise RuntimeError("an Output that replaces a file is written inside `with`")
        try:
            if self.fd == 1:
                write_stdout("")
                return
            fh = self._file()
            fh.flush()
            if self.tmp is not None:
                os.fsync(fh.fileno())
                _keep_mode(fh.fileno(), self.existing)
        except OSError as exc:
            raise self._error(exc) from None

    def _publish(self, keep_backup: bool) -> None:
        """Rename the temp file over the target (keeping a hard link to the replaced file when
        `keep_backup`, for `_restore`)."""
        assert self.tmp is not None and self.dir_fd is not None
        name = os.path.basename(self.real)
        try:
            if keep_backup and self.existing is not None:
                self._link_backup(name)
            os.replace(os.path.basename(self.tmp), name, src_dir_fd=self.dir_fd,
                       dst_dir_fd=self.dir_fd)
        except OSError as exc:
            raise self._error(exc) from None
        _PENDING.discard(self.tmp)
        self.tmp = None

    def _link_backup(self, name: str) -> None:
        """A second name for the file about to be replaced (none where the folder or the file
        takes no hard link: that output cannot be put back)."""
        assert self.dir_fd is not None
        for _ in range(100):
            backup = _temp_name()
            try:
                os.link(name, backup, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd,
                        follow_symlinks=False)
            except FileExistsError:
                continue
            except OSError:
                return
            self.backup = os.path.join(os.path.dirname(self.real), backup)
            _PENDING.add(self.backup)
            return

    def _restore(self) -> None:
        """Undo `_publish`: the replaced file back under its name (a new one removed)."""
        assert self.dir_fd is not None
        name = os.path.basename(self.real)
        if self.backup is not None:
            # Kept whatever happens: if it cannot be put back, it is the only copy left.
            _PENDING.discard(self.backup)
            backup, self.backup = self.backup, None
            with contextlib.suppress(OSError):
                os.replace(os.path.basename(backup), name, src_dir_fd=self.dir_fd,
                           dst_dir_fd=self.dir_fd)
        elif self.existing is None:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=self.dir_fd)

    def _finish(self) -> None:
        """After a commit: the file closed (a device's last error still counts)."""
        try:
            if self.fd == 1:
                write_stdout("")
            elif self.fh is not None:
                self.fh.close()
        except OSError as exc:
            raise self._error(exc) from None
        finally:
            self.done = True
            self._drop_backup()
            self._close_folder()

    def abort(self) -> None:
        """Drop the temp file; the previous file, if any, is left as it was."""
        self.done = True
        with signals.deferred():
            if self.fh is not None:
                with contextlib.suppress(OSError):
                    self.fh.close()
            if self.tmp is not None:
                _remove(self.tmp)
                self.tmp = None
            self._drop_backup()
            self._close_folder()

    def _drop_backup(self) -> None:
        if self.backup is not None:
            _remove(self.backup)
            self.backup = None

    def _close_folder(self) -> None:
        if self.dir_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.dir_fd)
            self.dir_fd = None

    def _error(self, exc: OSError) -> OutputError:
        if self.fd == 1:
            return stdout_error(exc)
        reason = _NO_SPACE.get(exc.errno or 0)
        if reason is not None:
            return OutputError(f"{reason} writing {self.path}")
        return OutputError(f"cannot write {self.path}: {exc.strerror or exc}")


class _Bytes(io.BufferedIOBase, BinaryIO):
    """An output's byte stream for binary writers (pyarrow): its failures (a full disk) are
    the output's OutputError, not a bare OSError."""

    def __init__(self, out: Output, raw: IO[bytes]) -> None:
        super().__init__()
        self._out = out
        self._raw = raw

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        try:
            return self._raw.write(data)
        except OSError as exc:
            raise self._out._error(exc) from None

    def flush(self) -> None:
        if self._raw.closed:  # the Output closed it (this stream only marks itself closed)
            return
        try:
            self._raw.flush()
        except OSError as exc:
            raise self._out._error(exc) from None


def commit_all(outputs: Sequence[Output]) -> None:
    """Publish several outputs of one command together: all written and flushed before the
    first rename, and a failed rename puts the earlier ones back; OutputError if one fails
    (then none is published and every temp file is removed)."""
    pending = [out for out in outputs if not out.done]
    try:
        for out in pending:
            out._prepare()
    except OutputError:
        for out in pending:
            out.abort()
        raise
    renamed = [out for out in pending if out.tmp is not None]
    with signals.deferred():  # a signal now would leave some renamed and some not
        published: list[Output] = []
        try:
            for out in renamed:
                out._publish(keep_backup=len(renamed) > 1)
                published.append(out)
        except OutputError:
            for out in reversed(published):
                out._restore()
            for out in pending:
                out.abort()
            raise
        failures: list[OutputError] = []
        for out in pending:
            try:
                out._finish()
            except OutputError as exc:
                failures.append(exc)
        if failures:
            raise failures[0]


def write_files(items: Sequence[tuple[str, str | bytes]], *,
                follow_symlinks: bool = True) -> None:
    """Replace each path with its text (or bytes), all published together (`commit_all`);
    `follow_symlinks=False` replaces a symlink at a path instead of writing its target."""
    with contextlib.ExitStack() as stack:
        outputs = [stack.enter_context(Output(path, follow_symlinks=follow_symlinks))
                   for path, _ in items]
        for out, (_, data) in zip(outputs, items, strict=True):
            if isinstance(data, bytes):
                out.write_bytes(data)
            else:
                out.write(data)
        commit_all(outputs)


def _open_folder(folder: str) -> int:
    return os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
                   | getattr(os, "O_CLOEXEC", 0))


def _temp_name() -> str:
    return f".kvreplay-{os.urandom(6).hex()}.tmp"


def _create(dir_fd: int, folder: str) -> tuple[int, str]:
    """A new, empty, private temp file in the folder, locked for as long as it is open (the
    mode is set when it is committed)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        name = _temp_name()
        try:
            fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
        except FileExistsError:
            continue
        if _lock(fd) and _named(dir_fd, name, fd):
            return fd, name
        # Another process's cleaner took it in the instant before the lock: it removes it.
        os.close(fd)
    raise FileExistsError(f"no free temp file name in {folder}")


def _lock(fd: int) -> bool:
    """Lock a new temp file (False: someone else holds it); where files take no lock, it
    stays unlocked, and no cleaner can lock it either."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:
        pass
    return True


def _named(dir_fd: int, name: str, fd: int) -> bool:
    """The open file is still the one called `name` in the folder."""
    try:
        now, held = os.stat(name, dir_fd=dir_fd, follow_symlinks=False), os.fstat(fd)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)


def _clean_stale(dir_fd: int, folder: str) -> None:
    """Once per folder and process: remove the temp files of kvreplay's naming that no live
    process holds (a writer killed with SIGKILL leaves its temp file, and its lock goes)."""
    info = os.fstat(dir_fd)
    if (info.st_dev, info.st_ino) in _CLEANED:
        return
    _CLEANED.add((info.st_dev, info.st_ino))
    try:
        with os.scandir(dir_fd) as entries:
            names = [e.name for e in entries if _TEMP_NAME.fullmatch(e.name)]
    except OSError:
        return
    for name in names:
        if os.path.join(folder, name) not in _PENDING:  # this process's own, live
            _remove_if_stale(dir_fd, name)


def _remove_if_stale(dir_fd: int, name: str) -> None:
    """Remove one temp file if it is a regular file of one link that nobody holds locked; a
    file that cannot be opened or locked (another user's, a live writer's) is left alone."""
    flags = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
             | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            return
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError:
        return
    try:
        held = os.fstat(fd)
        if not stat.S_ISREG(held.st_mode) or held.st_nlink != 1:
            return
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if _named(dir_fd, name, fd):
            os.unlink(name, dir_fd=dir_fd)
    except OSError:
        return
    finally:
        os.close(fd)


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
        say(str(exc))
        return False
    return True


def emit_all(items: Sequence[tuple[str | None, str, str]],
             inputs: Sequence[tuple[str, str]] = ()) -> bool:
    """Several results of one command, each (path or None for stdout, text, role), published
    together (`commit_all`); an output that is an input or an earlier output is refused
    before anything is written. False (reported) if one cannot be written."""
    try:
        with contextlib.ExitStack() as stack:
            checked = Inputs(inputs)
            outputs: list[Output] = []
            for path, _, role in items:
                out = stack.enter_context(Output(path or "-", checked))
                if out.replace:
                    checked.add(role, out.path)
                outputs.append(out)
            for out, (_, text, _) in zip(outputs, items, strict=True):
                out.write(text)
            commit_all(outputs)
    except OutputError as exc:
        say(str(exc))
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
        say(str(exc))
        return False
    return True


def say(message: str) -> None:
    """`kvreplay: MESSAGE` on stderr, one line, with the input text it quotes (paths, values,
    an exception's words) shown terminal-safe: every non-printable character as its escape."""
    write_stderr(f"kvreplay: {escape_inline(message)}\n")


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
