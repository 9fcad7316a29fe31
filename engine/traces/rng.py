"""The reference engine's seeded generator, bit for bit: Rust `rand` 0.9 `StdRng` (ChaCha12).

`StdRng.seed_from_u64(seed)` expands the seed with PCG32 into a 256-bit ChaCha key, then draws
from ChaCha12 blocks (64-bit block counter, zero stream), four blocks per refill. Matching it lets a
seeded Poisson arrival sequence equal the reference's exactly; it is pure Python, so the same on
every machine and independent of PYTHONHASHSEED.
"""

from __future__ import annotations

import math

_M32 = 0xFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF
_SIGMA = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)
_F64_SCALE = 1.0 / (1 << 53)
_MIN_POSITIVE = 2.2250738585072014e-308


def _pcg32_key(state: int) -> list[int]:
    mul, inc = 6364136223846793005, 11634580027462260723
    key = []
    for _ in range(8):
        state = (state * mul + inc) & _M64
        xorshifted = (((state >> 18) ^ state) >> 27) & _M32
        rot = state >> 59
        key.append(((xorshifted >> rot) | (xorshifted << (32 - rot))) & _M32 if rot else xorshifted)
    return key


def _quarter_round(x: list[int], a: int, b: int, c: int, d: int) -> None:
    x[a] = (x[a] + x[b]) & _M32
    x[d] ^= x[a]
    x[d] = ((x[d] << 16) | (x[d] >> 16)) & _M32
    x[c] = (x[c] + x[d]) & _M32
    x[b] ^= x[c]
    x[b] = ((x[b] << 12) | (x[b] >> 20)) & _M32
    x[a] = (x[a] + x[b]) & _M32
    x[d] ^= x[a]
    x[d] = ((x[d] << 8) | (x[d] >> 24)) & _M32
    x[c] = (x[c] + x[d]) & _M32
    x[b] ^= x[c]
    x[b] = ((x[b] << 7) | (x[b] >> 25)) & _M32


def _chacha12_block(key: list[int], counter: int) -> list[int]:
    init = [*_SIGMA, *key, counter & _M32, (counter >> 32) & _M32, 0, 0]
    x = list(init)
    for _ in range(6):
        _quarter_round(x, 0, 4, 8, 12)
        _quarter_round(x, 1, 5, 9, 13)
        _quarter_round(x, 2, 6, 10, 14)
        _quarter_round(x, 3, 7, 11, 15)
        _quarter_round(x, 0, 5, 10, 15)
        _quarter_round(x, 1, 6, 11, 12)
        _quarter_round(x, 2, 7, 8, 13)
        _quarter_round(x, 3, 4, 9, 14)
    return [(a + b) & _M32 for a, b in zip(x, init, strict=True)]


class StdRng:
    """`rand::rngs::StdRng::seed_from_u64(seed)`: next_u32/next_u64/f64 and bounded integers."""

    __slots__ = ("_buffer", "_counter", "_index", "_key")

    def __init__(self, seed: int) -> None:
        if not 0 <= seed <= _M64:
            raise ValueError(f"seed must be an unsigned 64-bit integer, got {seed}")
        self._key = _pcg32_key(seed)
        self._counter = 0
        self._buffer: list[int] = []
        self._index = 0

    def next_u32(self) -> int:
        if self._index >= len(self._buffer):
            buffer: list[int] = []
            for _ in range(4):
                buffer.extend(_chacha12_block(self._key, self._counter))
                self._counter += 1
            self._buffer = buffer
            self._index = 0
        value = self._buffer[self._index]
        self._index += 1
        return value

    def next_u64(self) -> int:
        low = self.next_u32()
        return low | (self.next_u32() << 32)

    def f64(self) -> float:
        """`rng.random::<f64>()`: 53 random bits scaled into [0, 1)."""
        return (self.next_u64() >> 11) * _F64_SCALE

    def below_u32(self, n: int) -> int:
        """`rng.random_range(0..n)` for a u32 range (widening multiply, one bias-reduction step)."""
        if not 0 < n <= _M32:
            raise ValueError(f"range bound must be in 1..2**32-1, got {n}")
        product = self.next_u32() * n
        result, low = product >> 32, product & _M32
        if low > ((-n) & _M32):
            high_again = (self.next_u32() * n) >> 32
            if low + high_again > _M32:
                result += 1
        return result

    def exponential_ms(self, mean_ms: float) -> float:
        """Exponential sample as the reference draws it: -mean * ln(1 - U), clamped away from 0."""
        if mean_ms == 0.0:
            return 0.0
        u = min(max(1.0 - self.f64(), _MIN_POSITIVE), 1.0)
        return -mean_ms * math.log(u)
