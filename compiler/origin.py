"""Where each Spec field came from: maps Spec paths back to spans in the user's source.

Each entry point supplies the function that turns a Spec path (kvreplay.schema.origin) into a
path of its own document: YAML configs `compiler/lower.py`'s yaml_path (the inverse of its
lowering tables), native JSON and Python engine args `compiler/native.py`'s native_path.
"""

from __future__ import annotations

from collections.abc import Callable

from kvreplay.compiler.source import Path, SourceMap, format_path
from kvreplay.schema.diagnostics import Span
from kvreplay.schema.origin import SpecPath


class SourceOrigin:
    """An Origin (kvreplay.schema.origin): Spec paths to spans through an entry point's path
    mapping and source map."""

    def __init__(self, source: SourceMap | None, to_source: Callable[[SpecPath], Path],
                 file: str | None = None) -> None:
        self.source = source
        self.to_source = to_source
        self.file = file if source is None else source.file

    def span(self, spec_path: SpecPath) -> Span:
        path = self.to_source(spec_path)
        if self.source is None:
            return Span(file=self.file, path=format_path(path))
        return self.source.span(path)
