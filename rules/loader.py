"""Loading the shipped rule files: parse and check them, or reuse their compiled form from cache.

Parsing needs lark and its LALR tables (tens of ms) and linting one file must start fast, so the
rule set is compiled to a Python module (codegen.py) whose bytecode is cached in the user's cache
directory under a key hashing the text of every rule file, the grammar, this package's Python
modules (the compiler), every other module code generation reads (KEY_MODULES: the Spec, whose
field defaults the generated code embeds), the package version and the Python bytecode tag: any
edit misses the cache and recompiles. A hit
imports neither lark nor the syntax tree. The KEEP most recently used entries are kept (checkouts
sharing the user's cache then reuse theirs instead of evicting each other's). Next to the
bytecode sits the generated source, so tracebacks show it. Set KVREPLAY_NO_CACHE=1 to bypass
the cache, KVREPLAY_CACHE_DIR to move it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import marshal
import os
import sys
from pathlib import Path
from types import CodeType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvreplay.rules import syntax as s

RULES_DIR = Path(__file__).parent
GRAMMAR_PATH = RULES_DIR / "grammar.lark"
CACHE_PREFIX = "rules-"
KEEP = 8  # cache entries kept (the most recently used): checkouts sharing a cache keep theirs

# The modules outside kvreplay.rules that code generation reads or imports: the Spec (field kinds
# and the defaults `is default` and `default(...)` embed) and the native defaults it takes them
# from, the hints of rule-file errors and what
# the rule functions import. tests/rules/test_rules_runner.py checks this covers the import closure
# of the code generator, so a module it comes to read cannot be left out of the cache key.
KEY_MODULES = (
    "kvreplay.schema.spec",
    "kvreplay.schema.native_model",
    "kvreplay.schema.native_defaults",
    "kvreplay.schema.sla",
    "kvreplay.schema.telemetry",
    "kvreplay.schema.hybrid",
    "kvreplay.schema.schema_facts",  # kvreplay.schema.sla's field helpers
    "kvreplay.schema.frozen",  # the Frozen base of the Spec's classes
    "kvreplay.schema.suggest",
    "kvreplay.schema.layout",
    "kvreplay.schema.scaling",  # the Spec's scaling options
    "kvreplay.schema.convert",  # the Spec reads a native scaling config through it
    "kvreplay.schema.quick_structure",  # and its quick structuring walk
    "kvreplay.schema.origin",
    "kvreplay.schema.diagnostics",
    "kvreplay.schema.version",
    "kvreplay.schema.digest",  # the key's own hash
)


# The concerns in matrix order (the load order); other rule files follow, by name.
CONCERNS = ("topology", "g2", "shared-pool", "g3", "speculation", "agentic", "router", "native",
            "traffic")


def _order(path: Path) -> tuple[int, str]:
    stem = path.stem
    return (CONCERNS.index(stem) if stem in CONCERNS else len(CONCERNS), stem)


def rule_files() -> list[Path]:
    """The shipped rule files in load order: the concerns in matrix order, then by name."""
    return sorted(RULES_DIR.glob("*.rules"), key=_order)


def display_name(path: Path) -> str:
    return f"rules/{path.name}"


def sources() -> list[tuple[str, str]]:
    """(display name, text) of every shipped rule file."""
    return [(display_name(p), p.read_text(encoding="utf-8")) for p in rule_files()]


def module_path(name: str) -> Path:
    """The source file of module `name` (the loaded one, if it is imported)."""
    found = importlib.util.find_spec(name)
    if found is None or found.origin is None:
        raise ModuleNotFoundError(name)
    return Path(found.origin)


def key_inputs() -> list[tuple[str, str]]:
    """(name, text) of every Python module the generated code depends on, in a fixed order."""
    machinery = [(p.name, p.read_text(encoding="utf-8"))
                 for p in sorted(RULES_DIR.glob("*.py"), key=lambda p: p.name)]
    others = [(name, module_path(name).read_text(encoding="utf-8")) for name in KEY_MODULES]
    return [*machinery, *others]


def cache_key(files: list[tuple[str, str]]) -> str:
    from kvreplay.schema.digest import sha256
    from kvreplay.schema.version import VERSION

    digest = sha256()  # a few hundred kB of text: no OpenSSL start-up
    grammar = GRAMMAR_PATH.read_text(encoding="utf-8")
    parts = (sys.implementation.cache_tag or "", VERSION, grammar,
             *(f"{n}\0{t}" for n, t in (*key_inputs(), *files)))
    for part in parts:
        data = part.encode("utf-8")
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()[:32]


def cache_dir() -> Path | None:
    if os.environ.get("KVREPLAY_NO_CACHE"):
        return None
    explicit = os.environ.get("KVREPLAY_CACHE_DIR")
    if explicit:
        return Path(explicit)
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA")
        return Path(base) / "kvreplay" / "cache" if base else None
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kvreplay"


def parse_sources(files: list[tuple[str, str]]) -> s.RuleSet:
    """Parse and check rule file texts; raises RuleFileError listing every problem."""
    from kvreplay.rules import syntax as s
    from kvreplay.rules.analysis import analyze
    from kvreplay.rules.errors import Problem, RuleFileError
    from kvreplay.rules.parser import parse_file

    parsed: list[s.RuleFile] = []
    problems: list[Problem] = []
    for name, text in files:
        try:
            parsed.append(parse_file(text, name))
        except RuleFileError as exc:
            problems.extend(exc.problems)
    if problems:
        raise RuleFileError(problems)
    ruleset = s.RuleSet(tuple(parsed))
    analyze(ruleset)
    return ruleset


def _read_code(path: Path) -> CodeType | None:
    try:
        code = marshal.loads(path.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return None
    return code if isinstance(code, CodeType) else None


def _write(directory: Path, key: str, source: str, code: CodeType) -> None:
    import tempfile

    try:
        directory.mkdir(parents=True, exist_ok=True)
        for suffix, data in ((".py", source.encode("utf-8")), (".marshal", marshal.dumps(code))):
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".rules-", suffix=".tmp")
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, directory / f"{CACHE_PREFIX}{key}{suffix}")
        _evict(directory, f"{CACHE_PREFIX}*.marshal", (".marshal", ".py"))
        from kvreplay.rules.parser import LARK_CACHE_PREFIX

        _evict(directory, f"{LARK_CACHE_PREFIX}*.cache", (".cache",))
    except OSError:
        pass  # a read-only or full cache directory only costs start-up time


def _evict(directory: Path, pattern: str, suffixes: tuple[str, ...]) -> None:
    """Keep the KEEP most recently used entries matching `pattern` (each with its `suffixes`
    siblings). Keys are content hashes, so an old entry is never wrong, only unused: keeping
    a few lets checkouts (or versions) that share one cache stop evicting each other's."""
    entries = []
    for path in directory.glob(pattern):
        try:
            entries.append((path.stat().st_mtime_ns, path.name, path))
        except OSError:
            continue
    for _, _, path in sorted(entries, reverse=True)[KEEP:]:
        stem = path.name[:-len(suffixes[0])]
        for suffix in suffixes:
            (directory / f"{stem}{suffix}").unlink(missing_ok=True)


def _touch(path: Path) -> None:
    """Mark a cache entry used (its mtime orders eviction)."""
    with contextlib.suppress(OSError):  # a read-only cache: only the eviction order suffers
        os.utime(path)


def _execute(code: CodeType) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "kvreplay.rules._generated"}
    exec(code, namespace)
    return namespace


def load(files: list[tuple[str, str]] | None = None, *, use_cache: bool = True) -> dict[str, Any]:
    """The generated rule module (its namespace: RULES, CATALOG) of `files` (default: shipped)."""
    files = sources() if files is None else files
    directory = cache_dir() if use_cache else None
    key = cache_key(files)
    if directory is not None:
        code = _read_code(directory / f"{CACHE_PREFIX}{key}.marshal")
        if code is not None:
            _touch(directory / f"{CACHE_PREFIX}{key}.marshal")
            return _execute(code)
    from kvreplay.rules.codegen import generate

    source = generate(parse_sources(files))
    filename = str(directory / f"{CACHE_PREFIX}{key}.py") if directory else "<kvreplay-rules>"
    code = compile(source, filename, "exec")
    if directory is not None:
        _write(directory, key, source, code)
    return _execute(code)


@functools.cache
def shipped_module() -> dict[str, Any]:
    """The shipped rules' generated module, loaded once per process."""
    return load()


@functools.cache
def shipped_ruleset() -> s.RuleSet:
    """The shipped rules' syntax tree (matrix, explain: needs lark), parsed once per process."""
    return parse_sources(sources())
