"""kvreplay.engine.traces: workloads from the native `traffic` section (trace files, synthetic)."""

from kvreplay.engine.traces.errors import WorkloadError
from kvreplay.engine.traces.mooncake_workload import MooncakeWorkload
from kvreplay.engine.traces.request import TraceRequest, Workload
from kvreplay.engine.traces.rules import RULES
from kvreplay.engine.traces.synthetic import SyntheticWorkload
from kvreplay.engine.traces.traffic import check_traffic, workload_from_traffic

__all__ = [
    "RULES",
    "MooncakeWorkload",
    "SyntheticWorkload",
    "TraceRequest",
    "Workload",
    "WorkloadError",
    "check_traffic",
    "workload_from_traffic",
]
