"""From the native `traffic` section to a Workload, refusing (with diagnostics) anything invalid.

`check_traffic` runs every check, including one full pass over trace files, and returns the
diagnostics; `workload_from_traffic` does the same and returns the workload, or raises
WorkloadError when any diagnostic is an error.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from kvreplay.engine.traces.errors import WorkloadError
from kvreplay.engine.traces.mooncake_scan import scan_mooncake
from kvreplay.engine.traces.mooncake_workload import MooncakeWorkload
from kvreplay.engine.traces.rules import diag
from kvreplay.engine.traces.synthetic import Arrivals, SyntheticWorkload
from kvreplay.schema.diagnostics import Diagnostic, Severity, sort_unique

TRACE_FORMATS = ("mooncake", "mooncake-delta", "weka", "agentic_mooncake", "dynamo",
                 "applied_compute_agentic")
AGENTIC_FORMATS = ("weka", "agentic_mooncake")
# Read by their own readers and replayed as Mooncake rows (or, agentic Dynamo traces, a graph).
CONVERTED_FORMATS = ("dynamo", "applied_compute_agentic")
DEFAULT_ARRIVAL_SEED = 42

if TYPE_CHECKING:  # the agentic modules load only for agentic traffic
    from kvreplay.engine.agentic.driver import AgenticWorkload
    from kvreplay.engine.agentic.profile import ProfileOptions
    from kvreplay.engine.traces.agentic.graph import AgenticGraph

    _AnyWorkload = MooncakeWorkload | SyntheticWorkload | AgenticWorkload


class _Fields:
    """Typed reads of traffic keys; each problem becomes a WORKLOAD-* diagnostic."""

    def __init__(self, traffic: Mapping[str, Any], file: str | None) -> None:
        self.traffic = traffic
        self.file = file
        self.found: list[Diagnostic] = []

    def error(self, rule: str, key: str, message: str, *, severity: Severity = "error",
              hint: str | None = None) -> None:
        self.found.append(diag(rule, message, file=self.file, path=f"$.traffic.{key}",
                               severity=severity, hint=hint))

    def integer(self, key: str, low: int, high: int | None = None, *,
                required: str | None = None) -> int | None:
        value = self.traffic.get(key)
        if value is None:
            if required is not None:
                self.error(rule_of(key), key, f"`{key}` is required {required}")
            return None
        if type(value) is not int or value < low or (high is not None and value > high):
            bound = f"{low}..{high}" if high is not None else f">= {low}"
            self.error("WORKLOAD-VALUE", key, f"`{key}` must be an integer {bound}, found "
                       f"{value!r}")
            return None
        return value

    def number(self, key: str, low: float, high: float, *, positive: bool = False,
               required: str | None = None) -> float | None:
        value = self.traffic.get(key)
        if value is None:
            if required is not None:
                self.error(rule_of(key), key, f"`{key}` is required {required}")
            return None
        if type(value) not in (int, float) or not math.isfinite(value) \
                or not low <= value <= high or (positive and value <= 0):
            bound = f"in ({low:g}, {high:g}]" if positive else f"in [{low:g}, {high:g}]"
            self.error("WORKLOAD-VALUE", key, f"`{key}` must be a finite number {bound}, found "
                       f"{value!r}")
            return None
        return float(value)

    def ignored(self, key: str, why: str) -> None:
        if self.traffic.get(key) is not None:
            self.error("WORKLOAD-IGNORED", key, f"`{key}` is ignored {why}", severity="warning")


def rule_of(key: str) -> str:
    if key.startswith("stop_"):
        return "WORKLOAD-STOP"
    if key in ("concurrency", "request_rate", "load_type"):
        return "WORKLOAD-LOAD"
    return "WORKLOAD-VALUE"


def _paths(traffic: Mapping[str, Any], base_dir: str,
           trace_paths: Sequence[str] | None) -> list[tuple[str, str]]:
    """(filesystem path, display path) of each trace file."""
    if trace_paths is not None:
        return [(p, p) for p in trace_paths]
    given = traffic.get("trace_paths") or []
    return [(os.path.join(base_dir, p), os.path.normpath(os.path.join(base_dir, p)))
            if isinstance(p, str) else (str(p), str(p)) for p in given]


def _load(traffic: Mapping[str, Any], *, base_dir: str, trace_paths: Sequence[str] | None,
          block_size: int | None, source_file: str | None, build: bool,
          model: str | None = None) -> tuple[_AnyWorkload | None, list[Diagnostic]]:
    """The traffic's workload (None with build=False or on errors) and its diagnostics: a bulk
    load (every row read, checked and indexed lives on, no reference cycles), so without the
    cycle collector."""
    from kvreplay.engine.collect import no_collections

    with no_collections():
        return _load_traffic(traffic, base_dir=base_dir, trace_paths=trace_paths,
                             block_size=block_size, source_file=source_file, build=build,
                             model=model)


def _load_traffic(traffic: Mapping[str, Any], *, base_dir: str,
                  trace_paths: Sequence[str] | None, block_size: int | None,
                  source_file: str | None, build: bool,
                  model: str | None) -> tuple[_AnyWorkload | None, list[Diagnostic]]:
    f = _Fields(traffic, source_file)
    source = traffic.get("source_type")
    workload: _AnyWorkload | None
    if source == "trace" and traffic.get("trace_format") in AGENTIC_FORMATS:
        workload = _agentic(f, traffic, base_dir=base_dir, trace_paths=trace_paths, model=model,
                            engine_block_size=block_size)
    elif source == "trace" and traffic.get("trace_format") in CONVERTED_FORMATS:
        from kvreplay.engine.traces.converted import converted_workload

        workload = converted_workload(f, traffic, base_dir=base_dir, trace_paths=trace_paths,
                                      model=model, engine_block_size=block_size)
    elif source == "trace":
        workload = _trace(f, traffic, base_dir=base_dir, trace_paths=trace_paths)
    elif source in ("synthetic", "synthetic-session"):
        workload = _synthetic(f, traffic, session=source == "synthetic-session",
                              block_size=block_size)
    else:
        f.error("WORKLOAD-SOURCE", "source_type", f"`source_type` must be trace, synthetic or "
                f"synthetic-session, found {source!r}")
        workload = None
    errors = any(d.severity == "error" for d in f.found)
    if isinstance(workload, MooncakeWorkload) and (errors or not build):
        workload.close()
    return (None if errors or not build else workload), sort_unique(f.found)


def _trace(f: _Fields, traffic: Mapping[str, Any], *, base_dir: str,
           trace_paths: Sequence[str] | None) -> MooncakeWorkload | None:
    fmt = traffic.get("trace_format")
    if fmt not in TRACE_FORMATS:
        f.error("TRACE-FORMAT", "trace_format", f"trace format {fmt!r} is not read by the bundled "
                f"workload readers (they read {', '.join(TRACE_FORMATS)})")
        return None
    load = traffic.get("load_type")
    if load not in ("trace_timestamps", "concurrency"):
        f.error("WORKLOAD-LOAD", "load_type", f"trace traffic needs load_type trace_timestamps or "
                f"concurrency, found {load!r}")
        return None
    block_size = f.integer("trace_block_size", 1, 1 << 20,
                           required="for mooncake traces (tokens per hash id)")
    concurrency = None
    speedup = 1.0
    if load == "concurrency":
        concurrency = f.integer("concurrency", 1, required="with concurrency load")
        f.ignored("speedup", "with concurrency load (recorded gaps are kept)")
    else:
        speedup = f.number("speedup", 0.0, 1e9, positive=True) or 1.0
        f.ignored("concurrency", "with trace_timestamps load")
    stop_requests = f.integer("stop_requests", 1)
    stop_sessions = f.integer("stop_sessions", 1)
    for key in ("shared_prefix_ratio", "num_prefix_groups"):
        f.ignored(key, f"with {fmt} traces (their rows name their own blocks)")
    paths = _paths(traffic, base_dir, trace_paths)
    if len(paths) != 1:
        f.error("TRACE-PATH", "trace_paths", f"{fmt} traffic needs exactly one trace path, found "
                f"{len(paths)}")
        return None
    if block_size is None or any(d.severity == "error" for d in f.found):
        return None
    path, display = paths[0]
    index, found = scan_mooncake(path, display, block_size=block_size,
                                 timestamps=load == "trace_timestamps", speedup=speedup,
                                 stop_requests=stop_requests, stop_sessions=stop_sessions)
    f.found.extend(found)
    if index is None:
        return None
    return MooncakeWorkload(index, block_size=block_size, delta=fmt == "mooncake-delta",
                            concurrency=concurrency, speedup=speedup)


class _AgenticOptions(NamedTuple):
    lanes: int | None
    speedup: float
    block_size: int | None
    basis: Any  # weka_nested_timestamp_basis (checked for weka traces)
    seed: int | None
    warmup: bool
    profile: ProfileOptions | None


def _agentic(f: _Fields, traffic: Mapping[str, Any], *, base_dir: str,
             trace_paths: Sequence[str] | None, model: str | None,
             engine_block_size: int | None) -> AgenticWorkload | None:
    """Weka plays or an Agentic Mooncake v2 file, lowered to a graph and executed by lanes."""
    from kvreplay.engine.traces.agentic.v2 import read_agentic_mooncake
    from kvreplay.engine.traces.agentic.weka import read_weka

    fmt = traffic.get("trace_format")
    options = _agentic_options(f, traffic, fmt)
    paths = _paths(traffic, base_dir, trace_paths)
    if len(paths) != 1:
        f.error("TRACE-PATH", "trace_paths", f"{fmt} traffic needs exactly one trace path (a "
                f"file or, for weka, a directory), found {len(paths)}")
        return None
    if any(d.severity == "error" for d in f.found):
        return None
    path, display = paths[0]
    if fmt == "weka":
        graph, found = read_weka(path, display, basis=str(options.basis),
                                 expected_block_size=options.block_size)
    else:
        graph, found = read_agentic_mooncake(path, display, legacy_block_size=options.block_size)
    f.found.extend(found)
    if graph is None:
        return None
    return agentic_workload(f, graph, options, display, model=model,
                            engine_block_size=engine_block_size)


def agentic_workload(f: _Fields, graph: AgenticGraph, options: _AgenticOptions, display: str, *,
                     model: str | None, engine_block_size: int | None) -> AgenticWorkload | None:
    """The workload of a read agentic graph, with its load controls."""
    graph.normalize_starts()
    from kvreplay.engine.agentic.driver import AgenticWorkload
    from kvreplay.engine.agentic.snapshot import SnapshotError

    try:
        return AgenticWorkload(graph, lanes=options.lanes, target_model=model or "model",
                               speedup=options.speedup, snapshot_seed=options.seed,
                               warmup=options.warmup, profile=options.profile,
                               engine_block_size=engine_block_size or graph.header.block_size)
    except SnapshotError as exc:
        f.error("WORKLOAD-VALUE", "agentic_snapshot_seed", f"agentic snapshot of {display}: {exc}")
        return None


def _agentic_options(f: _Fields, traffic: Mapping[str, Any], fmt: Any) -> _AgenticOptions:
    """The agentic load controls, each bad one an error (and what agentic traces ignore)."""
    from kvreplay.engine.traces.agentic.weka import BASES

    load = traffic.get("load_type")
    if load != "trace_timestamps":
        f.error("WORKLOAD-LOAD", "load_type", f"agentic traces replay their own dependency "
                f"timing: load_type must be trace_timestamps, found {load!r}",
                hint="agentic_lanes sets how many plays run at once")
    lanes = f.integer("agentic_lanes", 1, 1_000_000)
    speedup = f.number("speedup", 0.0, 1e9, positive=True) or 1.0
    block_size = f.integer("trace_block_size", 1, 1 << 20)
    basis = traffic.get("weka_nested_timestamp_basis")
    if fmt == "weka":
        if basis is None:
            basis = "auto"
        elif basis not in BASES:
            f.error("WORKLOAD-VALUE", "weka_nested_timestamp_basis", "`weka_nested_timestamp_"
                    f"basis` must be auto, absolute or relative, found {basis!r}")
    else:
        f.ignored("weka_nested_timestamp_basis", "with agentic_mooncake traces")
    for key in ("concurrency", "stop_requests", "stop_sessions"):
        f.ignored(key, "with agentic traces (plays run to their end)")
    seed = f.integer("agentic_snapshot_seed", 0, (1 << 64) - 1)
    warmup = traffic.get("agentic_warmup", False)
    if not isinstance(warmup, bool):
        f.error("WORKLOAD-VALUE", "agentic_warmup", f"`agentic_warmup` must be true or false, "
                f"found {warmup!r}")
        warmup = False
    profile = _profile_options(f, traffic.get("agentic_profile"))
    if seed is not None and lanes is None:
        f.error("WORKLOAD-VALUE", "agentic_snapshot_seed", "an agentic snapshot needs "
                "`agentic_lanes` (one snapshot play per lane)")
    if (warmup or profile is not None) and seed is None:
        key = "agentic_warmup" if warmup else "agentic_profile"
        f.error("WORKLOAD-VALUE", key, f"`{key}` needs an agentic snapshot "
                "(`agentic_snapshot_seed`) and `agentic_lanes`")
    return _AgenticOptions(lanes, speedup, block_size, basis, seed, warmup, profile)


_PROFILE_KEYS = {"duration_seconds": True, "response_grace_seconds": False,
                 "cancel_drain_seconds": False, "tree_idle_cap_seconds": True,
                 "global_idle_cap_seconds": True}  # key -> must be positive


def _profile_options(f: _Fields, raw: Any) -> ProfileOptions | None:
    """`agentic_profile` ({} = every default); each bad value is a WORKLOAD-VALUE error."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        f.error("WORKLOAD-VALUE", "agentic_profile", f"`agentic_profile` must be an object, "
                f"found {raw!r}")
        return None
    values: dict[str, float] = {}
    for key, value in raw.items():
        if key not in _PROFILE_KEYS:
            f.error("WORKLOAD-VALUE", f"agentic_profile.{key}", f"unknown `agentic_profile` key "
                    f"`{key}`")
            continue
        if value is None:
            continue
        positive = _PROFILE_KEYS[key]
        if type(value) not in (int, float) or not math.isfinite(value) or value < 0 \
                or (positive and value == 0) or value > 1e15:
            bound = "> 0" if positive else ">= 0"
            f.error("WORKLOAD-VALUE", f"agentic_profile.{key}", f"`agentic_profile.{key}` must "
                    f"be a finite number {bound} (seconds), found {value!r}")
            continue
        values[key] = float(value)
    from kvreplay.engine.agentic.profile import ProfileOptions

    return ProfileOptions(**values)


def _synthetic(f: _Fields, traffic: Mapping[str, Any], *, session: bool,
               block_size: int | None) -> SyntheticWorkload | None:
    input_tokens = f.integer("input_tokens", 1, 10_000_000, required="for synthetic traffic")
    output_tokens = f.integer("output_tokens", 0, 10_000_000, required="for synthetic traffic")
    load = traffic.get("load_type")
    concurrency: int | None = None
    arrivals: Arrivals | None = None
    if load == "concurrency":
        concurrency = f.integer("concurrency", 1, required="with concurrency load")
        f.ignored("request_rate", "with concurrency load")
    elif load in ("constant_rate", "poisson"):
        rate = f.number("request_rate", 0.0, 1e9, positive=True, required=f"with {load} load")
        seed = DEFAULT_ARRIVAL_SEED
        if load == "poisson":
            given = f.integer("arrival_seed", 0, (1 << 64) - 1)
            seed = DEFAULT_ARRIVAL_SEED if given is None else given
        else:
            f.ignored("arrival_seed", "without poisson load")
        if rate is not None:
            arrivals = Arrivals(load, rate, seed)
    else:
        f.error("WORKLOAD-LOAD", "load_type", f"synthetic traffic needs load_type concurrency, "
                f"constant_rate or poisson, found {load!r}")
    f.ignored("speedup", "with synthetic traffic")
    ratio = f.number("shared_prefix_ratio", 0.0, 1.0) or 0.0
    groups = f.integer("num_prefix_groups", 0, (1 << 32) - 1) or 0
    if ratio > 0.0 and groups == 0:
        f.error("WORKLOAD-VALUE", "num_prefix_groups",
                "`num_prefix_groups` must be positive when shared_prefix_ratio is positive")
    if session:
        turns = f.integer("turns_per_session", 1, 100_000,
                          required="for synthetic-session traffic")
        delay = f.number("inter_turn_delay_ms", 0.0, 1e15) or 0.0
        count = f.integer("stop_sessions", 1, required="for synthetic-session traffic")
        f.ignored("cached_prefix_tokens", "with synthetic-session traffic")
        cached = 0
    else:
        turns, delay = 1, 0.0
        cached = f.integer("cached_prefix_tokens", 0, 10_000_000) or 0
        count = f.integer("stop_requests", 1, required="for synthetic traffic")
        if input_tokens is not None and cached > input_tokens:
            f.error("WORKLOAD-VALUE", "cached_prefix_tokens",
                    f"`cached_prefix_tokens` {cached} exceeds input_tokens {input_tokens}")
        if cached and ratio > 0.0 and groups:
            f.error("WORKLOAD-VALUE", "shared_prefix_ratio",
                    "give either `cached_prefix_tokens` (one prefix for every request) or "
                    "`shared_prefix_ratio` with `num_prefix_groups` (prefix families), not both")
    if any(d.severity == "error" for d in f.found):
        return None
    assert input_tokens is not None and output_tokens is not None and count is not None
    assert turns is not None
    return SyntheticWorkload(sessions=count, turns=turns, input_tokens=input_tokens,
                             output_tokens=output_tokens, cached_prefix_tokens=cached,
                             shared_prefix_ratio=ratio, num_prefix_groups=groups,
                             inter_turn_delay_ms=delay, block_size=block_size or 1,
                             concurrency=concurrency, arrivals=arrivals,
                             session_metadata=session)


def check_traffic(traffic: Mapping[str, Any], *, base_dir: str,
                  trace_paths: Sequence[str] | None = None, block_size: int | None = None,
                  source_file: str | None = None) -> list[Diagnostic]:
    """Every diagnostic of the traffic section and its trace files (every row is checked)."""
    _, found = _load(traffic, base_dir=base_dir, trace_paths=trace_paths,
                     block_size=block_size, source_file=source_file, build=False)
    return found


def workload_from_traffic(traffic: Mapping[str, Any], *, base_dir: str,
                          trace_paths: Sequence[str] | None = None, block_size: int | None = None,
                          source_file: str | None = None, model: str | None = None,
                          ) -> MooncakeWorkload | SyntheticWorkload | AgenticWorkload:
    """The workload of a native `traffic` section, checked first; raises WorkloadError.

    `base_dir` resolves `traffic.trace_paths` (the spec's folder); `trace_paths` replaces them
    (used as given, e.g. from `kvreplay run --trace`). `block_size` is the engine's KV block size,
    the unit of synthetic shared prefixes (None: one token). `source_file` is the spec path shown
    on WORKLOAD-* diagnostics. `model` is the spec's model (agentic plays are projected onto
    it). Warnings are kept on the workload as `.diagnostics`.
    """
    workload, found = _load(traffic, base_dir=base_dir, trace_paths=trace_paths,
                            block_size=block_size, source_file=source_file, build=True,
                            model=model)
    if workload is None:
        raise WorkloadError(found)
    workload.diagnostics = found
    return workload
