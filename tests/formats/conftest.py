"""A representative set of lint results that every format's tests render.

Spans are found in the source text by searching for the offending snippet, as the loaders would
report them (1-based lines and columns, exclusive end column).
"""

from __future__ import annotations

import pytest

from kvreplay.formats import FileResult
from kvreplay.schema.diagnostics import Diagnostic, Related, Span, sort_unique

PD_PATH = "configs/pd shared.yaml"
PD_SOURCE = """\
# P/D with one shared host pool
engine:
  mode: disaggregated
  model: "模型-🚀"   # unicode in a value
  backend: vllm
  workers:
    prefill:
      kv_cache:
        host_offload:
          scope: cluster_shared
          num_host_blocks: 8
\t# a tab before this comment
    decode:
      kv_cache:
        host_offload:
          scope: cluster_shared
          num_host_blocks: 16
router:
  policy: round_robin
  kv_event_lag_ms: 5
"""

SPEC_PATH = "specs/native.json"
SPEC_SOURCE = """\
{
  "engine": {"kv_layout_id": "", "block_size": 4},
  "topology": {"prefill": 1}
}
"""


def span_of(file: str, source: str, snippet: str, *, nth: int = 0, path: str | None = None) -> Span:
    """The span of the `nth` occurrence of `snippet` in `source` (may cover several lines)."""
    offset = -1
    for _ in range(nth + 1):
        offset = source.index(snippet, offset + 1)
    return Span(file, path, *_line_col(source, offset), *_line_col(source, offset + len(snippet)))


def _line_col(source: str, offset: int) -> tuple[int, int]:
    line = source.count("\n", 0, offset) + 1
    column = offset - (source.rfind("\n", 0, offset) + 1) + 1
    return line, column


def _pd_diagnostics() -> list[Diagnostic]:
    def at(snippet: str, path: str, nth: int = 0) -> Span:
        return span_of(PD_PATH, PD_SOURCE, snippet, nth=nth, path=path)

    prefill_blocks = "$.engine.workers.prefill.kv_cache.host_offload.num_host_blocks"
    decode_blocks = "$.engine.workers.decode.kv_cache.host_offload.num_host_blocks"
    model_text = '"模型-🚀"'
    return [
        Diagnostic(
            "SCHEMA-ENUM",
            "warning",
            "model `模型-🚀` is not a known model name",
            at(model_text, "$.engine.model"),
        ),
        Diagnostic(
            "POOL-CAPACITY",
            "error",
            "cluster_shared roles disagree on num_host_blocks: prefill 8, decode 16",
            at("8", prefill_blocks, nth=0),
            hint="capacity is the pool total, not per participant",
            related=(Related("decode sets 16 here", at("16", decode_blocks)),),
        ),
        Diagnostic(
            "SCHEMA-REQUIRED",
            "error",
            "missing required key `timing` in the prefill worker",
            at(
                "kv_cache:\n        host_offload:\n          scope: cluster_shared\n"
                "          num_host_blocks: 8\n\t# a tab before this comment\n",
                "$.engine.workers.prefill",
            ),
            hint="add `timing: {type: fixed, prefill_ms: ..., decode_ms: ...}`",
        ),
        Diagnostic(
            "SCHEMA-REQUIRED",
            "error",
            "missing required key `traffic`",
            at(PD_SOURCE[PD_SOURCE.index("engine:") :], "$"),
        ),
        Diagnostic(
            "SCHEMA-TYPE",
            "error",
            "host_offload must be a mapping with scope and num_host_blocks",
            at(
                "scope: cluster_shared\n          num_host_blocks: 16",
                "$.engine.workers.decode.kv_cache.host_offload",
            ),
        ),
        Diagnostic(
            "ROUTER-KV-ONLY",
            "warning",
            "kv_event_lag_ms is ignored with policy round_robin",
            at("kv_event_lag_ms", "$.router.kv_event_lag_ms"),
            hint="remove it, or use policy kv_router",
            related=(Related("policy chosen here", at("round_robin", "$.router.policy")),),
        ),
        Diagnostic(
            "LINT-UNUSED-SUPPRESSION",
            "note",
            "nothing to suppress on this line",
            Span(PD_PATH, None, 1, 1, 1, 2),
        ),
    ]


def _spec_diagnostics() -> tuple[Diagnostic, ...]:
    return (
        Diagnostic(
            "NATIVE-LAYOUT-ID",
            "error",
            "kv_layout_id is blank; cluster_shared needs it",
            span_of(SPEC_PATH, SPEC_SOURCE, '""', path="/engine/kv_layout_id"),
            hint="kvreplay would derive `vllm-tp1-bs4-b250000`",
            related=(
                Related(
                    "the YAML config this spec was compiled from",
                    span_of(PD_PATH, PD_SOURCE, "engine:", path="$.engine"),
                ),
            ),
        ),
        Diagnostic(
            "SCHEMA-REQUIRED",
            "error",
            "missing required key `decode` in topology",
            Span(SPEC_PATH, "/topology"),
        ),
    )


def sample_results() -> tuple[FileResult, ...]:
    """Errors with hints, warnings, a note, related spans (same and other file), spans over
    several lines, unicode and a tab in the source, an unreadable file and a clean file."""
    return (
        FileResult(PD_PATH, PD_SOURCE, tuple(sort_unique(_pd_diagnostics()))),
        FileResult(
            "configs/missing.yaml",
            None,
            (
                Diagnostic(
                    "FILE-UNREADABLE",
                    "error",
                    "cannot read configs/missing.yaml: No such file or directory",
                    Span("configs/missing.yaml"),
                ),
            ),
        ),
        FileResult("configs/clean.yaml", "engine: {}\n", ()),
        FileResult(SPEC_PATH, SPEC_SOURCE, _spec_diagnostics()),
    )


@pytest.fixture
def results() -> tuple[FileResult, ...]:
    return sample_results()
