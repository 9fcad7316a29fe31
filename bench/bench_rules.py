"""Benchmark the support-matrix rules: start-up (cold, warm cache), import cost, evaluation.

Run from the repo root in the dev venv:  python bench/bench_rules.py
Prints figures only (no thresholds): the test suite never times anything.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONFIGS = [
    REPO / "examples" / "agentx-g2-shared-pd.yaml",
    REPO / "examples" / "kv-router-mooncake.yaml",
    REPO / "tests" / "cases" / "rules" / "TOPO-ROLES" / "pass-hbm-sglang-pd.yaml",
]

_STARTUP = """
import time
t0 = time.perf_counter()
import kvreplay.compiler.pipeline, kvreplay.schema.spec
t1 = time.perf_counter()
from kvreplay.rules.runner import compiled_rules
compiled_rules()
t2 = time.perf_counter()
import sys
print(f"{(t2 - t1) * 1e3:.3f} {'lark' in sys.modules}")
"""


def _run(code: str, env: dict[str, str], *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *flags, "-c", code], env=env, capture_output=True,
                          text=True, check=True)


def startup(runs: int = 7) -> None:
    """Time to load + compile the rules in a fresh interpreter, after the compiler is imported."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "KVREPLAY_CACHE_DIR": cache}
        env.pop("KVREPLAY_NO_CACHE", None)
        cold, edited = [], []
        for _ in range(runs):
            for stale in Path(cache).iterdir():
                stale.unlink()
            cold.append(float(_run(_STARTUP, env).stdout.split()[0]))
        for _ in range(runs):  # a rule file changed: lark's tables are still cached
            for stale in Path(cache).glob("rules-*"):
                stale.unlink()
            edited.append(float(_run(_STARTUP, env).stdout.split()[0]))
        _run(_STARTUP, env)
        warm_out = [_run(_STARTUP, env).stdout.split() for _ in range(runs)]
        warm = [float(w[0]) for w in warm_out]
    print(f"start-up, cold (parse with lark + check + generate + compile): "
          f"median {statistics.median(cold):.1f} ms over {runs} fresh interpreters")
    print(f"start-up, rules edited (lark tables cached, rest as cold):   "
          f"median {statistics.median(edited):.1f} ms")
    print(f"start-up, warm cache (load bytecode, exec):                  "
          f"median {statistics.median(warm):.1f} ms; lark imported: {warm_out[0][1]}")


def import_cost() -> None:
    """`python -X importtime` of the rules machinery on a warm cache, beyond the compiler."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "KVREPLAY_CACHE_DIR": cache}
        env.pop("KVREPLAY_NO_CACHE", None)
        code = ("import kvreplay.compiler.pipeline\n"
                "from kvreplay.rules.runner import compiled_rules\ncompiled_rules()\n")
        _run(code, env)
        err = _run(code, env, "-X", "importtime").stderr
    rows = []
    for line in err.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if match:
            rows.append((int(match.group(1)), int(match.group(2)), match.group(4)))
    own = [(self_us, cum, name) for self_us, cum, name in rows
           if name.startswith("kvreplay.rules")]
    pulled = {name for _, _, name in rows}
    top = [r for r in rows if r[2] in ("kvreplay.rules.runner", "kvreplay.rules.functions",
                                       "kvreplay.rules.logic")]
    total = sum(cum for _, cum, _ in top)
    print(f"import (-X importtime, warm cache): kvreplay.rules modules {total / 1e3:.1f} ms "
          f"cumulative beyond kvreplay.compiler.pipeline; lark imported: {'lark' in pulled}")
    for self_us, cum, name in sorted(own, key=lambda r: -r[1]):
        print(f"    {name:32s} self {self_us / 1e3:5.2f} ms  cumulative {cum / 1e3:5.2f} ms")


def evaluation(repeat: int = 2000) -> None:
    """Time to evaluate every rule on a Spec (run_rules), after start-up."""
    from kvreplay.compiler.documents import compile_text
    from kvreplay.rules.runner import Runner, run_rules

    runner = Runner()
    for path in CONFIGS:
        compiled = compile_text(path.read_text(encoding="utf-8"), path.name)
        assert compiled.spec is not None and compiled.origin is not None
        spec, origin = compiled.spec, compiled.origin
        run_rules(spec, origin)
        samples = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(repeat):
                run_rules(spec, origin)
            samples.append((time.perf_counter() - t0) / repeat)
        raw = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(repeat):
                runner.findings(spec)
            raw.append((time.perf_counter() - t0) / repeat)
        print(f"evaluate all {len(runner.rules)} rules on {path.name} "
              f"({len(spec.roles)} role(s), {len(run_rules(spec, origin))} finding(s)): "
              f"{min(samples) * 1e6:.1f} us (conditions only: {min(raw) * 1e6:.1f} us)")


def main() -> None:
    print(f"python {sys.version.split()[0]} on {os.cpu_count()} cores")
    startup()
    import_cost()
    evaluation()


if __name__ == "__main__":
    main()
