"""Goodput bounds: the one Sla class of the config model (`evaluation.sla`), the Spec (`sla`) and
the report (goodput), so the three cannot disagree on its fields or their defaults."""

from __future__ import annotations

import attrs

from kvreplay.schema.schema_facts import described, positive


@described("Service-level bounds; a request is good when it meets every bound given.")
@attrs.frozen
class Sla:
    """Goodput bounds (any subset): TTFT, average ITL (e2e - ttft) / (n - 1), end-to-end."""

    ttft_ms: float | None = positive(None, "Time to first token bound (ms).")
    itl_ms: float | None = positive(None, "Average inter-token latency bound (ms).")
    e2e_ms: float | None = positive(None, "End-to-end latency bound (ms).")

    @property
    def is_set(self) -> bool:
        return self.ttft_ms is not None or self.itl_ms is not None or self.e2e_ms is not None

    def is_good(self, ttft_ms: float, e2e_ms: float, output_length: int) -> bool:
        if self.e2e_ms is not None and e2e_ms > self.e2e_ms:
            return False
        if self.ttft_ms is not None and ttft_ms > self.ttft_ms:
            return False
        if self.itl_ms is not None and output_length > 1:
            return (e2e_ms - ttft_ms) / (output_length - 1) <= self.itl_ms
        return True

    def is_good_without_tokens(self, e2e_ms: float) -> bool:
        return (self.ttft_ms is None and self.itl_ms is None and self.e2e_ms is not None
                and e2e_ms <= self.e2e_ms)
