"""Install the wheels `make gpu-wheels` carried, into a private folder, for gpu_check.

A borrowed GPU box has a Python with torch and little else; we neither touch its
environment nor reach a network. Each wheel whose distribution that Python already
has is left out (its own numpy stays in charge), the rest go into one folder with
``pip install --no-index --no-deps --target``, and that folder joins PYTHONPATH.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from gpu_lessons import last_json

# The distributions this Python already has (normalized names), as one JSON list.
INSTALLED = (
    "import importlib.metadata as m, json, re; "
    "print(json.dumps(sorted({re.sub(r'[-_.]+', '-', (d.metadata['Name'] or '')).lower() "
    "for d in m.distributions()})))"
)

# (exit code or None, seconds, output) of `python args...`, with an optional environment.
RunPython = Callable[..., tuple[int | None, float, str]]


def distribution(wheel: Path) -> str:
    """The normalized distribution name a wheel file installs (PEP 427 file names)."""
    return re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()


def install(run: RunPython, wheels: Path, site: Path) -> tuple[list[str], str]:
    """Install into ``site`` the carried wheels this Python lacks.

    Returns (distributions installed, a problem or ""). No wheels at all is no
    problem here: what is then missing shows up as a lesson that cannot finish.
    """
    found = sorted(wheels.rglob("*.whl")) if wheels.is_dir() else []
    if not found:
        return [], ""
    code, _, output = run(["-c", INSTALLED], "wheels-installed.log", 60)
    if code != 0:
        return [], f"could not list this Python's packages: {output.strip()[-200:]}"
    have = set(last_json(output))
    needed = [w for w in found if distribution(w) not in have]
    if not needed:
        return [], ""
    code, _, output = run(["-m", "pip", "--version"], "wheels-pip.log", 60)
    if code != 0:
        return [], "this Python has no pip to install the carried wheels with (python -m ensurepip)"
    args = ["-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--no-compile"]
    args += ["--disable-pip-version-check", "--target", str(site), *map(str, needed)]
    code, _, output = run(args, "wheels-install.log", 240)
    if code != 0:
        return [], f"pip could not install the carried wheels: {output.strip()[-300:]}"
    return sorted({distribution(w) for w in needed}), ""


def with_site(env: dict[str, str], site: Path) -> dict[str, str]:
    """``env`` with ``site`` first on PYTHONPATH (children inherit it, kernels too)."""
    path = [str(site), env.get("PYTHONPATH", "")]
    return {**env, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
