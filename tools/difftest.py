"""Differential testing against the reference engine, from the command line.

    python tools/difftest.py [--kinds agg,pd,...] [--cases N] [--seed S] [--shrink]
                             [--save DIR] [--json OUT] [--show N]

Draws N scenarios per kind (seeds S..S+N-1, tests/differential/harness.py), replays each on the
reference engine and on kvreplay, and prints one line per kind: cases, exact matches,
differences, scenarios the reference refuses, kvreplay errors (and, for the kinds compared
against the reference's spread, harness.SPREAD_KINDS, drawn only when named in --kinds: those
where no reference run placed the requests as kvreplay did). `--shrink` reduces each
mismatch to a minimal scenario; `--save DIR` writes them as JSON (with both engines' per-request
figures) to keep as regression cases; `--json OUT` writes the whole tally. Needs the reference
(tools/install-reference.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("DYN_LOG", "error")  # before the reference is imported
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "differential"))

import harness  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kinds", default=",".join(harness.KINDS))
    parser.add_argument("--cases", type=int, default=100, help="scenarios per kind")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--shrink", action="store_true", help="minimize each mismatch")
    parser.add_argument("--save", type=Path, help="folder for the (shrunk) mismatches")
    parser.add_argument("--json", type=Path, help="write the tally as JSON")
    parser.add_argument("--show", type=int, default=3, help="difference lines shown per case")
    args = parser.parse_args()
    try:
        import dynamo.replay  # noqa: F401
    except ImportError:
        print("difftest: the reference engine is not installed (tools/install-reference.sh)",
              file=sys.stderr)
        return 2
    tally: dict[str, dict[str, object]] = {}
    for kind in args.kinds.split(","):
        counts = {"match": 0, "differ": 0, "reference-error": 0, "kvreplay-error": 0,
                  "unplaced": 0}
        failures = []
        started = time.perf_counter()
        for seed in range(args.seed, args.seed + args.cases):
            scn = harness.generate(kind, seed)
            status, details = harness.check(scn)
            counts[status] += 1
            if status in ("differ", "kvreplay-error"):
                if args.shrink and status == "differ":
                    scn = harness.shrink(scn, lambda c: harness.check(c)[0] == "differ")
                    status, details = harness.check(scn)
                failures.append({"seed": seed, "status": status, "details": details,
                                 "scenario": scn})
                print(f"  {kind} seed {seed}: {status}: " + "; ".join(details[:args.show]),
                      flush=True)
                if args.save is not None:
                    args.save.mkdir(parents=True, exist_ok=True)
                    (args.save / f"{kind}-{seed}.json").write_text(
                        json.dumps({"status": status, "details": details, "scenario": scn},
                                   indent=1) + "\n")
        took = time.perf_counter() - started
        print(f"{kind:<10} {args.cases:>5} cases: {counts['match']:>5} match, "
              f"{counts['differ']:>4} differ, {counts['reference-error']:>4} refused by the "
              f"reference, {counts['kvreplay-error']:>3} kvreplay errors"
              + (f", {counts['unplaced']} placed otherwise in every reference run"
                 if counts["unplaced"] else "") + f" ({took:.0f} s)", flush=True)
        tally[kind] = {"counts": counts, "failures": failures}
    if args.json is not None:
        args.json.write_text(json.dumps(tally, indent=1) + "\n")
    return 1 if any(t["counts"]["differ"] or t["counts"]["kvreplay-error"]  # type: ignore[index]
                    for t in tally.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
