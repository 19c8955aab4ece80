"""On Colab each lesson's setup cell installs d2l_gpu from git and keeps Colab's torch.

Two halves, both offline: the setup cell of every lesson, run under a simulated
Colab, asks for exactly one install (this repository, --no-deps); and that
install, pointed at a local clone instead of GitHub, puts d2l_gpu and nothing
else into a fresh environment, where it imports against a torch already there
(as Colab's is).

Neither half needs Jupyter: the setup cell is read from the paired ``.ipynb`` (what
Colab opens) as JSON, and it is plain Python (``get_ipython()`` calls, no ``%``
syntax: every lesson also runs as a plain script), so ``exec`` runs it as IPython
would.
"""

import json
import os
import shlex
import subprocess
import sys
import sysconfig
import types
from pathlib import Path
from unittest import mock

import pytest

from tests.repository import LESSON_SOURCES, ROOT, TOOL

GIT_URL = f"git+https://github.com/{TOOL['repository']}"
ALLOWED_FLAGS = {"--no-deps", "--quiet", "-q"}


class FakeIPython:
    """Records the shell commands and line magics a cell asks IPython to run."""

    def __init__(self) -> None:
        self.commands: list[str] = []

    def run_line_magic(self, name: str, line: str) -> None:
        self.commands.append(f"%{name} {line}")

    def system(self, command: str) -> None:
        self.commands.append(f"!{command}")


def _setup_cell(path: Path) -> str:
    notebook = json.loads(path.with_suffix(".ipynb").read_text(encoding="utf-8"))
    source = next(c["source"] for c in notebook["cells"] if c["cell_type"] == "code")
    return "".join(source) if isinstance(source, list) else source


def _run_setup_cell(path: Path, on_colab: bool) -> list[str]:
    """Run the lesson's first code cell as IPython would; return what it asked IPython to run."""
    shell = FakeIPython()
    code = _setup_cell(path)
    colab = {"google": types.ModuleType("google"), "google.colab": types.ModuleType("google.colab")}
    with (
        mock.patch.dict(sys.modules, colab if on_colab else {}),
        mock.patch.dict(os.environ),
    ):
        if not on_colab:
            sys.modules.pop("google.colab", None)
        exec(compile(code, str(path), "exec"), {"get_ipython": lambda: shell})
    return shell.commands


def _install_arguments(commands: list[str], path: Path) -> list[str]:
    installs = [c for c in commands if "install" in c]
    assert len(installs) == 1, f"{path.name}: expected one pip install on Colab, got {commands}"
    words = shlex.split(installs[0])
    assert words[0] in ("%pip", "!pip") and words[1] == "install", installs[0]
    return words[2:]


@pytest.fixture(scope="module")
def lessons() -> list[Path]:
    assert LESSON_SOURCES, "no lesson sources under notebooks/<lang>/"
    return LESSON_SOURCES


def test_every_setup_cell_on_colab_installs_this_repository_without_dependencies(lessons):
    for path in lessons:
        arguments = _install_arguments(_run_setup_cell(path, on_colab=True), path)
        flags = {a for a in arguments if a.startswith("-")}
        targets = [a for a in arguments if not a.startswith("-")]
        assert targets == [GIT_URL], f"{path.name} installs {targets}, not {GIT_URL}"
        assert "--no-deps" in flags, f"{path.name}: without --no-deps pip may replace Colab's torch"
        assert flags <= ALLOWED_FLAGS, f"{path.name}: unexpected pip options {flags}"


def test_no_setup_cell_installs_anything_off_colab(lessons):
    for path in lessons:
        assert _run_setup_cell(path, on_colab=False) == [], f"{path.name} runs commands off Colab"


def _git(*args: str) -> str:
    result = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"not a git checkout, so nothing to install from git: {result.stderr.strip()}")
    return result.stdout.strip()


def test_the_colab_install_from_git_adds_d2l_gpu_alone_and_imports(lessons, tmp_path):
    commit = _git("rev-parse", "HEAD")
    arguments = _install_arguments(_run_setup_cell(lessons[0], on_colab=True), lessons[0])
    local = [f"git+file://{ROOT}@{commit}" if a == GIT_URL else a for a in arguments]

    fresh = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", fresh], check=True)
    python = fresh / "bin" / "python"
    fresh_site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # Offline, the build borrows this environment's setuptools instead of fetching one.
    # Only setuptools is lent, and it is taken away again before the checks.
    outer_site = Path(sysconfig.get_path("purelib"))
    names = ["setuptools", "_distutils_hack", "distutils-precedence.pth"]
    names += [p.name for p in outer_site.glob("setuptools-*.dist-info")]  # its commands
    lent = [fresh_site / name for name in names]
    for path in lent:
        path.symlink_to(outer_site / path.name)
    # Without PYTHONPATH: a checkout on it (its d2l_gpu.egg-info) would pass for an install.
    alone = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--no-index",
         "--no-build-isolation", "--disable-pip-version-check", *local],
        capture_output=True,
        text=True,
        env=alone,
    )  # fmt: skip
    for path in lent:
        path.unlink()
    assert install.returncode == 0, install.stdout + install.stderr

    installed = sorted(p.name.split("-")[0] for p in fresh_site.glob("*.dist-info"))
    assert installed == ["d2l_gpu"], f"the install added {installed}"
    assert not (fresh_site / "torch").exists()

    # Colab already has torch: lend this environment's, placed after the fresh one.
    probe = (
        f"import sys; sys.path.append({str(outer_site)!r}); import d2l_gpu, torch; "
        "print(d2l_gpu.__file__); print(torch.__file__); print(d2l_gpu.try_gpu())"
    )
    imported = subprocess.run(
        [python, "-c", probe], capture_output=True, text=True, cwd=tmp_path, env=alone
    )
    assert imported.returncode == 0, imported.stderr
    d2l_file, torch_file, device = imported.stdout.split()
    assert Path(d2l_file).is_relative_to(fresh_site), d2l_file
    assert Path(torch_file).is_relative_to(outer_site), torch_file
    assert device.startswith(("cpu", "cuda", "mps", "xpu")), device
