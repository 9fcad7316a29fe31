"""The autoscaling policies kvreplay itself runs, as options one model holds (config.md, Scaling).

YAML writes a policy under `scaling:` (`policy` plus that policy's keys); native JSON writes it as
`adapters.scaling` = {provider: the policy, config: those keys with their defaults}. Both are read
into `ScalingOptions` by the strict converter, and the engine builds the policy object from it
(engine/policies.py). `planner` is the reference's own planner hook (free-form settings, not run
here).

- `schedule`: replica targets at given simulated times;
- `load`: thresholds on per-replica queue depth, KV usage and in-flight requests, with min/max
  replicas, a cooldown and a tick interval (kvreplay's own policy);
- `planner_load`: the upstream Dynamo planner's `optimization_target: load`, with the planner's
  own option names and defaults, as far as its documentation describes it (config.md says which
  parts are read from the documentation and which are kvreplay's reading).
"""

from __future__ import annotations

from typing import Literal

import attrs

from kvreplay.schema.schema_facts import bounded, described, items, nested, nonneg, positive

KVREPLAY_POLICIES = ("schedule", "load", "planner_load")
PolicyName = Literal["schedule", "load", "planner_load"]
REPLICAS_MAX = 65536
GPUS_MAX = 10_000_000
SECONDS_MAX = 1e12
STEPS_MAX = 10_000

# The keys of each policy (the YAML `scaling` block and the native config take only these).
POLICY_KEYS: dict[str, tuple[str, ...]] = {
    "schedule": ("schedule", "max_gpus"),
    "load": ("interval_seconds", "cooldown_seconds", "min_replicas", "max_replicas", "max_gpus",
             "scale_up", "scale_down"),
    "planner_load": ("load_adjustment_interval_seconds", "min_endpoint", "prefill_min_endpoint",
                     "decode_min_endpoint", "max_gpu_budget", "load_min_observations",
                     "prefill_scale_up_queue_tokens", "prefill_scale_down_queue_tokens",
                     "decode_scale_up_kv_rate", "decode_scale_down_kv_rate"),
}


@described("One step of a schedule: the replicas of each role from `at_seconds` on (a role "
           "left out keeps its count).", required=["at_seconds"])
@attrs.frozen
class ScheduleStep:
    at_seconds: float | None = nonneg(None, "Simulated time of the step (s).", SECONDS_MAX)
    aggregated: int | None = nonneg(None, "Aggregated replicas (aggregated mode).", REPLICAS_MAX)
    prefill: int | None = nonneg(None, "Prefill replicas (disaggregated mode).", REPLICAS_MAX)
    decode: int | None = nonneg(None, "Decode replicas (disaggregated mode).", REPLICAS_MAX)


@described("Per-replica load thresholds (each one optional; the pool's average over its active "
           "replicas, from their latest forward-pass metrics).")
@attrs.frozen
class LoadThresholds:
    queue_depth: float | None = nonneg(None, "Requests waiting in a replica's schedulers.")
    kv_usage: float | None = bounded(None, "Share of a replica's KV capacity the scheduled and "
                                     "queued requests hold (0-1).", 0, 1)
    in_flight: float | None = nonneg(None, "Requests scheduled or waiting on a replica.")


@described("The options of a kvreplay scaling policy (which keys apply: POLICY_KEYS).")
@attrs.frozen
class ScalingOptions:
    schedule: tuple[ScheduleStep, ...] = items(
        (), "Schedule: the steps, in increasing `at_seconds`.", 1, STEPS_MAX)
    max_gpus: int | None = positive(
        None, "GPU budget: replicas x GPUs per replica (dp x tp x pp), summed over the roles, "
        "never exceeds it (targets above it are lowered to fit).", GPUS_MAX)
    interval_seconds: float = positive(1.0, "Load: seconds between two ticks (the first at "
                                       "one interval).", SECONDS_MAX)
    cooldown_seconds: float = nonneg(0.0, "Load: seconds after a change of a role during which "
                                     "that role is not changed again.", SECONDS_MAX)
    min_replicas: int = nonneg(1, "Load: fewest non-draining replicas per role.", REPLICAS_MAX)
    max_replicas: int = positive(8, "Load: most non-draining replicas per role.", REPLICAS_MAX)
    scale_up: LoadThresholds = nested(desc="Load: add one replica when ANY set threshold is "
                                      "reached (>=).", default=LoadThresholds())
    scale_down: LoadThresholds = nested(desc="Load: remove one replica when EVERY set threshold "
                                        "is undercut (<).", default=LoadThresholds())
    load_adjustment_interval_seconds: float = positive(
        5.0, "planner_load: seconds between two load-based scaling decisions.", SECONDS_MAX)
    min_endpoint: int = nonneg(1, "planner_load: fewest replicas per role.", REPLICAS_MAX)
    prefill_min_endpoint: int | None = positive(
        None, "planner_load: fewest prefill replicas (replaces min_endpoint).", REPLICAS_MAX)
    decode_min_endpoint: int | None = positive(
        None, "planner_load: fewest decode replicas (replaces min_endpoint).", REPLICAS_MAX)
    max_gpu_budget: int = positive(8, "planner_load: most GPUs in total.", GPUS_MAX)
    load_min_observations: int = nonneg(
        5, "planner_load: ticks with forward-pass metrics before the first decision.", 10**6)
    prefill_scale_up_queue_tokens: int | None = positive(
        None, "planner_load: queued prefill tokens per replica that add a prefill replica.",
        10**12)
    prefill_scale_down_queue_tokens: int | None = nonneg(
        None, "planner_load: queued prefill tokens per replica below which one is removed.",
        10**12)
    decode_scale_up_kv_rate: float | None = bounded(
        None, "planner_load: decode KV utilization (percent) that adds a decode replica.", 0, 100)
    decode_scale_down_kv_rate: float | None = bounded(
        None, "planner_load: decode KV utilization (percent) below which one is removed.", 0, 100)


def policy_config(policy: str, options: ScalingOptions) -> dict[str, object]:
    """The native config of a kvreplay policy: its keys, with their values (defaults included)."""
    from kvreplay.schema.convert import native_converter

    data = native_converter().unstructure(options)
    return {key: data[key] for key in POLICY_KEYS[policy]}
