"""Token value spaces of prompt runs, kept disjoint so that equal values always mean equal tokens.

Run values are plain Python ints used for identity only (the engine interns or hashes them):

- trace hash ids: ``[0, 2**64)`` exactly as written in the trace;
- explicit ``output_token_ids`` of a trace row: ``OUTPUT_TOKEN_BASE + token_id``;
- output tokens the workload invents for a finished turn (delta sessions): one value per request,
  ``GENERATED_OUTPUT_BASE + ordinal``;
- synthetic prompts: the shared ``cached_prefix_tokens`` prefix, one value per prefix group, and
  fresh values for every unique stretch.
"""

from __future__ import annotations

OUTPUT_TOKEN_BASE = 1 << 64
GENERATED_OUTPUT_BASE = (1 << 64) + (1 << 32)
SYNTHETIC_SHARED_PREFIX = 1 << 65
SYNTHETIC_GROUP_BASE = (1 << 65) + 1
SYNTHETIC_UNIQUE_BASE = 1 << 66

Runs = tuple[tuple[int, int], ...]


def output_runs(token_ids: tuple[int, ...] | None, emitted: int, ordinal: int) -> Runs:
    """Runs of the first `emitted` output tokens of a request (planned ids, or one fresh value)."""
    if emitted <= 0:
        return ()
    if token_ids is None:
        return ((GENERATED_OUTPUT_BASE + ordinal, emitted),)
    runs: list[tuple[int, int]] = []
    for token in token_ids[:emitted]:
        value = OUTPUT_TOKEN_BASE + token
        if runs and runs[-1][0] == value:
            runs[-1] = (value, runs[-1][1] + 1)
        else:
            runs.append((value, 1))
    return tuple(runs)
