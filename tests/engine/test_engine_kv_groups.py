"""KV cache groups (engine/kv_groups.py): page ranges per group in one byte budget. The
reference's figures are pinned by tests/differential/cases/kv-groups-*.json (and re-probed by
tests/differential/test_kv_groups_reference.py); these tests pin the allocator's rules and the
run's refusal of a forward larger than the pool."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kvreplay.engine.kv_groups import GroupedKv, GroupedKvOverflow
from kvreplay.schema.hybrid import KvCacheGroup
from kvreplay.schema.spec import Role

FULL = KvCacheGroup("full", "attention", 1, 4, 100)
WINDOW = KvCacheGroup("swa", "attention", 1, 4, 100, 4)


class _Rec:
    request_id = "r"
    session_id = None
    turn_index = None
    arrival_time_ms = 0.0


class _Seq:
    rec = _Rec()


def _pool(groups: tuple[KvCacheGroup, ...], capacity: int) -> GroupedKv:
    role = Role(name="aggregated", kv_cache_groups=groups, kv_cache_capacity_bytes=capacity)
    return GroupedKv(role, "role aggregated, worker 0, DP rank 0")


def test_a_sliding_window_frees_the_pages_before_it() -> None:
    """Decoding through 12 tokens under a 4-token window holds at most 2 pages; a full-history
    group holds them all (and needs a 4th page at token 13)."""
    seq: Any = _Seq()
    window = _pool((WINDOW,), 200)
    for t in range(12):
        assert window.grow(seq, t, t + 1)
        assert window.used <= 200
    assert window.leases[seq][1] == [2, 3]  # pages 2..3: tokens 8..11
    full = _pool((FULL,), 300)
    assert full.grow(seq, 0, 12) and full.used == 300
    with pytest.raises(GroupedKvOverflow, match=r"needs 400 bytes .* for 1 scheduled tokens "
                                                r"after 12 computed tokens"):
        full.grow(seq, 12, 13)


def test_growth_takes_every_group_or_none() -> None:
    """Two groups: a step whose pages do not all fit the free bytes takes none of them."""
    a: Any = _Seq()
    b: Any = _Seq()
    pool = _pool((FULL, WINDOW), 600)
    assert pool.grow(a, 0, 8)  # 2 + 2 pages: 400 bytes
    assert pool.grow(b, 0, 4)  # 1 + 1 pages: 200 bytes
    # The next token: a 3rd full page, and the window trades page 0 for page 2 (net 100 bytes,
    # none free): nothing is taken.
    assert not pool.grow(a, 8, 9)
    assert pool.used == 600 and pool.leases[a][1] == [0, 2, 0, 2]
    pool.release(b)
    assert pool.grow(a, 8, 9) and pool.used == 500
    assert pool.leases[a][1] == [0, 3, 1, 3]


def test_a_fresh_request_never_fits_by_its_last_token() -> None:
    """The rejection test is the last prompt token's forward: 12 tokens fit 3 pages, 13 not;
    under a window only the pages the last token reads count."""
    full = _pool((FULL,), 350)
    assert not full.never_fits(12) and full.never_fits(13)
    assert not _pool((WINDOW,), 100).never_fits(400)


def _grouped_run(folder: Path, capacity_bytes: int,
                 extra: str = "") -> subprocess.CompletedProcess[str]:
    """`kvreplay run` of one 12-token request on a rank of one full-history group (4-token
    pages of 100 bytes) in `capacity_bytes`, `extra` lines added to the worker (c.yaml)."""
    (folder / "t.jsonl").write_text(
        '{"timestamp": 0, "input_length": 12, "output_length": 2, "hash_ids": [1, 2, 3]}\n')
    (folder / "c.yaml").write_text(f"""\
engine:
  model: meta-llama/Llama-3.1-8B
  workers:
    aggregated:
      kv_cache:
        block_size: 4
        prefix_caching: false
        capacity: {{type: fixed, bytes: {capacity_bytes}}}
        groups:
          - {{name: full, kind: attention, num_layers: 1, block_size_tokens: 4,
             page_size_bytes: 100}}
      timing: {{type: fixed, prefill_ms: 1, decode_ms: 1}}
{extra}traffic:
  source: {{type: trace, format: mooncake, paths: [t.jsonl], block_size: 4}}
""")
    return subprocess.run([sys.executable, "-m", "kvreplay", "run", "c.yaml", "-o", "out.json"],
                          cwd=folder, capture_output=True, text=True, check=False)


def test_a_forward_larger_than_the_pool_fails_the_run(tmp_path: Path) -> None:
    """`kvreplay run` stops with exit 1 and a located message where the reference aborts its
    replay (a 12-token prompt fills 3 pages of 350 bytes; its second token needs a 4th)."""
    ran = _grouped_run(tmp_path, 350)
    assert ran.returncode == 1, ran.stderr
    assert "Traceback" not in ran.stderr and not (tmp_path / "out.json").exists()
    assert "role aggregated, worker 0, DP rank 0: request arriving at 0 ms needs 400 bytes" \
        in ran.stderr
    assert "engine.workers.aggregated.kv_cache.capacity.bytes" in ran.stderr
    assert "`scheduler.max_batched_tokens`" in ran.stderr
    # The same run from its native spec names the native keys, not the YAML config's.
    compiled = subprocess.run([sys.executable, "-m", "kvreplay", "compile", "c.yaml", "-o",
                               "spec.json"], cwd=tmp_path, capture_output=True, text=True,
                              check=False)
    assert compiled.returncode == 0, compiled.stderr
    native = subprocess.run([sys.executable, "-m", "kvreplay", "run", "spec.json", "-o",
                             "out.json"], cwd=tmp_path, capture_output=True, text=True,
                            check=False)
    assert native.returncode == 1, native.stderr
    assert "needs 400 bytes" in native.stderr and not (tmp_path / "out.json").exists()
    assert "`kv_cache_capacity_bytes` of the aggregated rank" in native.stderr
    assert "`max_num_batched_tokens`" in native.stderr
    assert "engine.workers" not in native.stderr and "scheduler." not in native.stderr


def test_n_gram_speculation_beside_groups_is_refused_not_run(tmp_path: Path) -> None:
    """KV cache groups with n-gram speculation: no HYBRID-GROUPS rule names it, so the engine's
    own refusal (the reference runs no n-gram drafts) stops the run: exit 1, no report."""
    ran = _grouped_run(tmp_path, 35000, "      speculation: {kind: ngram, num_speculative_tokens:"
                                        " 2, acceptance_rates: [0.5, 0.3]}\n")
    assert ran.returncode == 1, ran.stderr
    assert "Traceback" not in ran.stderr and not (tmp_path / "out.json").exists()
    assert "speculative decoding (ngram) on role aggregated: not executed" in ran.stderr
