"""Reading a config file as text: every way it can fail becomes one FILE-* diagnostic."""

from __future__ import annotations

from kvreplay.schema.diagnostics import Diagnostic, Span
from kvreplay.schema.files import NotRegularFile, read_capped

# Configs and specs are small; anything bigger is almost certainly the wrong file.
MAX_CONFIG_BYTES = 8 * 1024 * 1024
# A config holds hundreds of values and a 10,000-point sweep file tens of thousands; each value
# read costs about a kilobyte and 15 us, so a flow list that fills MAX_CONFIG_BYTES would take a
# minute and gigabytes. The loaders stop counting at this bound instead.
MAX_CONFIG_VALUES = 200_000

# Rules whose findings mean "input could not be read" (exit code 2, not 1).
IO_RULES = frozenset({"FILE-UNREADABLE", "FILE-TOO-LARGE", "FILE-BINARY", "FILE-ENCODING"})


def _io(rule: str, file: str, message: str, hint: str | None = None, line: int | None = None,
        column: int | None = None) -> Diagnostic:
    return Diagnostic(rule, "error", message, Span(file=file, line=line, column=column), hint=hint)


def read_config_text(path: str, display: str | None = None) -> tuple[str | None, list[Diagnostic]]:
    """Read a config as UTF-8 text, or explain in one diagnostic why it cannot be read.

    Only regular files are read (a FIFO or a device is refused without blocking), and never more
    than MAX_CONFIG_BYTES + 1 bytes, whatever size the file claims.
    """
    name = display or path
    try:
        raw = read_capped(path, MAX_CONFIG_BYTES)
    except NotRegularFile as exc:
        hint = None if exc.kind == "a directory" else \
            "save the text to a file first: FIFOs, devices and <(...) are not read"
        return None, [_io("FILE-UNREADABLE", name, str(exc), hint=hint)]
    except FileNotFoundError:
        return None, [_io("FILE-UNREADABLE", name, "no such file")]
    except PermissionError:
        return None, [_io("FILE-UNREADABLE", name, "permission denied")]
    except OSError as exc:
        return None, [_io("FILE-UNREADABLE", name, f"cannot read: {exc.strerror or exc}")]
    if len(raw) > MAX_CONFIG_BYTES:
        return None, [
            _io(
                "FILE-TOO-LARGE",
                name,
                f"file is larger than {MAX_CONFIG_BYTES:,} bytes, the limit for configs and "
                "specs",
                hint="is this a trace? traces are given under traffic.source.paths",
            )
        ]
    return decode_config_bytes(raw, name)


def too_many_values(file: str | None, line: int, column: int, path: str = "$") -> Diagnostic:
    """The finding of a document holding more than MAX_CONFIG_VALUES values, at the first value
    past the bound."""
    return Diagnostic("FILE-TOO-LARGE", "error",
                      f"the document holds more than {MAX_CONFIG_VALUES:,} values, the limit "
                      "for configs, specs and sweep files",
                      Span(file, path, line, column, line, column + 1),
                      hint="is this a trace or a data file? a bigger sweep is several files")


def decode_config_bytes(raw: bytes, name: str) -> tuple[str | None, list[Diagnostic]]:
    """Decode bytes as UTF-8 (a BOM is allowed), rejecting binary data with its position."""
    nul = raw.find(b"\x00", 0, 8192)
    if nul >= 0:
        line, col = _line_col(raw, nul)
        return None, [
            _io("FILE-BINARY", name, "binary data (NUL byte), not a YAML or JSON text file",
                line=line, column=col)
        ]
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        return raw.decode("utf-8"), []
    except UnicodeDecodeError as exc:
        line, col = _line_col(raw, exc.start)
        return None, [
            _io(
                "FILE-ENCODING",
                name,
                f"not valid UTF-8: byte 0x{raw[exc.start]:02x} at offset {exc.start}",
                hint="save the file as UTF-8",
                line=line,
                column=col,
            )
        ]


def _line_col(raw: bytes, offset: int) -> tuple[int, int]:
    line = raw.count(b"\n", 0, offset) + 1
    start = raw.rfind(b"\n", 0, offset) + 1
    return line, offset - start + 1
