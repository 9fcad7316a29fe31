"""A prompt's block identities: the fast path over one-block runs and the general path over
blocks cut across runs agree with the block-by-block definition (`block_at`)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvreplay.engine.identity import ROOT, BlockIdentities

VALUES = st.one_of(st.integers(0, 3), st.integers(2**64 - 2, 2**64 + 1),
                   st.integers(2**68 - 2, 2**68 + 1))
RUNS = st.lists(st.tuples(VALUES, st.integers(0, 9)), max_size=12)


def one_by_one(runs: list[tuple[int, int]], full: int, block_size: int) -> list[int]:
    ids = BlockIdentities(keep_keys=True)
    out: list[int] = []
    parent = ROOT
    for index in range(full):
        ident = ids.block_at(runs, index, block_size, parent)
        assert ident is not None
        out.append(ident)
        parent = ident
    return out


@settings(max_examples=300, deadline=None)
@given(RUNS, st.integers(1, 6), st.data())
def test_prompt_blocks_are_the_blocks_one_by_one(runs: list[tuple[int, int]], block_size: int,
                                                 data: st.DataObject) -> None:
    """Any runs (one-block runs first or not, empty runs, wide values), any prompt length they
    cover: the same identities, in the same first-seen order."""
    tokens = sum(count for _, count in runs)
    input_length = data.draw(st.integers(0, tokens))
    full = input_length // block_size
    assert BlockIdentities().prompt_blocks(runs, input_length, block_size) == one_by_one(
        runs, full, block_size)


def test_prompt_blocks_of_one_block_runs_then_cut_runs() -> None:
    """Two one-block runs take the fast path, then a block cut across three runs."""
    ids = BlockIdentities(keep_keys=True)
    chain = ids.prompt_blocks(((5, 4), (6, 4), (7, 1), (8, 2), (9, 3)), 12, 4)
    assert chain == [0, 1, 2]
    assert ids.keys == [(ROOT, 5), (0, 6), (1, (7, 1, 8, 2, 9, 1))]


def test_runs_shorter_than_the_prompt_are_refused() -> None:
    """A prompt whose runs cover fewer tokens than input_length is an error, not a short chain."""
    with pytest.raises(ValueError, match="fewer than input_length=9"):
        BlockIdentities().prompt_blocks(((1, 4), (2, 0), (3, 3)), 9, 4)

