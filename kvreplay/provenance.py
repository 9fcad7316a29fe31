"""Where a report came from (`meta.provenance`): the config and traces by digest, the command
line with secrets redacted. The same invocation on the same files gives the same bytes."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

from kvreplay.schema.digest import sha256

REDACTED = "***"
# Option or key names whose values are secrets (`--api-token X`, `--set auth.password=X`).
_SECRET_NAME = re.compile(r"token|passw|secret|api[-_]?key|auth|credential|cookie|private[-_]?key",
                          re.IGNORECASE)
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")
_CHUNK = 1 << 20


def file_digest(path: str) -> str | None:
    """`sha256:<hex>` of a file's bytes, or None if it cannot be read."""
    try:
        with open(path, "rb") as f:
            digest = sha256(os.fstat(f.fileno()).st_size)
            while chunk := f.read(_CHUNK):
                digest.update(chunk)
    except OSError:
        return None
    return "sha256:" + digest.hexdigest()


def redact(argv: Sequence[str]) -> list[str]:
    """The arguments with secret values replaced: values of options named like secrets
    (`--token X`, `--password=X`), `NAME=VALUE` pairs with such a name (`--set auth.token=X`),
    and the user:password part of URLs."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if arg.startswith("-") and "=" not in arg and _SECRET_NAME.search(arg):
            out.append(arg)
            hide_next = True
            continue
        name, sep, _ = arg.partition("=")
        if sep and _SECRET_NAME.search(name):
            out.append(f"{name}={REDACTED}")
            continue
        out.append(_URL_USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", arg))
    return out


def provenance(config: str, traces: Sequence[tuple[str, str]],
               argv: Sequence[str] | None) -> dict[str, Any]:
    """`meta.provenance` of a run: the config and each trace (`(as written, path to read)`),
    paths as written, digests of the bytes read."""
    return {
        "config": {"path": config, "digest": file_digest(config)},
        "traces": [{"path": shown, "digest": file_digest(real)} for shown, real in traces],
        "command": None if argv is None else ["kvreplay", *redact(argv)],
    }
