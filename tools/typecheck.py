"""Run mypy --strict on the library as one `kvreplay` package (python tools/typecheck.py).

The source folders map into one namespace (pyproject's package-dir), which mypy cannot follow from
the repository layout, so this builds that layout from symlinks in a temporary folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MAPPED = {"compiler": "compiler", "engine": "engine", "rules": "rules", "schema": "schema"}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="kvreplay-mypy-") as tmp:
        package = Path(tmp) / "kvreplay"
        package.mkdir()
        for entry in (REPO / "kvreplay").iterdir():
            if entry.name != "__pycache__":
                os.symlink(entry, package / entry.name)
        for name, folder in MAPPED.items():
            os.symlink(REPO / folder, package / name)
        command = [sys.executable, "-m", "mypy", "--strict", "--python-version", "3.11",
                   "--no-incremental", "-p", "kvreplay"]
        return subprocess.run(command, cwd=tmp, env={**os.environ, "MYPYPATH": tmp}).returncode


if __name__ == "__main__":
    sys.exit(main())
