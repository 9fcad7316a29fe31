"""Hostile `-o` targets: devices, /dev/stdout, FIFOs, symlinks, modes, the command's own inputs,
and a stdout that cannot be written. Every refusal is exit 2 before any work, and leaves every
file as it was (and no temp file)."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import snapshot

REPO = Path(__file__).resolve().parents[2]
# Synthetic traffic: no trace path to rewrite for the output's folder, so `-o FILE` writes the
# bytes stdout prints.
GOOD = REPO / "examples" / "shared-g2-aggregated.yaml"
MOONCAKE = REPO / "examples" / "g2-restore-mooncake.yaml"
OLD = '{"old": "content"}\n'

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="only root can chown a file away")
not_root = pytest.mark.skipif(os.geteuid() == 0, reason="root writes into any folder")


@pytest.fixture(scope="module")
def compiled() -> str:
    """What `kvreplay compile GOOD` prints."""
    done = subprocess.run([sys.executable, "-m", "kvreplay", "compile", str(GOOD)],
                          capture_output=True, text=True, check=True, timeout=120)
    return done.stdout


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """A copy of a good config in tmp_path (so no test can touch the repository's)."""
    copy = tmp_path / "cfg.yaml"
    shutil.copy(GOOD, copy)
    return copy


@pytest.fixture
def mooncake(tmp_path: Path) -> Path:
    """A runnable Mooncake config in tmp_path, with its trace in tmp_path/traces."""
    (tmp_path / "traces").mkdir()
    shutil.copy(REPO / "examples" / "traces" / "g2-restore-mooncake.jsonl", tmp_path / "traces")
    copy = tmp_path / "run.yaml"
    shutil.copy(MOONCAKE, copy)
    return copy


@contextlib.contextmanager
def umask(mask: int) -> Iterator[None]:
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def _device(path: str) -> tuple[int, int]:
    info = os.stat(path)
    assert stat.S_ISCHR(info.st_mode), f"{path} is no longer a character device"
    return info.st_ino, info.st_rdev


@pytest.fixture
def guard() -> Iterator[Callable[[str], None]]:
    """Watch the /dev entries a test writes to. Run as root, a regression would replace them
    for the whole machine: put them back as they were, then fail."""
    watched: dict[str, tuple[os.stat_result, str | None]] = {}

    def watch(path: str) -> None:
        info = os.lstat(path)
        watched[path] = (info, os.readlink(path) if stat.S_ISLNK(info.st_mode) else None)

    yield watch
    broken = []
    for path, (info, link) in watched.items():
        now = os.lstat(path)
        if (now.st_mode, now.st_rdev) == (info.st_mode, info.st_rdev) and (
                link is None or os.readlink(path) == link):
            continue
        broken.append(path)
        os.remove(path)
        if link is not None:
            os.symlink(link, path)
        else:
            os.mknod(path, info.st_mode, info.st_rdev)
            os.chmod(path, stat.S_IMODE(info.st_mode))  # mknod is subject to the umask
    assert not broken, f"replaced (now restored): {broken}"


# -- devices, /dev/stdout, FIFOs --------------------------------------------------------------


def test_dev_null_is_written_in_place(cli: Callable[..., Any],
                                      guard: Callable[[str], None]) -> None:
    """-o /dev/null: exit 0, nothing printed, /dev/null still the same device."""
    guard("/dev/null")
    before = _device("/dev/null")
    ran = cli("compile", str(GOOD), "-o", "/dev/null")
    assert (ran.code, ran.out, ran.err) == (0, "", "")
    assert _device("/dev/null") == before


def test_dev_full_is_a_write_error_and_stays_a_device(cli: Callable[..., Any],
                                                      guard: Callable[[str], None]) -> None:
    """-o /dev/full: exit 2 naming the device and the error; /dev/full is untouched."""
    guard("/dev/full")
    before = _device("/dev/full")
    ran = cli("compile", str(GOOD), "-o", "/dev/full")
    assert (ran.code, ran.err) == (2, "kvreplay: no space left on device writing /dev/full\n")
    assert _device("/dev/full") == before


@pytest.mark.parametrize("target", ["/dev/stdout", "-", "/dev/fd/1", "/proc/self/fd/1"])
def test_stdout_targets_print(cli_process: Callable[..., Any], compiled: str,
                              guard: Callable[[str], None], target: str) -> None:
    """-o /dev/stdout (and `-`, /dev/fd/1) prints the JSON instead of replacing anything."""
    guard("/dev/stdout")
    guard("/dev/fd")
    ran = cli_process("compile", str(GOOD), "-o", target)
    assert (ran.code, ran.out, ran.err) == (0, compiled, "")


def test_dev_stdout_redirected_to_a_file_is_appended_in_place(tmp_path: Path, compiled: str,
                                                              guard: Callable[[str], None],
                                                              ) -> None:
    """`-o /dev/stdout >> log`: written through the open descriptor (appended), the file is not
    replaced (same inode)."""
    guard("/dev/stdout")
    log = tmp_path / "log"
    log.write_text("before\n")
    inode = log.stat().st_ino
    with log.open("a") as fh:
        done = subprocess.run([sys.executable, "-m", "kvreplay", "compile", str(GOOD), "-o",
                               "/dev/stdout"], stdout=fh, stderr=subprocess.PIPE, text=True,
                              timeout=120)
    assert (done.returncode, done.stderr) == (0, "")
    assert log.read_text() == "before\n" + compiled
    assert log.stat().st_ino == inode


def test_fifo_is_written_in_place(cli: Callable[..., Any], tmp_path: Path, compiled: str) -> None:
    """-o FIFO: a reader gets the JSON; the FIFO stays a FIFO."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    ran = cli("compile", str(GOOD), "-o", str(fifo))
    reader.join(timeout=30)
    assert (ran.code, got) == (0, [compiled])
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_directory_is_refused(cli: Callable[..., Any], tmp_path: Path) -> None:
    """-o DIR: exit 2, the directory unchanged."""
    ran = cli("compile", str(GOOD), "-o", str(tmp_path))
    assert (ran.code, ran.err) == (2, f"kvreplay: cannot write {tmp_path}: it is a directory\n")
    assert list(tmp_path.iterdir()) == []


def test_a_missing_folder_is_refused(cli: Callable[..., Any], tmp_path: Path) -> None:
    """-o into a folder that does not exist: exit 2 with the system's reason."""
    out = tmp_path / "nowhere" / "spec.json"
    ran = cli("compile", str(GOOD), "-o", str(out))
    assert (ran.code, ran.err) == (2, f"kvreplay: cannot write {out}: No such file or "
                                      "directory\n")


@not_root
def test_an_unwritable_folder_fails_before_the_replay(cli: Callable[..., Any], tmp_path: Path,
                                                      mooncake: Path) -> None:
    """-o into a read-only folder: exit 2 before replaying (nothing on stdout)."""
    folder = tmp_path / "locked"
    folder.mkdir(mode=0o555)
    ran = cli("run", str(mooncake), "-o", str(folder / "report.json"))
    assert (ran.code, ran.out) == (2, "")
    assert ran.err == f"kvreplay: cannot write {folder / 'report.json'}: Permission denied\n"


# -- regular files: symlinks, modes, owners ---------------------------------------------------


def test_a_symlink_is_followed_and_its_target_replaced(cli: Callable[..., Any], tmp_path: Path,
                                                       compiled: str) -> None:
    """-o LINK: the link stays a link; its target gets the JSON and keeps its mode."""
    target = tmp_path / "real" / "spec.json"
    target.parent.mkdir()
    target.write_text(OLD)
    target.chmod(0o640)
    link = tmp_path / "spec.json"
    link.symlink_to(target)
    ran = cli("compile", str(GOOD), "-o", str(link))
    assert ran.code == 0, ran.err
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == compiled
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert not list(tmp_path.rglob(".kvreplay-*"))


def test_a_dangling_symlink_creates_its_target(cli: Callable[..., Any], tmp_path: Path,
                                               compiled: str) -> None:
    """-o LINK to a file not yet there: the target is created, the link kept."""
    link = tmp_path / "spec.json"
    link.symlink_to("made.json")
    ran = cli("compile", str(GOOD), "-o", str(link))
    assert ran.code == 0, ran.err
    assert link.is_symlink() and (tmp_path / "made.json").read_text() == compiled


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_new_output_follows_the_umask(cli: Callable[..., Any], tmp_path: Path, mask: int,
                                        mode: int) -> None:
    """A new file gets 0666 minus the umask (not the temp file's 0600)."""
    out = tmp_path / "spec.json"
    with umask(mask):
        ran = cli("compile", str(GOOD), "-o", str(out))
    assert ran.code == 0, ran.err
    assert stat.S_IMODE(out.stat().st_mode) == mode


@pytest.mark.parametrize("mode", [0o644, 0o600, 0o640, 0o664])
def test_a_replaced_output_keeps_its_mode(cli: Callable[..., Any], tmp_path: Path,
                                          compiled: str, mode: int) -> None:
    """An existing output keeps its permission bits whatever the umask."""
    out = tmp_path / "spec.json"
    out.write_text(OLD)
    out.chmod(mode)
    with umask(0o077):
        ran = cli("compile", str(GOOD), "-o", str(out))
    assert ran.code == 0, ran.err
    assert out.read_text() == compiled
    assert stat.S_IMODE(out.stat().st_mode) == mode


@root_only
def test_a_replaced_output_keeps_its_owner(cli: Callable[..., Any], tmp_path: Path) -> None:
    """Run as root, a file owned by someone else stays theirs."""
    out = tmp_path / "spec.json"
    out.write_text(OLD)
    os.chown(out, 4242, 4343)
    ran = cli("compile", str(GOOD), "-o", str(out))
    assert ran.code == 0, ran.err
    assert (out.stat().st_uid, out.stat().st_gid) == (4242, 4343)


# -- outputs that are inputs ------------------------------------------------------------------


def _alias(tmp_path: Path, original: Path, how: str) -> str:
    """Another name for `original`: the same string, relative, through `..`, a symlink or a
    hard link."""
    if how == "same":
        return str(original)
    if how == "relative":
        return os.path.relpath(original)
    if how == "dotdot":
        return str(original.parent / ".." / original.parent.name / original.name)
    alias = tmp_path / f"alias{original.suffix}"
    if how == "symlink":
        alias.symlink_to(original)
    else:
        os.link(original, alias)
    return str(alias)


ALIASES = ["same", "relative", "dotdot", "symlink", "hardlink"]


@pytest.mark.parametrize("how", ALIASES)
def test_compile_refuses_to_overwrite_its_config(cli: Callable[..., Any], tmp_path: Path,
                                                 config: Path, how: str) -> None:
    """compile CFG -o CFG (under any name): exit 2 naming both, the YAML untouched."""
    out = _alias(tmp_path, config, how)
    before = snapshot(tmp_path)
    ran = cli("compile", str(config), "-o", out)
    assert (ran.code, ran.out) == (2, "")
    assert ran.err == f"kvreplay: refusing to write {out}: it is the config {config}\n"
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("how", ["same", "symlink", "hardlink"])
def test_run_refuses_to_overwrite_its_config(cli: Callable[..., Any], tmp_path: Path,
                                             mooncake: Path, how: str) -> None:
    """run CFG -o CFG: exit 2 before replaying, nothing changed."""
    out = _alias(tmp_path, mooncake, how)
    before = snapshot(tmp_path)
    ran = cli("run", str(mooncake), "-o", out)
    assert (ran.code, ran.out) == (2, "")
    assert ran.err == f"kvreplay: refusing to write {out}: it is the config {mooncake}\n"
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("option", ["-o", "--lifecycle"])
@pytest.mark.parametrize("how", ["same", "symlink", "hardlink"])
def test_run_refuses_to_overwrite_the_trace_given(cli: Callable[..., Any], tmp_path: Path,
                                                  mooncake: Path, how: str,
                                                  option: str) -> None:
    """run --trace T -o T (or --lifecycle T): exit 2 before replaying, the trace untouched."""
    trace = tmp_path / "traces" / "g2-restore-mooncake.jsonl"
    out = _alias(tmp_path, trace, how)
    before = snapshot(tmp_path)
    ran = cli("run", str(mooncake), "--trace", str(trace), option, out)
    assert (ran.code, ran.out) == (2, "")
    assert ran.err == f"kvreplay: refusing to write {out}: it is the trace {trace}\n"
    assert snapshot(tmp_path) == before


def test_run_refuses_to_overwrite_the_specs_own_trace(cli: Callable[..., Any], tmp_path: Path,
                                                      mooncake: Path) -> None:
    """run CFG -o TRACE where CFG names TRACE: exit 2 before replaying, the trace untouched."""
    trace = tmp_path / "traces" / "g2-restore-mooncake.jsonl"
    before = snapshot(tmp_path)
    ran = cli("run", str(mooncake), "-o", str(trace))
    assert (ran.code, ran.out) == (2, "")
    assert ran.err == f"kvreplay: refusing to write {trace}: it is the trace {trace}\n"
    assert snapshot(tmp_path) == before


def test_run_refuses_one_file_for_the_report_and_the_lifecycle(cli: Callable[..., Any],
                                                               tmp_path: Path,
                                                               mooncake: Path) -> None:
    """-o X --lifecycle X: exit 2, nothing written."""
    out = tmp_path / "both.json"
    ran = cli("run", str(mooncake), "-o", str(out), "--lifecycle", str(out))
    assert ran.code == 2
    assert ran.err == f"kvreplay: refusing to write {out}: it is the --lifecycle output {out}\n"
    assert not out.exists() and not list(tmp_path.glob(".kvreplay-*"))


@pytest.mark.parametrize("how", ["same", "symlink", "hardlink"])
def test_check_against_the_config_itself_is_refused(cli: Callable[..., Any], tmp_path: Path,
                                                    config: Path, how: str) -> None:
    """compile CFG --check CFG: exit 2, and no hint recommending `-o CFG`."""
    target = _alias(tmp_path, config, how)
    before = snapshot(tmp_path)
    ran = cli("compile", str(config), "--check", target)
    assert (ran.code, ran.out) == (2, "")
    assert ran.err == (f"kvreplay: --check {target} is the config {config} itself: check it "
                       "against the JSON it compiles to\n")
    assert snapshot(tmp_path) == before


def test_check_sibling_skips_a_sibling_that_is_the_config(cli: Callable[..., Any],
                                                          tmp_path: Path, config: Path) -> None:
    """--check-sibling where cfg.json is a link to cfg.yaml: skipped, not called stale."""
    (tmp_path / "cfg.json").symlink_to(config)
    ran = cli("compile", "--check-sibling", str(config))
    assert (ran.code, ran.out, ran.err) == (0, "", "")


def test_trace_convert_refuses_to_overwrite_its_source(cli: Callable[..., Any],
                                                       tmp_path: Path) -> None:
    """trace convert T -o T: exit 2, the plays untouched."""
    plays = tmp_path / "plays.jsonl"
    shutil.copy(REPO / "examples" / "traces" / "weka-g2-restore.jsonl", plays)
    before = snapshot(tmp_path)
    ran = cli("trace", "convert", str(plays), "-o", str(plays))
    assert ran.code == 2
    assert f"kvreplay: refusing to write {plays}: it is the trace {plays}\n" in ran.err
    assert snapshot(tmp_path) == before


# -- stdout that cannot be written ------------------------------------------------------------


@pytest.mark.parametrize("args", [
    ("compile", str(GOOD)),
    ("lint", "--format", "json", str(GOOD)),
    ("schema", "config"),
    ("--version",),
    ("compile", "--help"),
])
def test_stdout_on_a_full_disk_is_an_output_error(args: tuple[str, ...]) -> None:
    """`> /dev/full`: exit 2 and one line saying stdout could not be written (no "internal
    error", no traceback, no "Exception ignored")."""
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "kvreplay", *args], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr == "kvreplay: cannot write to stdout: No space left on device\n"


def test_a_closed_stdout_is_an_output_error() -> None:
    """`>&-`: exit 2 with one line."""
    done = subprocess.run([sys.executable, "-m", "kvreplay", "compile", str(GOOD)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          timeout=120, preexec_fn=lambda: os.close(1))
    assert (done.returncode, done.stderr) == (2, "kvreplay: cannot write to stdout: it is "
                                                 "closed\n")


def test_a_reader_that_goes_away_is_not_an_error() -> None:
    """`| head -c1`: the rest is dropped quietly, exit 0."""
    with subprocess.Popen([sys.executable, "-m", "kvreplay", "schema", "config"],  # 94 kB
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.read(1)
        proc.stdout.close()
        err = proc.stderr.read()
        assert (proc.wait(timeout=60), err) == (0, b"")


@pytest.mark.skipif(not os.path.exists("/proc/version"), reason="needs /proc")
def test_a_proc_file_says_why_it_cannot_be_replaced(cli: Callable[..., Any]) -> None:
    """-o /proc/version: exit 2 saying that no file can be created beside it (not a bare
    "No such file or directory" about a file that exists); /proc/version is unchanged."""
    before = Path("/proc/version").read_text()
    ran = cli("compile", str(GOOD), "-o", "/proc/version")
    assert ran.code == 2
    assert ran.err.startswith("kvreplay: cannot write /proc/version: no new file can be created "
                              "in /proc for the atomic replacement (")
    assert Path("/proc/version").read_text() == before
