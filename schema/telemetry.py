"""Telemetry options: the one class of the config model (`report.telemetry`), the native
document (`spec.telemetry`) and the Spec, so they cannot disagree on a field or its default."""

from __future__ import annotations

import attrs

from kvreplay.schema.schema_facts import bounded, described

# The reference's default cadence (`telemetry_sample_interval_ms`).
SAMPLE_INTERVAL_MS = 1000.0
# A sample every microsecond at least: finer cadences only repeat the engine's state (its clock
# ticks in nanoseconds) and make the report as large as the run is long.
MIN_SAMPLE_INTERVAL_MS = 0.001


@described("Samples of the engine's state on a cadence of simulated time, written to the "
           "report's `telemetry` (the reference's `capture_telemetry`; "
           "docs/traces-and-reports.md).")
@attrs.frozen
class Telemetry:
    sample_interval_ms: float = bounded(
        SAMPLE_INTERVAL_MS, "Simulated time between two periodic samples (ms).",
        MIN_SAMPLE_INTERVAL_MS, 1e15)
