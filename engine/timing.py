"""Pass durations (engine.md section 2), in integer nanoseconds.

Fixed: `prefill_ms` when the pass computes new prompt tokens, `decode_ms` when it emits a token
for an ongoing decoder. Polynomial: prefill 4.209989e-7*T^2 + 1.518344e-2*T + 16.50142 ms for
T new prompt tokens in the pass; decode max(1, -25.74u^2 + 54.01u + 5.74) ms where u is the
emitting requests' total sequence length over the rank's token capacity (checked against the
reference). Durations are divided by `speedup_ratio`, decode also by `decode_speedup_ratio`
(0 leaves a duration unscaled), then rounded to the nanosecond.
"""

from __future__ import annotations

import math

from kvreplay.engine.simtime import NS_PER_MS, ms_to_ns
from kvreplay.schema.spec import Role

PREFILL_A, PREFILL_B, PREFILL_C = 4.209989e-7, 1.518344e-2, 16.50142
DECODE_A, DECODE_B, DECODE_C = -25.74, 54.01, 5.74
# On u in [0, 1] the decode polynomial grows (its vertex lies beyond 1) from DECODE_C > 1, so
# the max(1, .) floor never applies there and a stretch's longest pass is its last one
# (decode_series relies on both).
assert DECODE_A < 0 and -DECODE_B / (2 * DECODE_A) > 1.0 and DECODE_C > 1.0


class PassTimer:
    """Prefill and decode parts of one rank's pass."""

    __slots__ = ("_capacity_tokens", "_decode_div", "_fixed_decode_ns", "_fixed_prefill_ns",
                 "_prefill_div", "fixed")

    def __init__(self, rank: Role) -> None:
        speedup = rank.speedup_ratio or 1.0
        self._prefill_div = speedup
        self._decode_div = speedup * (rank.decode_speedup_ratio or 1.0)
        self._capacity_tokens = rank.num_gpu_blocks * rank.block_size
        if rank.kv_cache_groups is not None:
            # KV cache groups: the reference's decode polynomial sees no token capacity and
            # runs at its u = 1 value (34.01 ms) whatever the pool (probed: 10 to 10^12 bytes).
            self._capacity_tokens = 1
        timing = rank.timing_model
        self.fixed = timing.type == "fixed"
        self._fixed_prefill_ns = ms_to_ns((timing.prefill_ms or 0.0) / self._prefill_div)
        self._fixed_decode_ns = ms_to_ns((timing.decode_ms or 0.0) / self._decode_div)

    def prefill_ns(self, new_prompt_tokens: int) -> int:
        if self.fixed:
            return self._fixed_prefill_ns
        t = float(new_prompt_tokens)
        return ms_to_ns((PREFILL_A * t * t + PREFILL_B * t + PREFILL_C) / self._prefill_div)

    def decode_ns(self, active_tokens: int) -> int:
        if self.fixed:
            return self._fixed_decode_ns
        u = min(active_tokens / self._capacity_tokens, 1.0)
        return ms_to_ns(max(1.0, DECODE_A * u * u + DECODE_B * u + DECODE_C) / self._decode_div)

    def decode_series(self, active_tokens: int, step: int, passes: int) -> list[int]:
        """[decode_ns(active_tokens + j * step) for j in range(passes)], bit for bit.

        A fast-forwarded stretch under polynomial timing: every pass adds one token per
        decoding request (`step`), so each pass has its own duration. The same float
        operations as decode_ns, in one comprehension."""
        if self.fixed:
            return [self._fixed_decode_ns] * passes
        cap = self._capacity_tokens
        last = active_tokens + (passes - 1) * step
        if passes <= 2 or last > cap:  # u would be clamped at 1: pass by pass
            return [self.decode_ns(active_tokens + j * step) for j in range(passes)]
        # The polynomial grows on [0, 1]: the first and the last pass bound every other one.
        # Should either be an invalid time (decode_ns raises), go pass by pass, so the error
        # is the one the first such pass gives.
        try:
            self.decode_ns(active_tokens)
            self.decode_ns(last)
        except Exception:  # re-raised by the pass that fails first
            return [self.decode_ns(active_tokens + j * step) for j in range(passes)]
        a, b, c = DECODE_A, DECODE_B, DECODE_C
        div = self._decode_div
        floor = math.floor
        # ms_to_ns(x) is floor(x * NS_PER_MS + 0.5); u <= 1 here, so max(1, .) is a no-op.
        if div == 1.0:  # x / 1.0 == x exactly
            return [floor((a * u * u + b * u + c) * NS_PER_MS + 0.5)
                    for t in range(active_tokens, last + 1, step) for u in [t / cap]]
        return [floor((a * u * u + b * u + c) / div * NS_PER_MS + 0.5)
                for t in range(active_tokens, last + 1, step) for u in [t / cap]]
