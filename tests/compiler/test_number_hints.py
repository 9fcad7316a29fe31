"""A string where a number belongs gets the hint of what would parse (issue 22 item 5): the
number in quotes, the number without the unit its key already has, the value converted into the
key's unit, digits for a word; never "remove the quotes" for text that has no number in it."""

from __future__ import annotations

from pathlib import Path

import pytest

import kvreplay

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "g2-restore-mooncake.yaml"
ROLE = "engine.workers.aggregated"


def _hint(override: str) -> tuple[str, str | None]:
    result = kvreplay.compile_config(EXAMPLE, overrides=[f"{ROLE}.{override}"])
    (found,) = [d for d in result.diagnostics if d.rule == "SCHEMA-TYPE"]
    return found.message, found.hint


@pytest.mark.parametrize(("override", "hint"), [
    ('scheduler.max_batched_tokens="8192"', "remove the quotes to write a number: `8192`"),
    ("timing.prefill_ms=20ms", "write the number alone: `20` (`prefill_ms` is in ms already)"),
    ('timing.prefill_ms="20 ms"', "write the number alone: `20` (`prefill_ms` is in ms already)"),
    ("timing.prefill_ms=1.5s", "write it in ms, the unit of `prefill_ms`: 1.5 s is `1500`"),
    ("kv_cache.host_offload.d2h_bandwidth_gbps=800MB/s",
     "write it in GB/s, the unit of `d2h_bandwidth_gbps`: 800 MB/s is `0.8`"),
    ("kv_cache.bytes_per_token=2MiB",
     "write it in bytes, the unit of `bytes_per_token`: 2 MiB is `2097152`"),
    ("kv_cache.bytes_per_token=autoo", "did you mean `auto`?"),
    ('scheduler.max_batched_tokens="16,384"', "write the number without digit separators: "
     "`16384`"),
    ("kv_cache.host_offload.num_host_blocks=4k",
     "write the whole number in digits: kvreplay reads no `k` suffix"),
    ("parallelism.replicas=four", "`four` is a word, not a number: write it in digits, `4`"),
    ("parallelism.replicas=many", "`many` holds no number: write one in digits"),
    ("timing.prefill_ms=20parsecs", "write the number alone, in ms (`prefill_ms` is in ms); "
     "`parsecs` is not a unit kvreplay converts"),
])
def test_a_string_for_a_number_gets_what_would_parse(override: str, hint: str) -> None:
    """Each form gets its own hint, derived from the text."""
    assert _hint(override)[1] == hint


def test_the_two_cases_of_the_issue_differ() -> None:
    """`replicas: four` and `prefill_ms: "20ms"` no longer share one wrong hint."""
    (_, four), (_, twenty) = _hint("parallelism.replicas=four"), _hint('timing.prefill_ms="20ms"')
    assert "quotes" not in (four or "") and "quotes" not in (twenty or "")
    assert four != twenty
