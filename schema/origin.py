"""Where Spec fields came from: what places a finding about a Spec field in the user's source.

A Spec path names a field of the normalized model, e.g. ("roles", "prefill", "host_offload",
"scope") or ("traffic", "load_type"). Each entry point (YAML config, native JSON, Python engine
args) supplies an Origin that turns such a path into a path of its own document and a span in
it; the rules read only this protocol (the compiler's kvreplay.compiler.origin.SourceOrigin is
the one implementation).
"""

from __future__ import annotations

from typing import Protocol

from kvreplay.schema.diagnostics import Span

SpecPath = tuple[str, ...]
DocumentPath = tuple[str | int, ...]  # keys and list indexes in the entry point's own document


class Origin(Protocol):
    def to_source(self, spec_path: SpecPath, /) -> DocumentPath:
        """The path in the entry point's document that the Spec field comes from."""
        ...

    def span(self, spec_path: SpecPath, /) -> Span:
        """Where that path sits in the source (a span without position when there is none)."""
        ...
