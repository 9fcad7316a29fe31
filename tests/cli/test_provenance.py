"""Secrets never reach a report's command line."""

from __future__ import annotations

import pytest

from kvreplay.provenance import redact


@pytest.mark.parametrize(("argv", "expected"), [
    (["run", "c.yaml", "--token", "abc"], ["run", "c.yaml", "--token", "***"]),
    (["--api-key=abc", "-o", "r.json"], ["--api-key=***", "-o", "r.json"]),
    (["--set", "auth.password=pw"], ["--set", "auth.password=***"]),
    (["--trace", "s3://AKIA:secret@bucket/t.jsonl"], ["--trace", "s3://***@bucket/t.jsonl"]),
    (["--set", "engine.model=meta-llama/Llama-3.1-8B"],
     ["--set", "engine.model=meta-llama/Llama-3.1-8B"]),
    (["--set", "engine.workers.aggregated.kv_cache.block_size=16"],
     ["--set", "engine.workers.aggregated.kv_cache.block_size=16"]),
])
def test_redact(argv: list[str], expected: list[str]) -> None:
    """Values of secret-named options and keys, and URL credentials, become ***; the rest
    stays as typed."""
    assert redact(argv) == expected
