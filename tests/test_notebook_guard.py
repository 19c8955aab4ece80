"""`make notebooks` fails when a run writes under notebooks/ or leaves files in its TMPDIR.

Each case runs .ci/tree_guard.py in a small git repository laid out like this one, with
an untracked folder, an ignored folder and an already modified file: the places where
comparing `git status` before and after sees nothing.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.repository import ROOT

GUARD = ROOT / ".ci" / "tree_guard.py"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _git_view(repo: Path) -> str:
    """What the old guard compared."""
    return _git(repo, "status", "--porcelain", "--ignored", "notebooks")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "notebooks" / "en").mkdir(parents=True)
    (repo / ".gitignore").write_text("__pycache__/\n")
    (repo / "notebooks" / "en" / "01-a.py").write_text("print(1)\n")
    (repo / "notebooks" / "en" / "notes.txt").write_text("first\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "start")
    (repo / "notebooks" / "en" / "notes.txt").write_text("first change\n")  # already modified
    (repo / "notebooks" / "scratch").mkdir()  # an untracked folder: one line in git status
    (repo / "notebooks" / "scratch" / "old.txt").write_text("old\n")
    (repo / "notebooks" / "en" / "__pycache__").mkdir()  # an ignored folder
    (repo / "notebooks" / "en" / "__pycache__" / "a.pyc").write_bytes(b"\0")
    return repo


def _guard(repo: Path, script: str, env: dict[str, str] | None = None):
    """The guard over notebooks/, around a shell command run in the repository."""
    return subprocess.run(
        [sys.executable, str(GUARD), "notebooks", "--", "sh", "-c", script],
        cwd=repo,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


# Where git's before/after view stays the same, the old guard passed.
GIT_BLIND = [
    ("echo x > notebooks/scratch/leak.txt", "new:     notebooks/scratch/leak.txt"),
    ("echo again > notebooks/en/notes.txt", "changed: notebooks/en/notes.txt"),
    ("echo x > notebooks/en/__pycache__/b.pyc", "new:     notebooks/en/__pycache__/b.pyc"),
    ("echo x > notebooks/en/__pycache__/a.pyc", "changed: notebooks/en/__pycache__/a.pyc"),
    ("echo x > notebooks/scratch/old.txt", "changed: notebooks/scratch/old.txt"),
]
OTHER_WRITES = [
    ("mkdir -p notebooks/new/deep && echo x > notebooks/new/deep/leak.txt",
     "new:     notebooks/new/deep/leak.txt"),
    ("echo x > notebooks/en/02-b.py", "new:     notebooks/en/02-b.py"),
    ("echo 'print(2)' > notebooks/en/01-a.py", "changed: notebooks/en/01-a.py"),
    ("rm notebooks/scratch/old.txt", "gone:    notebooks/scratch/old.txt"),
    ("mkdir notebooks/empty", "new:     notebooks/empty"),
    ("ln -s /etc notebooks/link", "new:     notebooks/link"),
    ("chmod +x notebooks/en/01-a.py", "changed: notebooks/en/01-a.py"),
]  # fmt: skip


@pytest.mark.parametrize(("script", "line"), GIT_BLIND, ids=[s for s, _ in GIT_BLIND])
def test_writes_that_git_status_does_not_show_are_named(repo, script, line):
    git_before = _git_view(repo)
    result = _guard(repo, script)
    assert _git_view(repo) == git_before, "this case is meant to be invisible to git status"
    assert result.returncode == 1, result.stdout + result.stderr
    assert line in result.stdout


@pytest.mark.parametrize(("script", "line"), OTHER_WRITES, ids=[s for s, _ in OTHER_WRITES])
def test_every_other_write_under_the_folder_is_named(repo, script, line):
    result = _guard(repo, script)
    assert result.returncode == 1, result.stdout + result.stderr
    assert line in result.stdout


def test_only_the_paths_written_are_named(repo):
    result = _guard(repo, "echo x > notebooks/scratch/leak.txt")
    named = [line.strip() for line in result.stdout.splitlines() if line.startswith("  ")]
    assert named == ["new:     notebooks/scratch/leak.txt"]


def test_a_run_that_writes_nothing_passes_quietly(repo):
    result = _guard(repo, "cat notebooks/en/01-a.py > /dev/null; touch notebooks/en/01-a.py")
    assert (result.returncode, result.stdout) == (0, "")


def test_the_command_s_own_failure_is_its_exit_status(repo):
    assert _guard(repo, "exit 3").returncode == 3
    result = _guard(repo, "echo x > notebooks/leak.txt; exit 3")
    assert result.returncode == 3
    assert "new:     notebooks/leak.txt" in result.stdout


def test_the_command_gets_a_private_tmpdir_that_is_removed(repo):
    result = _guard(repo, 'echo "$TMPDIR"; stat -c %a "$TMPDIR" "$TMPDIR/.."')
    assert result.returncode == 0, result.stdout + result.stderr
    tmpdir, mode, parent_mode = result.stdout.split()
    assert Path(tmpdir).parent.parent == Path(os.environ.get("TMPDIR") or tempfile.gettempdir())
    assert mode == parent_mode == "700"
    assert not Path(tmpdir).parent.exists()


def test_torch_s_compile_cache_is_kept_out_of_tmpdir_and_removed(repo):
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
    script = 'mkdir -p "$TORCHINDUCTOR_CACHE_DIR/x"; echo "$TORCHINDUCTOR_CACHE_DIR"'
    result = _guard(repo, script, env=env)
    assert (result.returncode, result.stdout.count("\n")) == (0, 1), result.stdout
    cache = Path(result.stdout.strip())
    assert cache.parent.parent == Path(os.environ.get("TMPDIR") or tempfile.gettempdir())
    assert not cache.exists()


def test_what_is_left_in_tmpdir_is_named_and_removed(repo):
    script = 'echo "$TMPDIR"; mkdir "$TMPDIR/torchelastic_x1y2" && touch "$TMPDIR/stray.txt"'
    result = _guard(repo, script)
    assert result.returncode == 1
    tmpdir = result.stdout.splitlines()[0]
    assert f"temporary folder {tmpdir}" in result.stdout
    assert "  stray.txt" in result.stdout
    assert "  torchelastic_x1y2/" in result.stdout
    assert not Path(tmpdir).exists()


def test_the_tmpdir_is_removed_after_ctrl_c(repo):
    script = 'mkdir "$TMPDIR/torchelastic_x"; echo "$TMPDIR"; sleep 60'
    guard = subprocess.Popen(
        [sys.executable, str(GUARD), "notebooks", "--", "sh", "-c", script],
        cwd=repo,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    tmpdir = Path(guard.stdout.readline().strip())
    assert tmpdir.is_dir()
    os.killpg(guard.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
    rest = guard.stdout.read()
    assert guard.wait(timeout=30) != 0
    assert "  torchelastic_x/" in rest
    assert not tmpdir.exists()


@pytest.mark.parametrize(
    "argv", [[], ["notebooks"], ["notebooks", "sh"], ["missing", "--", "true"]]
)
def test_usage_errors(repo, argv):
    result = subprocess.run(
        [sys.executable, str(GUARD), *argv], cwd=repo, capture_output=True, text=True
    )
    assert result.returncode == 2
    assert "usage: tree_guard.py FOLDER -- COMMAND" in result.stderr


# `make notebooks` itself, on a one-notebook copy of this repository's layout, with this
# checkout's venv: the guard is wired in, and nbval's kernel gets the private TMPDIR.
LEAKY_CELL = """import os, pathlib, tempfile
if os.environ.get("LEAK_FILE"):
    pathlib.Path(os.environ["LEAK_FILE"]).write_text("x")
if os.environ.get("LEAK_TMP"):
    os.mkdir(os.path.join(tempfile.gettempdir(), os.environ["LEAK_TMP"]))"""


@pytest.fixture
def make_repo(repo: Path) -> Path:
    shutil.copy2(ROOT / "Makefile", repo / "Makefile")
    (repo / ".ci").mkdir()
    shutil.copy2(GUARD, repo / ".ci" / GUARD.name)
    (repo / "tests").mkdir()
    shutil.copy2(ROOT / "tests" / "nbval-sanitize.cfg", repo / "tests")
    notebook = {
        "cells": [
            {"cell_type": "code", "execution_count": 1, "id": "leak", "metadata": {},
             "outputs": [], "source": LEAKY_CELL},
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                    "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }  # fmt: skip
    (repo / "notebooks" / "en" / "01-a.ipynb").write_text(json.dumps(notebook))
    # The venv's stamp must look newer than these, or make would reinstall.
    for name in ("pyproject.toml", "constraints.txt"):
        (repo / name).write_text("")
        os.utime(repo / name, (0, 0))
    return repo


def _make_notebooks(repo: Path, **leak: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "LEAK_"))}
    return subprocess.run(
        ["make", "--no-print-directory", "notebooks", f"VENV={ROOT / '.venv'}"],
        cwd=repo,
        capture_output=True,
        text=True,
        env={**env, **leak},
        timeout=300,
    )


def test_make_notebooks_passes_a_notebook_that_writes_nothing(make_repo):
    result = _make_notebooks(make_repo)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


def test_make_notebooks_names_a_file_written_in_an_existing_folder(make_repo):
    result = _make_notebooks(make_repo, LEAK_FILE=str(make_repo / "notebooks/scratch/leak.txt"))
    assert result.returncode != 0
    assert "new:     notebooks/scratch/leak.txt" in result.stdout


def test_make_notebooks_names_what_a_run_leaves_in_tmpdir(make_repo):
    result = _make_notebooks(make_repo, LEAK_TMP="torchelastic_test")
    assert result.returncode != 0
    assert "  torchelastic_test/" in result.stdout
