"""The MTP random stream: Rust rand's StdRng (ChaCha12 seeded by seed_from_u64) and its
Bernoulli draws, in Python and in C, against what the reference engine sampled."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kvreplay.engine.mtp_rng import PyStdRng, threshold
from kvreplay.engine.speculation import MtpSampler, conditional_rates

# The reference (ai-dynamo 1.6.1), one 4-token prompt alone on a rank (fixed timing: prefill 10
# ms, decode 1 ms), aic_nextn 1, rate "0.5", aic_mtp_seed 7: its last token time for outputs of
# 1..40 tokens (the first token is always at 11 ms). Each step's burst is 1 or 2 tokens, so the
# list spells the first ~27 draws of the stream.
REFERENCE_LAST_TOKEN_MS = [
    11, 11, 12, 12, 13, 13, 14, 15, 15, 16, 17, 17, 18, 18, 19, 19, 20, 21, 22, 22, 23, 23, 24,
    24, 25, 26, 27, 28, 29, 30, 31, 31, 32, 32, 33, 33, 34, 35, 35, 36]


def _last_token_ms(sampler_seed: int, output: int) -> int:
    sampler = MtpSampler(1, (0.5,), sampler_seed)
    t, generated = 11, 0
    while True:
        generated += sampler.burst(output - generated)
        if generated >= output:
            return t
        t += 1


def test_bursts_spell_the_reference_stream() -> None:
    """The sampler reproduces the reference's token times for every output length."""
    assert [_last_token_ms(7, n) for n in range(1, 41)] == REFERENCE_LAST_TOKEN_MS


@pytest.mark.parametrize("seed", [0, 1, 7, 42, 2**63, 2**64 - 1])
def test_the_compiled_stream_draws_the_python_one(seed: int) -> None:
    """engine/_mtprng.c gives the same u64 draws and acceptances as the Python stream."""
    compiled_rng = pytest.importorskip("kvreplay.engine._mtprng",
                                       reason="the C stream is not built (no C compiler)")
    compiled, python = compiled_rng.StdRng(seed), PyStdRng(seed)
    assert [compiled.next_u64() for _ in range(100)] == [python.next_u64() for _ in range(100)]
    limits = tuple(threshold(r) for r in (0.8, 1.0, 0.6, 0.0, 0.3))
    assert [compiled.accepted(limits) for _ in range(500)] == [
        python.accepted(limits) for _ in range(500)]
    assert compiled.accepted_many(limits, 300) == python.accepted_many(limits, 300)
    assert compiled.next_u64() == python.next_u64()


def test_pure_python_is_chosen_by_the_environment() -> None:
    """KVREPLAY_PURE_PYTHON=1 leaves the compiled stream out; the pure-Python one draws."""
    script = ("from kvreplay.engine import mtp_rng; "
              "print(mtp_rng.StdRng is mtp_rng.PyStdRng, mtp_rng.StdRng(7).next_u64())")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "KVREPLAY_PURE_PYTHON": "1"}, check=True)
    assert done.stdout.split() == ["True", str(PyStdRng(7).next_u64())]


def test_rate_one_draws_nothing_and_rate_zero_draws_once() -> None:
    """random_bool(1) accepts without a draw; random_bool(0) draws and rejects."""
    rng, twin = PyStdRng(3), PyStdRng(3)
    assert rng.accepted((None, None)) == 2
    assert rng.next_u64() == twin.next_u64()  # nothing was drawn
    assert rng.accepted((threshold(0.0), None)) == 0
    twin.next_u64()
    assert rng.next_u64() == twin.next_u64()  # one draw
    assert threshold(0.5) == 2**63 and threshold(1.0) is None


def test_rates_are_padded_cut_or_defaulted_like_the_reference() -> None:
    """Missing rates are zeros, extra ones are ignored, none at all are 0.85, 0.3, 0, ..."""
    assert conditional_rates(3, (1.0, 0.5)) == (1.0, 0.5, 0.0)
    assert conditional_rates(2, (1.0, 0.5, 0.25)) == (1.0, 0.5)
    assert conditional_rates(5, ()) == (0.85, 0.3, 0.0, 0.0, 0.0)
    assert conditional_rates(1, ()) == (0.85,)


def test_a_burst_is_capped_by_the_tokens_left_and_counts_what_it_sampled() -> None:
    """The cap applies after sampling: the histogram keeps the uncapped acceptance."""
    sampler = MtpSampler(2, (1.0, 1.0), 0)
    assert [sampler.burst(1), sampler.burst(2), sampler.burst(9), sampler.burst(0)] == [1, 2, 3, 0]
    assert sampler.accepted_hist == [0, 0, 3]
