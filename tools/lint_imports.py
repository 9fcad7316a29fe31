"""Check the layers (pyproject's [tool.importlinter] contracts) with import-linter.

    python tools/lint_imports.py [--add PATH=TEXT ...] [lint-imports options]

import-linter finds a package by walking its folder, and kvreplay's layers live in folders of
their own (pyproject's package-dir), so this runs `lint-imports` on the installed layout built
from symlinks (package_tree.py). `--add engine/probe.py='import kvreplay.compiler'` adds a module
to that layout (to see a contract break). Exit 0 when every contract is kept, 1 when one is
broken, 2 when lint-imports is missing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from package_tree import REPO, stage


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--add", action="append", default=[], metavar="PATH=TEXT",
                        help="a module to add, PATH inside the kvreplay package")
    args, rest = parser.parse_known_args(argv)
    extra = dict(item.split("=", 1) for item in args.add)
    command = shutil.which("lint-imports", path=os.path.dirname(sys.executable)) \
        or shutil.which("lint-imports")
    if command is None:
        sys.stderr.write("lint_imports.py: lint-imports is not installed "
                         "(pip install -e '.[test]')\n")
        return 2
    with tempfile.TemporaryDirectory(prefix="kvreplay-imports-") as tmp:
        stage(Path(tmp), extra)
        # lint-imports puts its working folder first on sys.path: there `kvreplay` is the staged
        # tree, not the editable install's source folder.
        env = {**os.environ, "PYTHONPATH": tmp}
        return subprocess.run([command, str(REPO / "pyproject.toml"), "--no-cache", *rest],
                              cwd=tmp, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
