"""What several test files need to know about this repository, said once."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser, as a package
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
LANGUAGES = ("en", "zh")
# notebooks/scripts/ holds programs the notebooks run (torchrun demos), not lessons.
LESSON_SOURCES = sorted(p for lang in LANGUAGES for p in (NOTEBOOKS / lang).glob("*.py"))
# [tool.d2l_gpu] in pyproject.toml: the repository address the notebooks link to.
TOOL = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["d2l_gpu"]


def notebooks_status() -> str:
    """New, changed and ignored files under notebooks/, as git sees them.

    Compared before and after a run, it shows whether the run left anything behind.
    """
    return subprocess.run(
        ["git", "status", "--porcelain", "--ignored", "--untracked-files=all", "--", "notebooks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
