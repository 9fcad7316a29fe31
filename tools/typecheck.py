"""Run mypy --strict on the library as one `kvreplay` package (python tools/typecheck.py).

The source folders map into one namespace (pyproject's package-dir), which mypy cannot follow from
the repository layout, so this runs it on that layout built from symlinks (package_tree.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from package_tree import stage


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="kvreplay-mypy-") as tmp:
        stage(Path(tmp))
        command = [sys.executable, "-m", "mypy", "--strict", "--python-version", "3.11",
                   "--no-incremental", "-p", "kvreplay"]
        return subprocess.run(command, cwd=tmp, env={**os.environ, "MYPYPATH": tmp}).returncode


if __name__ == "__main__":
    sys.exit(main())
