"""The reference's MTP random stream, draw for draw: Rust `rand`'s StdRng (ChaCha12) seeded by
`seed_from_u64`, and its Bernoulli test (engine.md section "MTP speculative decoding").

`seed_from_u64(s)` expands s into the 32-byte ChaCha key with PCG32 (multiplier
6364136223846793005, increment 11634580027462260723, XSH-RR output, advanced before each of
its eight words); the stream is ChaCha with 12 rounds, that key, a 64-bit block counter from 0
and a zero nonce; a u64 draw is two consecutive 32-bit words, low word first. `random_bool(p)`
draws one u64 v and answers v < floor(p * 2**64), except that p == 1 answers true without a
draw. Checked on the installed reference: burst sequences of several seeds (0, 7, 2**64 - 1,
...) and rate lists (with 1.0 and 0.0 positions) equal the reference's token for token.

The compiled stream (`engine/_mtprng.c`, built with the row printer when a C compiler is at
hand) gives the same words; KVREPLAY_PURE_PYTHON selects this module's own.
"""

from __future__ import annotations

import os

MASK32 = 0xFFFFFFFF
MASK64 = 0xFFFFFFFFFFFFFFFF
PCG_MUL = 6364136223846793005
PCG_INC = 11634580027462260723
# "expand 32-byte k"
SIGMA = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)
TWO_64 = 18446744073709551616.0


def seed_key(seed: int) -> list[int]:
    """The eight key words `seed_from_u64(seed)` writes (PCG32, advanced before each)."""
    state = seed & MASK64
    words = []
    for _ in range(8):
        state = (state * PCG_MUL + PCG_INC) & MASK64
        xorshifted = (((state >> 18) ^ state) >> 27) & MASK32
        rot = state >> 59
        words.append(((xorshifted >> rot) | (xorshifted << ((32 - rot) & 31))) & MASK32)
    return words


def chacha12_block(key: list[int], counter: int) -> list[int]:
    """One 16-word ChaCha12 output block (64-bit counter, zero nonce)."""
    j0, j1, j2, j3 = SIGMA
    j4, j5, j6, j7, j8, j9, j10, j11 = key
    j12, j13 = counter & MASK32, (counter >> 32) & MASK32
    x0, x1, x2, x3, x4, x5, x6, x7 = j0, j1, j2, j3, j4, j5, j6, j7
    x8, x9, x10, x11, x12, x13, x14, x15 = j8, j9, j10, j11, j12, j13, 0, 0
    m = MASK32
    for _ in range(6):  # 12 rounds: a column and a diagonal round each
        x0 = (x0 + x4) & m; x12 ^= x0; x12 = ((x12 << 16) | (x12 >> 16)) & m  # noqa: E702
        x8 = (x8 + x12) & m; x4 ^= x8; x4 = ((x4 << 12) | (x4 >> 20)) & m  # noqa: E702
        x0 = (x0 + x4) & m; x12 ^= x0; x12 = ((x12 << 8) | (x12 >> 24)) & m  # noqa: E702
        x8 = (x8 + x12) & m; x4 ^= x8; x4 = ((x4 << 7) | (x4 >> 25)) & m  # noqa: E702
        x1 = (x1 + x5) & m; x13 ^= x1; x13 = ((x13 << 16) | (x13 >> 16)) & m  # noqa: E702
        x9 = (x9 + x13) & m; x5 ^= x9; x5 = ((x5 << 12) | (x5 >> 20)) & m  # noqa: E702
        x1 = (x1 + x5) & m; x13 ^= x1; x13 = ((x13 << 8) | (x13 >> 24)) & m  # noqa: E702
        x9 = (x9 + x13) & m; x5 ^= x9; x5 = ((x5 << 7) | (x5 >> 25)) & m  # noqa: E702
        x2 = (x2 + x6) & m; x14 ^= x2; x14 = ((x14 << 16) | (x14 >> 16)) & m  # noqa: E702
        x10 = (x10 + x14) & m; x6 ^= x10; x6 = ((x6 << 12) | (x6 >> 20)) & m  # noqa: E702
        x2 = (x2 + x6) & m; x14 ^= x2; x14 = ((x14 << 8) | (x14 >> 24)) & m  # noqa: E702
        x10 = (x10 + x14) & m; x6 ^= x10; x6 = ((x6 << 7) | (x6 >> 25)) & m  # noqa: E702
        x3 = (x3 + x7) & m; x15 ^= x3; x15 = ((x15 << 16) | (x15 >> 16)) & m  # noqa: E702
        x11 = (x11 + x15) & m; x7 ^= x11; x7 = ((x7 << 12) | (x7 >> 20)) & m  # noqa: E702
        x3 = (x3 + x7) & m; x15 ^= x3; x15 = ((x15 << 8) | (x15 >> 24)) & m  # noqa: E702
        x11 = (x11 + x15) & m; x7 ^= x11; x7 = ((x7 << 7) | (x7 >> 25)) & m  # noqa: E702
        x0 = (x0 + x5) & m; x15 ^= x0; x15 = ((x15 << 16) | (x15 >> 16)) & m  # noqa: E702
        x10 = (x10 + x15) & m; x5 ^= x10; x5 = ((x5 << 12) | (x5 >> 20)) & m  # noqa: E702
        x0 = (x0 + x5) & m; x15 ^= x0; x15 = ((x15 << 8) | (x15 >> 24)) & m  # noqa: E702
        x10 = (x10 + x15) & m; x5 ^= x10; x5 = ((x5 << 7) | (x5 >> 25)) & m  # noqa: E702
        x1 = (x1 + x6) & m; x12 ^= x1; x12 = ((x12 << 16) | (x12 >> 16)) & m  # noqa: E702
        x11 = (x11 + x12) & m; x6 ^= x11; x6 = ((x6 << 12) | (x6 >> 20)) & m  # noqa: E702
        x1 = (x1 + x6) & m; x12 ^= x1; x12 = ((x12 << 8) | (x12 >> 24)) & m  # noqa: E702
        x11 = (x11 + x12) & m; x6 ^= x11; x6 = ((x6 << 7) | (x6 >> 25)) & m  # noqa: E702
        x2 = (x2 + x7) & m; x13 ^= x2; x13 = ((x13 << 16) | (x13 >> 16)) & m  # noqa: E702
        x8 = (x8 + x13) & m; x7 ^= x8; x7 = ((x7 << 12) | (x7 >> 20)) & m  # noqa: E702
        x2 = (x2 + x7) & m; x13 ^= x2; x13 = ((x13 << 8) | (x13 >> 24)) & m  # noqa: E702
        x8 = (x8 + x13) & m; x7 ^= x8; x7 = ((x7 << 7) | (x7 >> 25)) & m  # noqa: E702
        x3 = (x3 + x4) & m; x14 ^= x3; x14 = ((x14 << 16) | (x14 >> 16)) & m  # noqa: E702
        x9 = (x9 + x14) & m; x4 ^= x9; x4 = ((x4 << 12) | (x4 >> 20)) & m  # noqa: E702
        x3 = (x3 + x4) & m; x14 ^= x3; x14 = ((x14 << 8) | (x14 >> 24)) & m  # noqa: E702
        x9 = (x9 + x14) & m; x4 ^= x9; x4 = ((x4 << 7) | (x4 >> 25)) & m  # noqa: E702
    return [(x0 + j0) & m, (x1 + j1) & m, (x2 + j2) & m, (x3 + j3) & m, (x4 + j4) & m,
            (x5 + j5) & m, (x6 + j6) & m, (x7 + j7) & m, (x8 + j8) & m, (x9 + j9) & m,
            (x10 + j10) & m, (x11 + j11) & m, (x12 + j12) & m, (x13 + j13) & m, x14, x15]


class PyStdRng:
    """StdRng::seed_from_u64(seed), u64 draws only (the only draws the sampler makes)."""

    __slots__ = ("_counter", "_draws", "_key")

    def __init__(self, seed: int) -> None:
        self._key = seed_key(seed)
        self._counter = 0
        self._draws: list[int] = []

    def next_u64(self) -> int:
        draws = self._draws
        if not draws:
            w = chacha12_block(self._key, self._counter)
            self._counter += 1
            # Reversed, so that pop() takes them in stream order.
            draws.extend((w[i] | (w[i + 1] << 32)) for i in range(14, -1, -2))
        return draws.pop()

    def accepted(self, thresholds: tuple[int | None, ...]) -> int:
        """Draft positions accepted in one verification: position i is accepted when its draw is
        below thresholds[i] (None: always, without a draw); the first rejection ends it."""
        n = 0
        for limit in thresholds:
            if limit is not None and not self.next_u64() < limit:
                break
            n += 1
        return n

    def accepted_many(self, thresholds: tuple[int | None, ...], count: int) -> bytes:
        """accepted() `count` times in a row, as bytes (a stretch's verifications at once)."""
        accepted = self.accepted
        return bytes([accepted(thresholds) for _ in range(count)])


def _compiled() -> type | None:
    if os.environ.get("KVREPLAY_PURE_PYTHON"):
        return None
    try:
        from kvreplay.engine import _mtprng
    except ImportError:
        return None
    return _mtprng.StdRng


StdRng = _compiled() or PyStdRng


def threshold(rate: float) -> int | None:
    """`random_bool(rate)` as a threshold: accept a draw v when v < it; None: accept without a
    draw (rate 1)."""
    if rate == 1.0:
        return None
    return min(int(rate * TWO_64), MASK64)
