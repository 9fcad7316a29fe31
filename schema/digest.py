"""SHA-256 without OpenSSL's start-up where the input is small.

Importing hashlib loads OpenSSL (about 3 ms of CPU at each start, issue 29), more than hashing a
megabyte costs with CPython's own implementation, which hashlib itself falls back to without
OpenSSL (random.py takes sha512 the same way). OpenSSL's is about five times faster per byte,
so inputs beyond SMALL bytes still get it. Both compute SHA-256: the same digests.
"""

from __future__ import annotations

import importlib
from typing import Protocol, cast

SMALL = 1 << 20


class Hash(Protocol):
    def update(self, data: bytes, /) -> None: ...
    def hexdigest(self) -> str: ...


def sha256(size: int = 0) -> Hash:
    """A new sha256 hash object for an input of about `size` bytes (hashlib's interface)."""
    if size <= SMALL:
        for name in ("_sha256", "_sha2"):  # CPython 3.11; 3.12 and later
            try:
                return cast(Hash, importlib.import_module(name).sha256())
            except (ImportError, AttributeError):
                continue
    import hashlib

    return hashlib.sha256()
