"""Every knob of the reference engine: the YAML setting that writes it, or why none does.

Native knobs are named `<where>.<field>`: `rank.*` and `role.*` (one role's engine args around
its rank), `rank.sglang.*` / `rank.trtllm.*`, `router.*` (the KV router config) and `replay.*`
(the replay entry point's arguments). tests/compiler/test_knob_coverage.py compiles each
`EXPOSED` row and, with the reference installed, checks that its own lists hold no other field.
"""

from __future__ import annotations

from typing import Any

import attrs

W = "engine.workers.aggregated"
RANK = ("spec", "engine", "rank")
ROLE = ("spec", "engine")
PLACEMENT = ("spec", "adapters", "placement", "config")
Context = tuple[tuple[str, Any], ...]
PD: Context = (("engine.mode", "disaggregated"), ("engine.workers", {"prefill": {}, "decode": {}}))
PD_RANK = ("spec", "engine", "prefill", "rank")
KV_ROUTER: Context = (("router.policy", "kv_router"),)
SESSION: Context = (("traffic.source", {"type": "synthetic-session"}),
                    ("traffic.stop", {"sessions": 2}))
TRACE: Context = (("traffic.source", {"type": "trace", "paths": ["t.jsonl"]}),
         ("traffic.load", {"type": "trace_timestamps"}))
MTP = {"kind": "mtp", "num_speculative_tokens": 2, "acceptance_rates": [0.8, 0.6]}


@attrs.frozen
class Knob:
    native: str  # e.g. "rank.preemption_mode"
    yaml: str  # dotted config path, e.g. "engine.workers.aggregated.scheduler.preemption_mode"
    value: Any  # what the test writes there
    at: tuple[str, ...]  # where the compiled native document carries it
    expected: Any  # the value found there
    context: tuple[tuple[str, Any], ...] = ()  # other settings the knob needs

    @property
    def native_path(self) -> tuple[str, ...]:
        return self.at

    def without_value(self) -> Knob:
        """The same context with the knob left out (its default)."""
        return attrs.evolve(self, yaml="", value=None)


def _rank(field: str, yaml: str, value: Any, expected: Any = None, *,
          context: tuple[tuple[str, Any], ...] = (), sub: tuple[str, ...] = ()) -> Knob:
    return Knob(f"rank.{field}", f"{W}.{yaml}" if yaml.split(".")[0] != "engine" else yaml,
                value, RANK + (field,) + sub, value if expected is None else expected, context)


# A hybrid model's KV cache group (the reference runs groups with prefix caching off).
GROUP = {"name": "full", "kind": "attention", "num_layers": 2, "block_size_tokens": 16,
         "page_size_bytes": 1024}
# Prefix caching off and a capacity in bytes (two default blocks' worth without the groups).
GROUP_CONTEXT = ((f"{W}.kv_cache.prefix_caching", False),
                 (f"{W}.kv_cache.capacity", {"type": "fixed", "bytes": 2 * 64 * 131072}))


EXPOSED: tuple[Knob, ...] = (
    # --- rank --------------------------------------------------------------------------
    _rank("backend", "engine.backend", "sglang"),
    _rank("num_gpu_blocks", "kv_cache.capacity", {"type": "fixed", "blocks": 1234}, 1234),
    _rank("block_size", "kv_cache.block_size", 32),
    _rank("max_model_len", "engine.context_length", 4096),
    _rank("max_num_seqs", "scheduler.max_sequences", 64),
    _rank("max_num_batched_tokens", "scheduler.max_batched_tokens", 4096),
    _rank("prefill_schedule_interval", "scheduler.prefill_schedule_interval", 2),
    _rank("prefill_decode_interval", "scheduler.sglang.prefill_decode_interval", 3,
          context=(("engine.backend", "sglang"),)),
    _rank("enable_prefix_caching", "kv_cache.prefix_caching", False),
    _rank("enable_chunked_prefill", "scheduler.chunked_prefill", False),
    _rank("speedup_ratio", "timing.speedup_ratio", 2.0),
    _rank("decode_speedup_ratio", "timing.decode_speedup_ratio", 1.5),
    _rank("preemption_mode", "scheduler.preemption_mode", "fifo"),
    _rank("aic_nextn", "speculation", MTP, 2),
    _rank("aic_nextn_accept_rates", "speculation", MTP, "0.8,0.6"),
    _rank("aic_mtp_seed", "speculation", {**MTP, "seed": 7}, 7),
    _rank("kv_cache_bytes_per_token", "kv_cache.bytes_per_token", 4096),
    _rank("timing_model", "timing", {"type": "fixed", "prefill_ms": 20, "decode_ms": 5},
          {"type": "fixed", "prefill_ms": 20.0, "decode_ms": 5.0}),
    _rank("native_host_offload", "kv_cache.host_offload", {"num_host_blocks": 100}, 100,
          sub=("num_host_blocks",)),
    _rank("g3_offload", "kv_cache.g3_offload", {"scope": "worker_local", "num_g3_blocks": 10},
          10, sub=("num_g3_blocks",), context=((f"{W}.kv_cache.host_offload",
                                               {"num_host_blocks": 100}),)),
    _rank("state_cache", "kv_cache.state_cache", {"bytes_per_request": 4096}),
    _rank("prefix_match_unit", "kv_cache.prefix_match_unit", 2,
          context=((f"{W}.kv_cache.state_cache", {"bytes_per_request": 4096}),)),
    _rank("kv_cache_groups", "kv_cache.groups", [GROUP], [{**GROUP, "sliding_window": None}],
          context=GROUP_CONTEXT),
    _rank("kv_cache_capacity_bytes", "kv_cache.capacity.bytes", 4096,
          context=(*GROUP_CONTEXT, (f"{W}.kv_cache.groups", [GROUP]))),
    Knob("rank.kv_transfer_bytes_per_token", "engine.kv_transfer.bytes_per_token", 1000,
         PD_RANK + ("kv_transfer_bytes_per_token",), 1000, PD),
    Knob("rank.kv_transfer_bandwidth", "engine.kv_transfer.bandwidth_gb_per_second", 25,
         PD_RANK + ("kv_transfer_bandwidth",), 25.0, PD),
    Knob("rank.kv_transfer_timing_mode", "engine.kv_transfer.timing_mode", "full_prompt",
         PD_RANK + ("kv_transfer_timing_mode",), "full_prompt",
         PD + (("engine.kv_transfer.bytes_per_token", 1000),)),
    # --- rank.sglang / rank.trtllm -----------------------------------------------------
    *(Knob(f"rank.sglang.{f}", f"{W}.scheduler.sglang.{f}", v, RANK + ("sglang", f), e,
           (("engine.backend", "sglang"),))
      for f, v, e in (("schedule_policy", "lpm", "lpm"), ("max_prefill_tokens", 4096, 4096),
                      ("chunked_prefill_size", 2048, 2048), ("clip_max_new_tokens", 1024, 1024),
                      ("schedule_conservativeness", 0.5, 0.5))),
    Knob("rank.trtllm.capacity_scheduler_policy", f"{W}.scheduler.trtllm.capacity_scheduler_policy",
         "guaranteed_no_evict", RANK + ("trtllm", "capacity_scheduler_policy"),
         "guaranteed_no_evict"),
    # --- role --------------------------------------------------------------------------
    Knob("role.dp_size", f"{W}.parallelism.attention_data", 2, ROLE + ("dp_size",), 2),
    Knob("role.tensor_parallel_size", f"{W}.parallelism.tensor", 2,
         ROLE + ("tensor_parallel_size",), 2),
    Knob("role.num_gpu_blocks_is_explicit", f"{W}.kv_cache.capacity",
         {"type": "fixed", "blocks": 1234}, ROLE + ("num_gpu_blocks_is_explicit",), True),
    Knob("role.startup_time", f"{W}.startup_seconds", 30, ROLE + ("startup_seconds",), 30.0),
    # --- router ------------------------------------------------------------------------
    Knob("router.host_cache_hit_weight", "router.host_cache_hit_weight", 0.5,
         PLACEMENT + ("host_cache_hit_weight",), 0.5, KV_ROUTER),
    Knob("router.router_temperature", "router.temperature", 0.5,
         PLACEMENT + ("temperature",), 0.5, KV_ROUTER),
    Knob("router.overlap_score_credit", "router.overlap_score_credit", 0.5,
         PLACEMENT + ("overlap_score_credit",), 0.5, KV_ROUTER),
    Knob("router.prefill_load_scale", "router.prefill_load_scale", 2.0,
         PLACEMENT + ("prefill_load_scale",), 2.0, KV_ROUTER),
    Knob("router.overlap_score_credit_decay", "router.overlap_score_credit_decay", 2.0,
         PLACEMENT + ("overlap_score_credit_decay",), 2.0, KV_ROUTER),
    Knob("router.decode_active_request_weight", "router.decode_active_request_weight", 1.5,
         PLACEMENT + ("decode_active_request_weight",), 1.5, KV_ROUTER),
    Knob("router.disk_cache_hit_weight", "router.disk_cache_hit_weight", 0.5,
         PLACEMENT + ("disk_cache_hit_weight",), 0.5, KV_ROUTER),
    Knob("router.router_queue_threshold", "router.queue_threshold", 0.5,
         PLACEMENT + ("queue_threshold",), 0.5, KV_ROUTER),
    Knob("router.router_queue_policy", "router.queue_policy", "wspt",
         PLACEMENT + ("queue_policy",), "wspt", KV_ROUTER),
    # --- replay ------------------------------------------------------------------------
    Knob("replay.router_mode", "router.policy", "kv_router",
         ("spec", "adapters", "placement", "provider"), "kv_router"),
    Knob("replay.kv_event_lag_ms", "router.kv_event_lag_ms", 5,
         PLACEMENT + ("kv_event_lag_ms",), 5.0, KV_ROUTER),
    Knob("replay.num_workers", f"{W}.parallelism.replicas", 3,
         ("spec", "topology", "workers", "initial_workers"), 3),
    Knob("replay.num_prefill_workers", "engine.workers.prefill.parallelism.replicas", 3,
         ("spec", "topology", "prefill", "initial_workers"), 3, PD),
    Knob("replay.num_decode_workers", "engine.workers.decode.parallelism.replicas", 3,
         ("spec", "topology", "decode", "initial_workers"), 3, PD),
    Knob("replay.extra_engine_args", f"{W}.scheduler.max_sequences", 64,
         RANK + ("max_num_seqs",), 64),
    Knob("replay.prefill_engine_args", "engine.workers.prefill.scheduler.max_sequences", 64,
         PD_RANK + ("max_num_seqs",), 64, PD),
    Knob("replay.decode_engine_args", "engine.workers.decode.scheduler.max_sequences", 64,
         ("spec", "engine", "decode", "rank", "max_num_seqs"), 64, PD),
    Knob("replay.replay_concurrency", "traffic.load", {"type": "concurrency", "concurrency": 7},
         ("traffic", "concurrency"), 7),
    Knob("replay.arrival_speedup_ratio", "traffic.load.speedup", 2.0, ("traffic", "speedup"),
         2.0, TRACE),
    Knob("replay.trace_format", "traffic.source.format", "mooncake-delta",
         ("traffic", "trace_format"), "mooncake-delta", TRACE),
    Knob("replay.trace_block_size", "traffic.source.block_size", 64,
         ("traffic", "trace_block_size"), 64, TRACE),
    Knob("replay.weka_nested_timestamp_basis", "traffic.source",
         {"type": "trace", "format": "weka", "paths": ["t.jsonl"],
          "nested_timestamp_basis": "relative"},
         ("traffic", "weka_nested_timestamp_basis"), "relative",
         (("traffic.load", {"type": "trace_timestamps"}),)),
    Knob("replay.trace_shared_prefix_ratio", "traffic.source.shared_prefix_ratio", 0.5,
         ("traffic", "shared_prefix_ratio"), 0.5,
         (("traffic.source.prefix_groups", 2),)),
    Knob("replay.trace_num_prefix_groups", "traffic.source.prefix_groups", 4,
         ("traffic", "num_prefix_groups"), 4, (("traffic.source.shared_prefix_ratio", 0.5),)),
    Knob("replay.agentic_lanes", "traffic.load.agentic_lanes", 2, ("traffic", "agentic_lanes"),
         2, (("traffic.source", {"type": "trace", "format": "weka", "paths": ["t.jsonl"]}),
             ("traffic.load", {"type": "trace_timestamps"}))),
    Knob("replay.max_sim_time_ms", "traffic.stop.max_virtual_time_seconds", 2,
         ("spec", "max_sim_time_ms"), 2000.0),
    Knob("replay.model_name", "engine.model", "Qwen/Qwen3-0.6B", ("spec", "model"),
         "Qwen/Qwen3-0.6B"),
    Knob("replay.sla_ttft_ms", "evaluation.sla.ttft_ms", 200, ("spec", "sla", "ttft_ms"), 200.0),
    Knob("replay.sla_itl_ms", "evaluation.sla.itl_ms", 20, ("spec", "sla", "itl_ms"), 20.0),
    Knob("replay.sla_e2e_ms", "evaluation.sla.e2e_ms", 900, ("spec", "sla", "e2e_ms"), 900.0),
    Knob("replay.capture_per_request", "report.per_request", "summary-only",
         ("spec", "record_per_request"), False),
    # TelemetryOptions(sample_interval_ms=...): samples on a cadence of simulated time
    Knob("replay.telemetry_options", "report.telemetry", {"sample_interval_ms": 250},
         ("spec", "telemetry", "sample_interval_ms"), 250.0),
    Knob("replay.execution_model", "engine.model", "Qwen/Qwen3-0.6B", ("spec", "model"),
         "Qwen/Qwen3-0.6B"),
    # --- synthetic replay (the Dynamo API's run_synthetic_trace_replay) -----------------
    Knob("synthetic.input_tokens", "traffic.source.input_tokens", 300,
         ("traffic", "input_tokens"), 300),
    Knob("synthetic.output_tokens", "traffic.source.output_tokens", 30,
         ("traffic", "output_tokens"), 30),
    Knob("synthetic.request_count", "traffic.stop.requests", 9, ("traffic", "stop_requests"), 9),
    Knob("synthetic.request_rate", "traffic.load", {"type": "poisson", "requests_per_second": 5},
         ("traffic", "request_rate"), 5.0),
    Knob("synthetic.arrival_interval_ms", "traffic.load",
         {"type": "constant_rate", "requests_per_second": 50}, ("traffic", "load_type"),
         "constant_rate"),
    Knob("synthetic.arrival_seed", "traffic.load",
         {"type": "poisson", "requests_per_second": 5, "seed": 7}, ("traffic", "arrival_seed"), 7),
    Knob("synthetic.turns_per_session", "traffic.source.session.turns", 3,
         ("traffic", "turns_per_session"), 3, SESSION),
    Knob("synthetic.shared_prefix_ratio", "traffic.source.session.shared_prefix_ratio", 0.5,
         ("traffic", "shared_prefix_ratio"), 0.5,
         SESSION + (("traffic.source.session.prefix_groups", 2),)),
    Knob("synthetic.num_prefix_groups", "traffic.source.session.prefix_groups", 2,
         ("traffic", "num_prefix_groups"), 2,
         SESSION + (("traffic.source.session.shared_prefix_ratio", 0.5),)),
    Knob("synthetic.inter_turn_delay_ms", "traffic.source.session.inter_turn_delay_ms", 4,
         ("traffic", "inter_turn_delay_ms"), 4.0, SESSION),
    Knob("replay.planner_config", "scaling", {"policy": "planner", "config": {"a": 1}},
         ("spec", "adapters", "scaling", "config"), {"a": 1}),
)

_LIVE = ("live-deployment plumbing of a Dynamo frontend (ports, threads, indexer services, "
         "hashing keys); an offline replay has no such process and results do not depend on it")
_MEMORY = ("sizes G1 from a GPU memory fraction, which needs device memory and weight sizes "
           "from a hardware profile; kvreplay sizes G1 as blocks or bytes "
           "(`kv_cache.capacity`), the quantity these fractions compute")

_APPROX = ("approximate routing without KV events (the router guesses cached blocks from its own "
           "decisions with a TTL); the bundled engine routes on the workers' KV events, with "
           "`kv_event_lag_ms` for their delay, and has no approximate mode yet")
_TRACKING = ("which loads the router books is fixed per pool by the reference's replay (prefill "
             "tokens and active blocks on aggregated and prefill pools, blocks only on decode); "
             "the bundled engine applies the same fixed choice and does not make it a setting")
_POLICY = ("pluggable per-phase routing policies of a live Dynamo router; the replay routes with "
           "the KV cost above (or round robin), which `router.policy` selects")
_CONDITIONAL = ("conditional disaggregation (skipping the prefill pool for short prompts) is a "
                "topology decision the bundled engine does not model; the support matrix has no "
                "row for it")
_SHARED_CACHE = ("session-prefix indexing and shared-cache scoring of a live router; the replay's "
                 "shared host pool is modelled in the engine (G2 `cluster_shared`) and credited "
                 "through `host_cache_hit_weight`")
_PLANNER = ("an input of the planner's scaling replay; the bundled engine runs static pools "
            "(scaling is refused at run time) and `scaling.config` passes planner settings "
            "through to native engines")

NOT_EXPOSED: dict[str, str] = {
    "rank.worker_type": "written from the role the rank belongs to (aggregated, prefill, "
                        "decode); not a setting of its own",
    "rank.emit_kv_events": "publishes KV events to a live router over ZMQ; the replay's router "
                           "reads the engine's events in process whatever its value",
    "rank.emit_kv_token_ids": "adds token ids to published KV events (needs emit_kv_events); "
                              "no effect on an offline replay",
    "rank.kv_bytes_per_token": "a legacy alias the reference normalizer drops (it normalizes to "
                               "null); `kv_cache.bytes_per_token` writes kv_cache_bytes_per_token",
    "rank.sglang": "a block, exposed field by field as `scheduler.sglang.*`",
    "rank.trtllm": "a block, exposed field by field as `scheduler.trtllm.*`",
    "role.gpu_memory_utilization": _MEMORY,
    "role.mem_fraction_static": _MEMORY,
    "role.free_gpu_memory_fraction": _MEMORY,
    "role.cuda_graph_reserved_bytes": _MEMORY,
    "role.dynamo": _LIVE,
    "router.use_remote_indexer": _LIVE,
    "router.serve_indexer": _LIVE,
    "router.router_event_threads": _LIVE,
    "router.router_replica_sync": _LIVE,
    "router.router_tracking_hash": _LIVE,
    "router.router_tracking_key_file": _LIVE,
    "router.router_tracking_key_id": _LIVE,
    "router.durable_kv_events": _LIVE,
    "router.router_snapshot_threshold": _LIVE,
    "router.router_reset_states": _LIVE,
    "router.skip_initial_worker_wait": _LIVE,
    "router.overlap_score_weight": "a deprecated alias of prefill_load_scale (it overrides "
                                   "it, and 0 also zeroes the overlap credit); use "
                                   "`router.prefill_load_scale` and `overlap_score_credit`",
    "router.use_kv_events": _APPROX,
    "router.router_ttl_secs": _APPROX,
    "router.router_approximate_cache_policy": _APPROX,
    "router.router_predicted_ttl_secs": _APPROX,
    "router.router_track_active_blocks": _TRACKING,
    "router.router_track_output_blocks": _TRACKING,
    "router.router_assume_kv_reuse": _TRACKING,
    "router.router_track_prefill_tokens": _TRACKING,
    "router.router_prefill_load_model": _TRACKING,
    "router.router_policy_config": _POLICY,
    "router.router_prefill_policy": _POLICY,
    "router.router_decode_policy": _POLICY,
    "router.conditional_disagg_enabled": _CONDITIONAL,
    "router.conditional_disagg_policy": _CONDITIONAL,
    "router.conditional_disagg_eff_isl_threshold": _CONDITIONAL,
    "router.conditional_disagg_eff_isl_ratio_threshold": _CONDITIONAL,
    "router.conditional_disagg_prefill_busy_threshold": _CONDITIONAL,
    "router.conditional_disagg_decode_busy_threshold": _CONDITIONAL,
    "router.enable_session_prefix_index": _SHARED_CACHE,
    "router.shared_cache_multiplier": _SHARED_CACHE,
    "router.shared_cache_type": _SHARED_CACHE,
    "replay.router_config": "the KV router config object; its fields are the `router.*` rows",
    "replay.report_jsonl_path": "an output location; `kvreplay run -o` writes the report",
    "replay.capture_planner_details": "planner diagnostics of a scaling run; the bundled engine "
                                      "runs static pools (scaling is refused at run time)",
    "replay.replay_mode": "`offline` is what kvreplay replays; the online mode drives a live "
                          "frontend in wall-clock time",
    "replay.ais_perf_config": "timing from the AIConfigurator performance database, which "
                              "kvreplay does not ship; `timing` is `polynomial` or `fixed` "
                              "(config.md, deliberate differences)",
    "replay.performance_model_metadata": _PLANNER,
    "replay.benchmark_granularity": _PLANNER,
}


def render() -> str:
    """The two tables as Markdown: native knob -> YAML path, and what is not exposed."""
    lines = ["| native knob | YAML path |", "| --- | --- |"]
    seen: set[str] = set()
    for knob in EXPOSED:
        if knob.native not in seen:
            seen.add(knob.native)
            lines.append(f"| `{knob.native}` | `{knob.yaml}` |")
    lines += ["", "| native knob | not exposed because |", "| --- | --- |"]
    lines += [f"| `{name}` | {reason} |" for name, reason in sorted(NOT_EXPOSED.items())]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render(), end="")
