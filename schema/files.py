"""Opening input files: regular files only, without ever blocking on a FIFO or a device.

The file is opened non-blocking (a FIFO without a writer would otherwise block the open itself)
and checked with fstat on the open descriptor, so nothing can swap the path between the check
and the read. Sizes are never trusted: a read is capped by the bytes it actually gets.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO

# O_NOCTTY: opening a terminal must not make it ours. O_NONBLOCK stays set on regular files,
# where it changes nothing, except on procfs-like files that would block: those fail instead.
_FLAGS: int = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
               | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
_CHUNK = 1 << 20


class NotRegularFile(OSError):
    """The path is a directory, FIFO, device or socket; `kind` says which (for messages)."""

    def __init__(self, path: str, kind: str) -> None:
        super().__init__(f"is {kind}, not a regular file")
        self.path = path
        self.kind = kind
        self.strerror = str(self)


def kind_of(mode: int) -> str:
    """What a file of this st_mode is, as a noun phrase ("a FIFO (named pipe)")."""
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_fd(path: str) -> int:
    """A read-only descriptor of a regular file; NotRegularFile (or another OSError) otherwise."""
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket (or a device without its driver)
            try:
                mode = os.stat(path).st_mode
            except OSError:
                raise exc from None
            raise NotRegularFile(path, kind_of(mode)) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(path, kind_of(mode))
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(path: str) -> BinaryIO:
    """A regular file opened for binary reading (see open_fd for what is refused)."""
    return os.fdopen(open_fd(path), "rb")


def read_capped(path: str, cap: int) -> bytes:
    """At most cap + 1 bytes of a regular file: more than cap bytes means it is too large."""
    fd = open_fd(path)
    try:
        chunks: list[bytes] = []
        remaining = cap + 1
        while remaining > 0:
            chunk = os.read(fd, min(remaining, _CHUNK))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
