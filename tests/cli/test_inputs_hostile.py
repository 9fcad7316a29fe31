"""Hostile inputs: FIFOs, devices, symlink loops, huge lines, deep nesting, control characters.

Each case must end quickly with a located diagnostic, leave every file as it was, and never hang:
anything that could block (a FIFO) runs in a subprocess with a timeout, so a regression fails
instead of stalling the suite.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kvreplay.compiler.reading import MAX_CONFIG_BYTES, read_config_text
from kvreplay.engine.traces import check_traffic
from kvreplay.schema.diagnostics import sort_unique
from kvreplay.schema.files import NotRegularFile, read_capped

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
GOOD = (EXAMPLES / "kv-router-mooncake.yaml").read_text()
TIMEOUT_S = 60  # a FIFO read that blocks would otherwise hang here forever
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")


def _kvreplay(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvreplay", *args], capture_output=True,
                          text=True, timeout=TIMEOUT_S, cwd=cwd,
                          env={**os.environ, "NO_COLOR": "1"})


def _state(folder: Path) -> dict[str, tuple[int, int, int]]:
    """Every entry under folder (symlinks not followed): type, size, modification time."""
    out: dict[str, tuple[int, int, int]] = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            info = os.lstat(os.path.join(root, name))
            out[os.path.relpath(os.path.join(root, name), folder)] = (
                stat.S_IFMT(info.st_mode), info.st_size, info.st_mtime_ns)
    return out


def _lint_json(ran: subprocess.CompletedProcess[str]) -> dict[str, list[dict[str, Any]]]:
    return {f["path"]: f["diagnostics"] for f in json.loads(ran.stdout)["files"]}


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


@needs_fifo
def test_fifo_in_a_folder_is_reported_and_the_rest_is_linted(tmp_path: Path) -> None:
    """A FIFO named *.yaml in a linted folder (and the same FIFO by a glob or by name) is one
    FILE-UNREADABLE naming it; the good file beside it is linted; exit 2; nothing changes."""
    _fifo(tmp_path / "a-pipe.yaml")
    (tmp_path / "b-good.yaml").write_text(GOOD)
    before = _state(tmp_path)
    for target in (str(tmp_path), str(tmp_path / "*.yaml")):
        ran = _kvreplay("lint", "--format", "json", target)
        assert ran.returncode == 2, ran.stderr
        found = _lint_json(ran)
        (pipe,) = found[str(tmp_path / "a-pipe.yaml")]
        assert (pipe["rule"], pipe["message"]) == (
            "FILE-UNREADABLE", "is a FIFO (named pipe), not a regular file")
        assert pipe["file"] == str(tmp_path / "a-pipe.yaml")
        assert found[str(tmp_path / "b-good.yaml")] == []
    concise = _kvreplay("lint", "--format", "concise", str(tmp_path / "a-pipe.yaml"))
    assert concise.returncode == 2
    assert concise.stdout.startswith(
        f"{tmp_path / 'a-pipe.yaml'}: error FILE-UNREADABLE is a FIFO (named pipe), "
        "not a regular file")
    assert _state(tmp_path) == before


@needs_fifo
def test_fifo_config_for_compile_check_and_run(tmp_path: Path) -> None:
    """compile, compile --check and run refuse a FIFO config at once (exit 2, its path named)
    and write nothing; a FIFO as the --check artifact is refused too."""
    pipe = _fifo(tmp_path / "cfg.yaml")
    (tmp_path / "good.yaml").write_text(GOOD)
    before = _state(tmp_path)
    message = f"{pipe}: error FILE-UNREADABLE is a FIFO (named pipe), not a regular file"
    for args in (("compile", str(pipe), "-o", str(tmp_path / "out.json")),
                 ("compile", str(pipe), "--check", str(tmp_path / "good.yaml")),
                 ("run", str(pipe), "-o", str(tmp_path / "report.json"))):
        ran = _kvreplay(*args)
        assert ran.returncode == 2, (args, ran.stderr)
        assert message in ran.stderr, (args, ran.stderr)
    check = _kvreplay("compile", str(tmp_path / "good.yaml"), "--check", str(pipe))
    assert check.returncode == 2
    assert f"cannot read {pipe}: is a FIFO (named pipe), not a regular file" in check.stderr
    assert _state(tmp_path) == before


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_character_devices_are_refused_without_reading(cli: Callable[..., Any], tmp_path: Path,
                                                       device: str) -> None:
    """A device (or a symlink to one) is refused before any byte is read: no unbounded read."""
    if not os.path.exists(device) or not stat.S_ISCHR(os.stat(device).st_mode):
        pytest.skip(f"{device} is not a character device here")
    link = tmp_path / "cfg.yaml"
    link.symlink_to(device)
    started = time.monotonic()
    ran = cli("lint", "--format", "json", device, str(link))
    assert time.monotonic() - started < 10
    assert ran.code == 2
    files = json.loads(ran.out)["files"]
    assert [(f["path"], [(d["rule"], d["message"]) for d in f["diagnostics"]]) for f in files] == [
        (path, [("FILE-UNREADABLE", "is a character device, not a regular file")])
        for path in (device, str(link))]
    compiled = cli("compile", str(link))
    assert compiled.code == 2 and compiled.out == ""


def test_a_socket_is_refused(cli: Callable[..., Any], tmp_path: Path) -> None:
    """A Unix socket named *.yaml is FILE-UNREADABLE ("is a socket"), exit 2."""
    path = tmp_path / "s.yaml"
    if not hasattr(socket, "AF_UNIX") or len(str(path)) > 100:
        pytest.skip("no Unix sockets here (or the path is too long for one)")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        ran = cli("lint", "--format", "json", str(path))
    assert ran.code == 2
    (d,) = json.loads(ran.out)["files"][0]["diagnostics"]
    assert (d["rule"], d["message"]) == ("FILE-UNREADABLE", "is a socket, not a regular file")


def test_reads_are_capped_by_bytes_read_not_by_the_size_claimed(tmp_path: Path) -> None:
    """read_capped stops at cap + 1 bytes; a procfs file (size 0, content behind it) is read;
    an oversized config is FILE-TOO-LARGE without being read whole."""
    big = tmp_path / "big.yaml"
    big.write_bytes(b"x" * 1000)
    assert read_capped(str(big), 10) == b"x" * 11
    assert read_capped(str(big), 5000) == b"x" * 1000
    proc = "/proc/self/status"
    if os.path.exists(proc) and os.stat(proc).st_size == 0:
        assert len(read_capped(proc, 100)) == 101
    with big.open("wb") as fh:
        fh.truncate(MAX_CONFIG_BYTES + 1)
    text, found = read_config_text(str(big))
    assert text is None and [d.rule for d in found] == ["FILE-TOO-LARGE"]
    assert "8,388,608" in found[0].message
    with pytest.raises(NotRegularFile):
        read_capped(str(tmp_path), 10)


def test_glob_and_walk_survive_symlink_loops(tmp_path: Path) -> None:
    """`lint 'dir/**/*.yaml'` with links to an ancestor, to itself and to a sibling ends at once
    and lints each physical file once; walking the folder gives the same file."""
    root = tmp_path / "cfg"
    (root / "a").mkdir(parents=True)
    (root / "a" / "x.yaml").write_text(GOOD)
    (root / "a" / "up").symlink_to("..")
    (root / "a" / "up2").symlink_to("../..")
    (root / "a" / "self").symlink_to(".")
    (root / "b").symlink_to("a")
    before = _state(tmp_path)
    for target in (str(root / "**" / "*.yaml"), str(root)):
        started = time.monotonic()
        ran = _kvreplay("lint", "--format", "json", target)
        assert time.monotonic() - started < TIMEOUT_S / 2
        assert ran.returncode == 0, ran.stderr
        assert list(_lint_json(ran)) == [str(root / "a" / "x.yaml")]
    assert _state(tmp_path) == before


def test_glob_follows_links_that_do_not_loop(cli: Callable[..., Any], tmp_path: Path) -> None:
    """A `**` glob still enters a symlinked folder elsewhere, as Python's glob does."""
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "x.yaml").write_text(GOOD)
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "linked").symlink_to(tmp_path / "real")
    ran = cli("lint", "--format", "json", str(tmp_path / "cfg" / "**" / "*.yaml"))
    assert [f["path"] for f in json.loads(ran.out)["files"]] == [
        str(tmp_path / "cfg" / "linked" / "x.yaml")]


def _mooncake(path: Path) -> dict[str, Any]:
    return {"source_type": "trace", "load_type": "trace_timestamps", "trace_format": "mooncake",
            "trace_block_size": 4, "trace_paths": [str(path)]}


@needs_fifo
def test_a_fifo_trace_is_trace_path_not_a_hang(tmp_path: Path) -> None:
    """`run --trace FIFO` (mooncake), a FIFO agentic_mooncake trace and a FIFO in a Weka corpus
    are TRACE-PATH errors naming the path: exit 2, no report written."""
    pipe = _fifo(tmp_path / "trace.jsonl")
    report = tmp_path / "report.json"
    ran = _kvreplay("run", str(EXAMPLES / "g2-restore-mooncake.yaml"), "--trace", str(pipe),
                    "-o", str(report))
    assert ran.returncode == 2, ran.stderr
    assert (f"TRACE-PATH trace path is not a regular file: {pipe} (it is a FIFO (named pipe))"
            in ran.stderr)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(EXAMPLES / "traces" / "weka-g2-restore.jsonl", corpus / "a.jsonl")
    _fifo(corpus / "b.jsonl")
    weka = _kvreplay("run", str(EXAMPLES / "agentx-g2-local.yaml"), "--trace", str(corpus))
    assert weka.returncode == 2, weka.stderr
    assert (f"Weka corpus entry {corpus}/b.jsonl is a FIFO (named pipe), not a regular file"
            in weka.stderr)
    v2 = _kvreplay("run", str(EXAMPLES / "agentx-g2-local.yaml"), "--trace", str(pipe),
                   "--set", "traffic.source.format=agentic_mooncake",
                   "--set", "traffic.source.nested_timestamp_basis=null")
    assert v2.returncode == 2, v2.stderr
    assert f"cannot read {pipe}: is a FIFO (named pipe), not a regular file" in v2.stderr
    assert not report.exists()


def test_a_device_trace_is_trace_path(tmp_path: Path) -> None:
    """A trace path that is a character device (or a link to one) is TRACE-PATH at once."""
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    link = tmp_path / "t.jsonl"
    link.symlink_to("/dev/zero")
    for path in (Path("/dev/zero"), link):
        (d,) = check_traffic(_mooncake(path), base_dir=".")
        assert (d.rule, d.message) == (
            "TRACE-PATH", f"trace path is not a regular file: {path} (it is a character device)")


def _big_row(extra: Any, ids: list[Any]) -> str:
    return json.dumps({"timestamp": 0, "extra": extra, "hash_ids": ids, "output_length": 1})


def test_a_huge_trace_line_is_checked_at_c_speed(tmp_path: Path) -> None:
    """A 10 MB string before the fields and a bad id at the end of a 1M-id array are located as
    exactly as on a short line, in a few times json's own parse time (a per-character loop took
    some 20x; 50 MB lines took 16-19 s)."""
    ids: list[Any] = list(range(1_000_000))
    ids[-1] = -1
    text = _big_row("\\" * 10_000_000, ids)
    path = tmp_path / "t.jsonl"
    path.write_text(text + "\n")
    started = time.perf_counter()
    json.loads(text)
    parse_s = time.perf_counter() - started
    started = time.perf_counter()
    found = check_traffic(_mooncake(path), base_dir=".")
    check_s = time.perf_counter() - started
    unknown, bad = sorted(found, key=lambda d: d.column or 0)
    assert (unknown.rule, unknown.column) == ("TRACE-UNKNOWN-FIELD", text.index('"\\\\') + 1)
    assert (bad.rule, bad.path, bad.column, bad.end_column) == (
        "TRACE-VALUE", "$.hash_ids[999999]", text.rindex("-1") + 1, text.rindex("-1") + 3)
    assert check_s < 8 * parse_s + 0.5, (check_s, parse_s)


@pytest.mark.parametrize(("fmt", "name"), [("mooncake", "t.jsonl"), ("weka", "t.jsonl"),
                                           ("agentic_mooncake", "t.jsonl")])
def test_deep_nesting_in_a_trace_is_located(tmp_path: Path, fmt: str, name: str) -> None:
    """5,000 nested arrays in a trace line: TRACE-JSON at the line (and the column where the
    201st level opens), never a RecursionError."""
    prefix = '{"x": '
    path = tmp_path / name
    path.write_text(prefix + "[" * 5000 + "]" * 5000 + "}\n")
    traffic = {**_mooncake(path), "trace_format": fmt}
    (d,) = check_traffic(traffic, base_dir=".")
    column = len(prefix) + 200
    assert (d.rule, d.line) == ("TRACE-JSON", 1)
    assert "arrays and objects nest too deeply" in d.message
    if fmt == "mooncake":
        assert d.column == column
    else:
        assert f"past 200 levels at column {column}" in d.message


@pytest.mark.parametrize(("text", "line", "column"), [
    ("engine: " + "[" * 250 + "]" * 250 + "\n", 1, 209),
    ("engine: " + "[" * 5000 + "]" * 5000 + "\n", 1, 209),
    ("engine:\n  model: " + "{a: " * 300 + "1" + "}" * 300 + "\n", 2, 10 + 4 * 199),
])
def test_deep_yaml_is_located(cli: Callable[..., Any], tmp_path: Path, text: str, line: int,
                              column: int) -> None:
    """Past 200 levels (whether or not the composer runs out of stack) a config is one
    YAML-SYNTAX at the node that is too deep."""
    config = tmp_path / "deep.yaml"
    config.write_text(text)
    ran = cli("lint", "--format", "json", str(config))
    (d,) = json.loads(ran.out)["files"][0]["diagnostics"]
    assert (d["rule"], d["line"], d["column"], d["message"]) == (
        "YAML-SYNTAX", line, column, "document nests deeper than 200 levels")
    assert ran.code == 1


@pytest.mark.parametrize(("name", "text", "found"), [
    ("c.yaml", 'engine:\n  model: "a\x01b"\n',
     ("YAML-SYNTAX", 2, 12, "YAML syntax error: non-printable character U+0001 is not allowed")),
    ("c2.yaml", "engine:\n  model: a\x7fb\n",
     ("YAML-SYNTAX", 2, 11, "YAML syntax error: non-printable character U+007F is not allowed")),
    ("c.json", '{"engine": {"model": "x\x1by"}}\n',
     ("JSON-SYNTAX", 1, 24, "JSON syntax error: raw control character U+001B in a string (write "
      "it as the escape \\u001b)")),
])
def test_control_characters_are_located(cli: Callable[..., Any], tmp_path: Path, name: str,
                                        text: str, found: tuple[str, int, int, str]) -> None:
    """A raw control character is reported at its own line and column, named by code point."""
    config = tmp_path / name
    config.write_text(text)
    ran = cli("lint", "--format", "json", str(config))
    (d,) = json.loads(ran.out)["files"][0]["diagnostics"]
    assert (d["rule"], d["line"], d["column"], d["message"]) == found
    assert ran.code == 1


def test_trace_truncated_comes_after_what_it_summarizes(cli: Callable[..., Any],
                                                        tmp_path: Path) -> None:
    """Past the listing cap, TRACE-TRUNCATED is sorted and printed after the listed errors of
    every reader (mooncake, agentic_mooncake, weka)."""
    header = json.dumps({"schema": "dynamo.agentic_mooncake", "version": 2, "block_size": 4,
                         "hash_id_scope": "local", "source": {"format": "x", "digest": "y"}})
    rows = tmp_path / "bad.jsonl"
    for fmt, text in (("mooncake", "{\n" * 260), ("agentic_mooncake", header + "\n{" * 80),
                      ("weka", "{}\n" * 80)):
        rows.write_text(text)
        traffic = {**_mooncake(rows), "trace_format": fmt}
        found = sort_unique(check_traffic(traffic, base_dir="."))
        assert found[-1].rule == "TRACE-TRUNCATED", fmt
        assert [d.rule for d in found].count("TRACE-TRUNCATED") == 1
        assert found[-1].severity == "note"
    rows.write_text("{\n" * 260)
    ran = cli("run", str(EXAMPLES / "g2-restore-mooncake.yaml"), "--trace", str(rows))
    assert ran.code == 2
    lines = ran.err.strip().splitlines()
    assert "TRACE-TRUNCATED 60 more error(s) in this trace are not listed" in lines[-1]
    assert all("TRACE-JSON" in line for line in lines[:-1])


def test_code_frames_of_a_one_line_file_are_cut(cli: Callable[..., Any], tmp_path: Path,
                                                monkeypatch: Any) -> None:
    """A one-line kvreplay.toml of 40,000 characters, and one-line configs, sweep files and
    native specs as long: each code frame line shows at most MAX_LINE_CELLS cells of the line
    around the finding, cut with `...`, never the whole line."""
    from kvreplay.formats.text import MAX_LINE_CELLS

    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.yaml").write_text(GOOD)
    long = "a" * 40_000
    (tmp_path / "kvreplay.toml").write_text(f'exclude = ["{long}", 5]\n')
    ran = cli("lint", "--format", "text", "c.yaml")
    assert ran.code == 2 and "SETTINGS-INVALID" in ran.err
    frames = [r for r in ran.err.splitlines() if r.startswith(" 1 | ")]
    assert frames == [" 1 | exclude = [\"" + "a" * (MAX_LINE_CELLS - 12) + "..."]
    (tmp_path / "kvreplay.toml").unlink()
    files = {"config.yaml": f'engine: {{model: "{long}", typo: 1}}\n',
             "sweep.yaml": f'{{kind: sweep, base: c.yaml, points: [{{engine.model: "{long}"}}], '
                           'typo: 1}\n',
             "spec.json": json.dumps({"spec": {"model": long, "typo": 1}}) + "\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    ran = cli("lint", "--format", "text", *files)
    assert ran.code == 1, ran.err
    frames = [r for r in ran.out.splitlines() if r.startswith(" 1 | ")]
    assert len(frames) >= len(files) and all(
        len(r) <= len(" 1 | ...") + MAX_LINE_CELLS + len("...") for r in frames), frames
    assert {name for name in files if f"{name}:1:" in ran.out} == set(files)
    assert any(r.startswith(" 1 | ...") and "typo" in r for r in frames)
