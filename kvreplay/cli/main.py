"""The `kvreplay` console script: argument parsing and dispatch (subcommands import lazily)."""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
from collections.abc import Callable, Sequence

from kvreplay import HOMEPAGE, __version__
from kvreplay.cli import exits
from kvreplay.cli.project_cli import add_project_options, add_walk_options
from kvreplay.io import signals
from kvreplay.io.display import escape_inline
from kvreplay.io.output import (
    OutputError,
    discard_pending,
    flush_stdout,
    stdout_error,
    write_stderr,
    write_stdout,
)

FORMATS = ["auto", "text", "concise", "json", "sarif", "github"]

EXAMPLES = {
    "lint": """examples:
  kvreplay lint examples/                       # every kvreplay config below (by content)
  kvreplay lint 'configs/**/*.yaml' --strict    # warnings fail too
  kvreplay lint cfg.yaml --format sarif > kvreplay.sarif
  kvreplay lint cfg.yaml --ignore G2-SHARED-LINK --set engine.backend=sglang
  kvreplay lint . --statistics                  # findings per rule
  kvreplay lint --show-settings deploy/         # the settings and where each came from
  # suppress one finding on its line:  scope: cluster_shared  # kvreplay: ignore[G2-SHARED-LINK]
""",
    "completion": """examples (the folder must exist: a fresh machine may not have it yet):
  mkdir -p ~/.local/share/bash-completion/completions
  kvreplay completion bash > ~/.local/share/bash-completion/completions/kvreplay
  kvreplay completion zsh > "${fpath[1]}/_kvreplay"
  mkdir -p ~/.config/fish/completions
  kvreplay completion fish > ~/.config/fish/completions/kvreplay.fish
""",
    "compile": """examples:
  kvreplay compile examples/agentx-g2-local.yaml              # canonical JSON on stdout
  kvreplay compile cfg.yaml -o cfg.json                       # written atomically
  kvreplay compile cfg.yaml -o build/spec.json   # trace paths rewritten relative to build/
  kvreplay compile cfg.yaml --check cfg.json                  # CI: fail (and diff) when stale
  kvreplay compile cfg.json                                   # re-emit a native spec canonically
  kvreplay compile --check-pairs                              # every configured pair
  kvreplay compile --check-pairs deploy/prod.json             # the pair it belongs to
  kvreplay compile --fix deploy/prod.yaml                     # rewrite its stale output
""",
    "run": """examples:
  kvreplay run examples/kv-router-mooncake.yaml
  kvreplay run build/spec.json                 # its trace paths: relative to build/
  kvreplay run spec.json --trace other.jsonl -o report.json   # another trace (from the cwd)
  kvreplay run cfg.yaml --format json | jq .mean_ttft_ms   # stdout holds the summary alone
  kvreplay run cfg.yaml -o report.json && jq .summary.mean_ttft_ms report.json
  kvreplay run cfg.yaml --per-request summary-only -o report.json --export rows.csv
  kvreplay run examples/agentx-g2-local.yaml --lifecycle lifecycle.jsonl
  kvreplay run cfg.yaml -o report.json --html report.html   # plots, one offline file
""",
    "report": """examples:
  kvreplay report report.json -o report.html                 # one self-contained HTML file
  kvreplay report base.json new.json --label base --label new -o both.html   # overlaid
  kvreplay report results/ -o sweep.html                     # a sweep's results folder
""",
    "compare": """examples:
  kvreplay compare base.json new.json                         # every summary figure, both runs
  kvreplay compare base.json new.json --fail-on "mean_ttft_ms > +5%" \\
      --fail-on "prefix_cache_reused_ratio < -0.01"           # CI: exit 1 when a gate trips
  kvreplay compare base.json new.json --format json -o diff.json
  kvreplay compare base.json new.json --html both.html       # both runs in the same plots
""",
    "sweep": """examples:
  kvreplay sweep examples/sweeps/kv-router-capacity.yaml -o results/     # local processes
  kvreplay sweep sweep.yaml -o results/ --jobs 2                         # rerun: resumes
  kvreplay sweep sweep.yaml -o results/ --executor ray --address ray://head:10001
  kvreplay sweep sweep.yaml -o results/ --html            # and results/sweep.html
""",
    "trace": """examples:
  kvreplay trace convert plays.jsonl -o plays-v2.jsonl       # Weka -> Agentic Mooncake v2
  kvreplay trace convert corpus/ --basis relative            # a directory of plays
  kvreplay trace convert requests-*.jsonl -o trace.jsonl     # Dynamo request traces
""",
    "trace convert": """examples:
  kvreplay trace convert examples/traces/weka-g2-restore.jsonl           # the v2 file on stdout
  kvreplay trace convert plays.jsonl -o plays-v2.jsonl                   # written atomically
  kvreplay trace convert corpus/ --basis relative -o corpus-v2.jsonl     # a directory of plays
  kvreplay trace convert plays.jsonl --block-size 64                     # refuse other sizes
  kvreplay trace convert a.jsonl b.jsonl -o trace.jsonl   # Dynamo request traces -> Mooncake or v2
  kvreplay trace convert sessions.jsonl --block-size 64 --shared-prefix-ratio 0.5 --prefix-groups 2
""",
    "matrix": """examples:
  kvreplay matrix                   # markdown table
  kvreplay matrix --format json
""",
    "explain": """examples:
  kvreplay explain G2-BACKEND
""",
    "schema": """examples:
  kvreplay schema config > kvreplay.schema.json   # for yaml-language-server
  kvreplay schema native
""",
}


TOP_EXAMPLES = f"""examples:
  kvreplay lint examples/                          # every config below: schema and matrix
  kvreplay compile examples/kv-router-mooncake.yaml -o spec.json   # canonical native JSON
  kvreplay run examples/kv-router-mooncake.yaml -o report.json     # replay over its trace

`kvreplay COMMAND -h` for a command's options and examples; documentation:
{HOMEPAGE}/blob/main/docs/cli.md
"""


def _common(top: bool) -> argparse.ArgumentParser:
    """Flags accepted before and after the subcommand (after it, they must not reset defaults)."""
    common = argparse.ArgumentParser(add_help=False)
    default = False if top else argparse.SUPPRESS
    common.add_argument("--debug", action="store_true", default=default,
                        help="show tracebacks of internal errors")
    common.add_argument("--quiet", "-q", action="store_true", default=default, help="print less")
    common.add_argument("--no-color", action="store_true", default=default,
                        help="never colour output (NO_COLOR too)")
    return common


def _overrides(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="PATH=VALUE",
                        help="change the config before validation (VALUE is YAML; repeatable)")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The CLI's parser; `command`: with only that subcommand (all `main` needs to parse its
    argv: building the other ten costs start-up time), None: with every subcommand."""
    common = _common(top=False)
    parser = argparse.ArgumentParser(
        prog="kvreplay",
        description="Lint, compile and replay KV-cache-aware LLM serving deployments.",
        parents=[_common(top=True)], epilog=TOP_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"kvreplay {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_text, description=help_text, parents=[common],
                              epilog=EXAMPLES.get(name),
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    for name, help_text, fill in COMMANDS:
        if command is None or command == name:
            fill(add(name, help_text))
    return parser


def _lint_parser(lint: argparse.ArgumentParser) -> None:
    lint.add_argument("paths", nargs="*", metavar="PATH",
                      help="files, directories or globs (default: the current folder)")
    lint.add_argument("--format", choices=FORMATS, default=None,
                      help="output format (auto: text on a terminal, github in GitHub Actions, "
                      "else concise; default: the settings' format, else auto)")
    lint.add_argument("--strict", action=argparse.BooleanOptionalAction, default=None,
                      help="warnings fail too (exit 1)")
    lint.add_argument("--select", action="append", default=[], metavar="RULE-ID",
                      help="report only these rules (repeatable or comma-separated)")
    lint.add_argument("--ignore", action="append", default=[], metavar="RULE-ID",
                      help="do not report these rules (repeatable or comma-separated)")
    lint.add_argument("--root", default=None, help="repository root for SARIF URIs (default: cwd)")
    lint.add_argument("--statistics", action="store_true",
                      help="print how many findings each rule has instead of the findings")
    lint.add_argument("--exit-zero", action="store_true",
                      help="exit 0 even when there are findings (2 still means unreadable input)")
    lint.add_argument("--output-file", "-o", metavar="FILE",
                      help="write the output here (atomically) instead of stdout")
    lint.add_argument("--show-settings", action="store_true",
                      help="print the settings for the first PATH and where each came from")
    add_project_options(lint)
    add_walk_options(lint)
    _overrides(lint)


def _completion_parser(completion: argparse.ArgumentParser) -> None:
    completion.add_argument("shell", choices=["bash", "zsh", "fish"],
                            help="the shell to print the script for")


def _compile_parser(comp: argparse.ArgumentParser) -> None:
    comp.add_argument("config", metavar="CONFIG", nargs="*",
                      help="the config (with --check-pairs: any number of configs and outputs)")
    target = comp.add_mutually_exclusive_group()
    target.add_argument("-o", "--output", metavar="OUT",
                        help="write the JSON here (atomically), its relative trace paths "
                        "rewritten for OUT's folder (stdout keeps the config's paths)")
    target.add_argument("--check", metavar="OUT",
                        help="exit 1 with a unified diff when OUT is not what CONFIG compiles to")
    target.add_argument("--check-pairs", "--check-sibling", dest="check_pairs",
                        action="store_true",
                        help="check the pairs the given files belong to (configured `compile` "
                        "pairs, else x.yaml beside x.json), either side; every configured pair "
                        "when none is given (used by the pre-commit hook)")
    comp.add_argument("--fix", "--write", dest="fix", action="store_true",
                      help="with --check or --check-pairs (implied): rewrite stale outputs "
                      "atomically and exit 1")
    comp.add_argument("--no-matrix", action="store_true",
                      help="skip the support-matrix rules (emit JSON for invalid deployments)")
    add_project_options(comp)
    _overrides(comp)


def _run_parser(run: argparse.ArgumentParser) -> None:
    run.add_argument("config", metavar="CONFIG_OR_SPEC",
                     help="a YAML config, or a native spec that `kvreplay compile` wrote")
    run.add_argument("--trace", action="append", default=[], metavar="PATH",
                     help="replay this trace instead of the spec's (repeatable; a relative "
                     "PATH is read from the current folder, the spec's own from its folder)")
    run.add_argument("-o", "--output", metavar="REPORT", help="write the canonical report here")
    run.add_argument("--format", choices=["table", "json"], default="table",
                     help="stdout: a summary table or the summary as JSON")
    run.add_argument("--stepwise", action="store_true",
                     help="simulate every decode pass (slow; for checking the fast path)")
    run.add_argument("--no-progress", action="store_true",
                     help="no progress (a bar on a terminal, periodic lines elsewhere)")
    run.add_argument("--per-request", choices=["full", "summary-only"], default=None,
                     help="rows per request in the -o report, or not (default: the config's "
                     "report.per_request, full)")
    run.add_argument("--export", action="append", default=[], metavar="FILE",
                     help="write the per-request rows here too: .csv, .jsonl or .parquet "
                     "(repeatable; Parquet needs kvreplay[parquet])")
    run.add_argument("--lifecycle", metavar="FILE",
                     help="agentic traces: write the lifecycle transcript (JSONL) here")
    run.add_argument("--html", metavar="FILE",
                     help="write the HTML report (plots, offline, one file) here")
    _overrides(run)


def _compare_parser(compare: argparse.ArgumentParser) -> None:
    compare.add_argument("base", metavar="BASE", help="the report to compare against")
    compare.add_argument("new", metavar="NEW", help="the report of the run under test")
    compare.add_argument("--fail-on", action="append", default=[], metavar="GATE",
                         help='exit 1 when the change trips GATE, e.g. "mean_ttft_ms > +5%%" '
                         '(repeatable; docs/cli.md)')
    compare.add_argument("--format", choices=["text", "json", "github"], default="text",
                         help="text: the table (default); json: the comparison as one JSON "
                         "document; github: a workflow command per tripped gate, then the text")
    compare.add_argument("--changed-only", action="store_true",
                         help="list only the figures that differ between the two reports")
    compare.add_argument("--top", type=int, default=10, metavar="N",
                         help="the N requests that got slowest (default 10)")
    compare.add_argument("-o", "--output", metavar="OUT", help="write here (atomically)")
    compare.add_argument("--html", metavar="FILE",
                         help="also write both runs overlaid in one offline HTML page")


def _report_parser(report: argparse.ArgumentParser) -> None:
    report.add_argument("reports", metavar="REPORT", nargs="+",
                        help="report JSON written by `kvreplay run -o` (several are overlaid), "
                        "or one results folder of `kvreplay sweep -o DIR`")
    report.add_argument("-o", "--output", metavar="OUT",
                        help="write the HTML here (atomically; default stdout, when it is "
                        "not a terminal)")
    report.add_argument("--label", action="append", default=[], metavar="NAME",
                        help="a run's name in the plots, in REPORT order (default: file name)")


def _trace_parser(trace: argparse.ArgumentParser) -> None:
    trace_sub = trace.add_subparsers(dest="trace_command", metavar="ACTION", required=True)
    convert = trace_sub.add_parser(
        "convert", parents=[_common(top=False)],
        help="convert a trace to the format the engine replays it as",
        description="Convert a trace to the format the engine replays it as: Weka / AgentX "
        "plays (a .json, a .jsonl or a directory) and agentic Dynamo request traces to the "
        "Agentic Mooncake v2 dependency graph (one header line, then one row per request with "
        "its dependencies); standard Dynamo request traces (one or several files) and Applied "
        "Compute agentic sessions to Mooncake rows. Replaying the output gives the same replay "
        "as the source.", epilog=EXAMPLES["trace convert"],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    convert.add_argument("trace", metavar="TRACE", nargs="+",
                         help="Weka / AgentX plays (a .json or .jsonl file, or a directory of "
                         "them), Dynamo request-trace files, or an Applied Compute sessions "
                         "file")
    convert.add_argument("--from", dest="source_format", metavar="FORMAT",
                         choices=["auto", "weka", "dynamo", "applied_compute_agentic"],
                         default="auto", help="the source format: weka, dynamo, "
                         "applied_compute_agentic (default auto: from the first record)")
    convert.add_argument("-o", "--output", metavar="OUT", help="write here (atomically)")
    convert.add_argument("--basis", choices=["auto", "absolute", "relative"], default="auto",
                         help="how subagent request timestamps are read (default auto)")
    convert.add_argument("--block-size", type=int, default=None, metavar="N",
                         help="require this trace block size (Applied Compute sessions: the "
                         "tokens per synthesized block, required)")
    convert.add_argument("--shared-prefix-ratio", type=float, default=0.0, metavar="R",
                         help="Applied Compute: share of each session's first prompt taken "
                         "from a prefix group (default 0)")
    convert.add_argument("--prefix-groups", type=int, default=0, metavar="N",
                         help="Applied Compute: prefix groups, session i in group i mod N")


def _matrix_parser(matrix: argparse.ArgumentParser) -> None:
    matrix.add_argument("--format", choices=["markdown", "json"], default="markdown",
                        help="a markdown table (default) or the rules as JSON")


def _explain_parser(explain: argparse.ArgumentParser) -> None:
    explain.add_argument("rule", metavar="RULE-ID",
                         help="a rule ID or code, e.g. G2-BACKEND (`kvreplay matrix` lists the "
                         "rules, docs/diagnostics.md the codes)")


def _schema_parser(schema: argparse.ArgumentParser) -> None:
    schema.add_argument("which", choices=["config", "native", "report", "sweep"],
                        help="config (for editors), native (compiled specs), report (run -o), "
                        "sweep (sweep files)")


def _sweep_parser(sweep: argparse.ArgumentParser) -> None:
    sweep.add_argument("sweep", metavar="SWEEP", help="the sweep file (docs/sweeps.md)")
    sweep.add_argument("-o", "--output", metavar="DIR", required=True,
                       help="the results folder (reports/, results.csv, best.json); a rerun "
                       "resumes")
    sweep.add_argument("--executor", choices=["local", "ray"], default="local",
                       help="local processes (default) or Ray tasks")
    sweep.add_argument("--jobs", "-j", type=int, default=None, metavar="N",
                       help="points at once (default: the CPU count, or the Ray cluster's CPUs)")
    sweep.add_argument("--address", metavar="ADDR",
                       help="ray: an existing cluster (default: start a local Ray instance)")
    sweep.add_argument("--trace-transport", choices=["object-store", "path"],
                       default="object-store", help="ray: ship trace bytes through the object "
                       "store (default), or read them from a path every node sees")
    sweep.add_argument("--format", choices=["table", "json"], default="table",
                       help="stdout: a summary, or best.json")
    sweep.add_argument("--no-progress", action="store_true", help="no progress lines")
    sweep.add_argument("--force", action="store_true",
                       help="write into a folder holding another sweep's results (its table "
                       "is replaced; its reports are kept)")
    sweep.add_argument("--html", nargs="?", const="", default=None, metavar="FILE",
                       help="also write the offline HTML page of the results (default FILE: "
                       "DIR/sweep.html; `kvreplay report DIR` renders it later)")
    _overrides(sweep)


# The subcommands in the order `kvreplay --help` lists them: name, help, what adds its arguments.
COMMANDS: tuple[tuple[str, str, Callable[[argparse.ArgumentParser], None]], ...] = (
    ("lint", "check configs and native specs against the schema and support matrix",
     _lint_parser),
    ("completion", "print a shell completion script", _completion_parser),
    ("compile", "compile a YAML config (or native spec) into canonical native JSON",
     _compile_parser),
    ("run", "replay a config or native spec with the bundled engine", _run_parser),
    ("compare", "compare two run reports: summary deltas, per-request join, gates",
     _compare_parser),
    ("report", "render replay reports (or a sweep's results folder) as one self-contained HTML "
     "file with plots", _report_parser),
    ("sweep", "run a parameter sweep: every point of a grid, on every trace", _sweep_parser),
    ("trace", "work with trace files", _trace_parser),
    ("matrix", "render the support matrix from the rule files", _matrix_parser),
    ("explain", "explain a rule: its text, rationale and examples", _explain_parser),
    ("schema", "print a JSON Schema (config for editors, native, report, sweep)",
     _schema_parser),
)


def command_of(argv: Sequence[str]) -> str | None:
    """The subcommand when argv starts with one (then only its parser is built), else None."""
    return argv[0] if argv and argv[0] in {name for name, _, _ in COMMANDS} else None


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; whatever stops it becomes an exit code and one line on stderr."""
    debug = False
    try:
        given = sys.argv[1:] if argv is None else argv
        parser = build_parser(command_of(given))
        try:
            args = parser.parse_args(argv)
        except OSError as exc:  # --help or --version to a stdout that cannot take it
            raise stdout_error(exc) from None
        debug = args.debug
        args.argv = list(given)  # for a report's provenance
        if args.command is None:
            write_stdout(parser.format_help())
            return exits.USAGE
        module = importlib.import_module(f"kvreplay.cli.cmd_{args.command}")
        code: int = module.run(args)
        return code
    except signals.STOPS as exc:
        return exits.stopped(exc)
    except OutputError as exc:
        write_stderr(f"kvreplay: {escape_inline(str(exc))}\n")
        return exits.USAGE
    except Exception as exc:  # the last line of defence: no traceback without --debug
        if debug:
            raise
        write_stderr(f"kvreplay: internal error: {type(exc).__name__}: "
                     f"{escape_inline(str(exc))} (run with --debug for the traceback)\n")
        return exits.USAGE
    finally:
        discard_pending()


def entry() -> None:
    """The console script (and `python -m kvreplay`): SIGINT and SIGTERM stop every phase
    quietly, and stdout is flushed here, where a full disk can still be reported."""
    signals.install()
    code: int | str | None
    try:
        try:
            code = main()
        except SystemExit as exc:  # argparse: --help, --version, usage errors
            code = exc.code
        if not flush_stdout() and not code:
            code = exits.USAGE
    except signals.STOPS as exc:
        signals.uninstall()
        code = exits.stopped(exc)
        discard_pending()
    signals.uninstall()
    # The process ends: the interpreter's exit would run one more full collection over every
    # object still alive (a replay's records and report; 0.25 s of CPU for 3 million live objects
    # in a probe), only for the operating system to take the memory back anyway.
    gc.freeze()
    sys.exit(code)
