"""On Colab the setup cell installs d2l_gpu from git and keeps Colab's own torch.

Offline: the setup cell (every lesson's, held to SETUP by tests/test_notebooks.py) runs
under a pretend Colab, and its install from a local clone instead of GitHub goes into a
fresh environment that has a torch already, as Colab has.
"""

import os
import shlex
import subprocess
import sys
import sysconfig
import types
from pathlib import Path
from unittest import mock

import pytest
import torch  # noqa: F401  (imported before the cell: patch.dict(sys.modules) would unload it)

import d2l_gpu  # noqa: F401  (the same)
from tests.test_notebooks import REPOSITORY, ROOT, SETUP

GIT_URL = f"git+https://github.com/{REPOSITORY}"


def _run_setup_cell(on_colab: bool) -> list[str]:
    """Run the setup cell as IPython would (it is plain Python); return its line magics."""
    magics = []  # the pretend IPython has no other method: any other call fails the test
    shell = types.SimpleNamespace(
        run_line_magic=lambda name, line: magics.append(f"%{name} {line}")
    )
    colab = {"google": types.ModuleType("google"), "google.colab": types.ModuleType("google.colab")}
    with mock.patch.dict(sys.modules, colab if on_colab else {}):
        if not on_colab:
            sys.modules.pop("google.colab", None)
        exec(compile(SETUP, "setup cell", "exec"), {"get_ipython": lambda: shell})
    return magics


def _install_arguments() -> list[str]:
    commands = _run_setup_cell(on_colab=True)
    assert len(commands) == 1, f"expected one pip install on Colab, got {commands}"
    words = shlex.split(commands[0])
    assert words[:2] == ["%pip", "install"], commands[0]
    return words[2:]


def test_the_setup_cell_installs_this_repository_alone_and_only_on_colab():
    assert _run_setup_cell(on_colab=False) == []
    arguments = _install_arguments()
    assert [a for a in arguments if not a.startswith("-")] == [GIT_URL]
    flags = {a for a in arguments if a.startswith("-")}
    assert "--no-deps" in flags, "without --no-deps pip may replace Colab's torch"
    assert flags <= {"--no-deps", "--quiet", "-q"}, f"unexpected pip options {flags}"


def _run(*args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, **kwargs)


def test_the_colab_install_adds_d2l_gpu_alone_and_imports_against_the_torch_there(tmp_path):
    commit = _run("git", "rev-parse", "HEAD", cwd=ROOT)
    if commit.returncode != 0:
        pytest.skip(f"not a git checkout, nothing to install from: {commit.stderr.strip()}")
    local = f"git+file://{ROOT}@{commit.stdout.strip()}"
    arguments = [local if a == GIT_URL else a for a in _install_arguments()]

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", tmp_path / "fresh"], check=True)
    python = tmp_path / "fresh" / "bin" / "python"
    where = "import sysconfig; print(sysconfig.get_path('purelib'))"
    fresh_site = Path(_run(python, "-c", where, check=True).stdout.strip())
    # Offline, the build borrows this environment's setuptools (and only that) for the install.
    outer_site = Path(sysconfig.get_path("purelib"))
    names = ["setuptools", "_distutils_hack", "distutils-precedence.pth"]
    lent = [fresh_site / n for n in names + [p.name for p in outer_site.glob("setuptools-*")]]
    for path in lent:
        path.symlink_to(outer_site / path.name)
    # Without PYTHONPATH: a checkout on it (its d2l_gpu.egg-info) would pass for an install.
    alone = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    pip = [sys.executable, "-m", "pip", "--python", python, "--disable-pip-version-check"]
    uncached = {**alone, "PIP_NO_CACHE_DIR": "1"}  # the wheel it builds stays out of ~/.cache
    install = _run(*pip, "install", "--no-index", "--no-build-isolation", *arguments, env=uncached)
    for path in lent:
        path.unlink()
    assert install.returncode == 0, install.stdout + install.stderr
    installed = sorted(p.name.split("-")[0] for p in fresh_site.glob("*.dist-info"))
    assert installed == ["d2l_gpu"], f"the install added {installed}"

    # Colab has torch already: lend this environment's, after the fresh one on the path.
    probe = f"import sys; sys.path.append({str(outer_site)!r}); import d2l_gpu, torch; "
    probe += "print(d2l_gpu.__file__); print(torch.__file__); print(d2l_gpu.try_gpu())"
    imported = _run(python, "-c", probe, cwd=tmp_path, env=alone)
    assert imported.returncode == 0, imported.stderr
    d2l_file, torch_file, device = imported.stdout.split()
    assert Path(d2l_file).is_relative_to(fresh_site), d2l_file
    assert Path(torch_file).is_relative_to(outer_site), torch_file
    assert device.split(":")[0] in ("cpu", "cuda", "mps", "xpu"), device
