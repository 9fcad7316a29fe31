"""Pass durations (engine.md section 2), in integer nanoseconds.

Fixed: `prefill_ms` when the pass computes new prompt tokens, `decode_ms` when it emits a token
for an ongoing decoder. Polynomial: prefill 4.209989e-7*T^2 + 1.518344e-2*T + 16.50142 ms for
T new prompt tokens in the pass; decode max(1, -25.74u^2 + 54.01u + 5.74) ms where u is the
emitting requests' total sequence length over the rank's token capacity (checked against the
reference). Durations are divided by `speedup_ratio`, decode also by `decode_speedup_ratio`
(0 leaves a duration unscaled), then rounded to the nanosecond.
"""

from __future__ import annotations

from kvreplay.engine.config import RankConfig
from kvreplay.engine.simtime import ms_to_ns

PREFILL_A, PREFILL_B, PREFILL_C = 4.209989e-7, 1.518344e-2, 16.50142
DECODE_A, DECODE_B, DECODE_C = -25.74, 54.01, 5.74


class PassTimer:
    """Prefill and decode parts of one rank's pass."""

    __slots__ = ("_capacity_tokens", "_decode_div", "_fixed_decode_ns", "_fixed_prefill_ns",
                 "_prefill_div", "fixed")

    def __init__(self, rank: RankConfig) -> None:
        speedup = rank.speedup_ratio or 1.0
        self._prefill_div = speedup
        self._decode_div = speedup * (rank.decode_speedup_ratio or 1.0)
        self._capacity_tokens = rank.num_gpu_blocks * rank.block_size
        self.fixed = rank.timing.kind == "fixed"
        self._fixed_prefill_ns = ms_to_ns(rank.timing.prefill_ms / self._prefill_div)
        self._fixed_decode_ns = ms_to_ns(rank.timing.decode_ms / self._decode_div)

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
