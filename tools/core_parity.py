"""The compiled engine core against the Python sources, report by report.

    python tools/core_parity.py [--kinds agg,pd,...] [--cases N] [--seed S]

Replays N scenarios per kind (tests/differential/harness.py, seeds S..S+N-1; no reference
needed) twice, in two child processes: one with the compiled core (engine/compiled.py; it must
be built and current), one with KVREPLAY_PURE_PYTHON=1, and compares the sha256 of each
canonical report (or the error a run raised, by type and message). Prints one line per kind
(cases, same, different) and exits 1 on any difference.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "differential"))


def digests(kinds: list[str], seeds: range) -> dict[str, str]:
    """In this process: "kind/seed" -> the report's sha256, or the error raised."""
    import hashlib

    import harness

    from kvreplay.engine.report import dumps_report

    found = {}
    for kind in kinds:
        for seed in seeds:
            try:
                report = harness.run_kvreplay(harness.generate(kind, seed))
                found[f"{kind}/{seed}"] = hashlib.sha256(
                    dumps_report(report).encode()).hexdigest()
            except Exception as error:  # compared as it is: both sides must raise alike
                found[f"{kind}/{seed}"] = f"{type(error).__name__}: {error}"
    return found


def child_digests(kinds: list[str], seeds: range, pure: bool) -> dict[str, str]:
    """digests() in a child process, compiled core or (pure) the Python sources; checks that
    the child ran the core it was meant to."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import core_parity; "
            "from kvreplay.engine import compiled; "
            "print(json.dumps([compiled.active(), core_parity.digests(sys.argv[2].split(','), "
            "range(int(sys.argv[3]), int(sys.argv[4])))]))")
    env = {**os.environ, "DYN_LOG": "error"}
    env.pop("KVREPLAY_PURE_PYTHON", None)
    env.pop("KVREPLAY_PURE_CORE", None)
    if pure:
        env["KVREPLAY_PURE_PYTHON"] = "1"
    done = subprocess.run([sys.executable, "-c", code, str(REPO / "tools"), ",".join(kinds),
                           str(seeds.start), str(seeds.stop)], capture_output=True, text=True,
                          env=env, check=True, cwd=REPO)
    active, found = json.loads(done.stdout.strip().splitlines()[-1])
    if active == pure:
        raise SystemExit("core_parity: the compiled core is not built and current here "
                         "(pip install -e . with mypy importable; engine/compiled.py)"
                         if not pure else "core_parity: KVREPLAY_PURE_PYTHON was not obeyed")
    return dict(found)


def main() -> int:
    import harness

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kinds", default=",".join(harness.KINDS))
    parser.add_argument("--cases", type=int, default=20, help="scenarios per kind")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    args = parser.parse_args()
    kinds, seeds = args.kinds.split(","), range(args.seed, args.seed + args.cases)
    compiled, pure = child_digests(kinds, seeds, False), child_digests(kinds, seeds, True)
    differ = 0
    for kind in kinds:
        keys = [f"{kind}/{seed}" for seed in seeds]
        bad = [k for k in keys if compiled[k] != pure[k]]
        differ += len(bad)
        print(f"{kind:<16} cases {len(keys):>5}  same {len(keys) - len(bad):>5}  "
              f"different {len(bad):>3}" + (f"  e.g. {bad[0]}" if bad else ""))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
