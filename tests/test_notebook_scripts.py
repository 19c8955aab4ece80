"""Every notebook source runs as a plain Python script, as on a bare GPU box without Jupyter.

Each ``notebooks/<lang>/NN-*.py`` is run with this environment's Python from its
own folder: it must exit 0 and leave the repository as it found it.
"""

import os
import subprocess
import sys

import pytest

from tests.repository import LESSON_SOURCES, NOTEBOOKS, notebooks_status

# Far above what any notebook needs; a hung script fails instead of stalling CI.
TIMEOUT = 300


def test_every_language_has_notebook_sources():
    assert {p.parent.name for p in LESSON_SOURCES} == {"en", "zh"}


@pytest.mark.parametrize("path", LESSON_SOURCES, ids=lambda p: str(p.relative_to(NOTEBOOKS)))
def test_notebook_source_runs_as_a_plain_script(path):
    before = notebooks_status()
    # Agg: figures are drawn but never shown, as on a machine without a display.
    env = {**os.environ, "MPLBACKEND": "Agg"}
    try:
        proc = subprocess.run(
            [sys.executable, path.name],
            cwd=path.parent,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"python {path.name} still running after {TIMEOUT} s")
    assert proc.returncode == 0, (
        f"python {path.name} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    )
    assert notebooks_status() == before, f"python {path.name} left files in the repository"
