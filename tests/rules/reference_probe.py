"""Run by the reference engine's Python (not kvreplay's): native verdicts for rank descriptors.

stdin: {"ranks": [{"engine": RANK, "dp_size": N, "tensor_parallel_size": N}, ...],
        "pairs": [{"prefill": ARGS, "decode": ARGS}, ...], "trace": PATH}
stdout: {"ranks": [null | error message, ...], "pairs": [null | error message, ...]}
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("DYN_LOG", "error")

from dynamo._core import _normalize_mocker_config
from dynamo.replay import run_trace_replay


def rank_verdict(args: dict) -> str | None:
    try:
        _normalize_mocker_config(args)
    except Exception as exc:  # the native side raises ValueError with its message
        return str(exc)
    return None


def pair_verdict(pair: dict, trace: str) -> str | None:
    try:
        run_trace_replay([trace], prefill_engine_args=pair["prefill"],
                         decode_engine_args=pair["decode"], trace_block_size=512)
    except Exception as exc:
        return str(exc)
    return None


def main() -> None:
    request = json.load(sys.stdin)
    out = {
        "ranks": [rank_verdict(r) for r in request.get("ranks", [])],
        "pairs": [pair_verdict(p, request["trace"]) for p in request.get("pairs", [])],
    }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
