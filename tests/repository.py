"""What several test files need to know about this repository, said once."""

from __future__ import annotations

import importlib.util
import socket
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


def _load_tree_guard():
    spec = importlib.util.spec_from_file_location("tree_guard", ROOT / ".ci" / "tree_guard.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# `make notebooks` guards notebooks/ with it; the tests use the same record.
_TREE_GUARD = _load_tree_guard()


def notebooks_snapshot() -> dict[str, str]:
    """Every entry under notebooks/ with a hash of its content (.ci/tree_guard.py).

    Compared before and after a run, it shows whether the run wrote anything there.
    """
    return _TREE_GUARD.snapshot(NOTEBOOKS)


def notebooks_changes(before: dict[str, str]) -> list[str]:
    """What was written, changed or removed under notebooks/ since ``before``."""
    return _TREE_GUARD.differences(before, notebooks_snapshot())


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
