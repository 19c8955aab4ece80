"""Refresh a notebook's stored outputs from its py:percent source, reproducibly.

Usage: python .ci/execute_notebooks.py notebooks/en/01-introduction.py [...]

Runs each script's cells in a fresh kernel of this environment, in the
notebook's folder (as nbval does), with no timing metadata, and writes the
paired .ipynb through Jupytext so the pair stays in sync.
"""

import os
import sys
from pathlib import Path

import jupytext
from nbclient import NotebookClient

KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}


def execute(source: Path) -> Path:
    notebook = jupytext.read(source)
    notebook.metadata["kernelspec"] = KERNELSPEC
    client = NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=120,
        record_timing=False,
        resources={"metadata": {"path": str(source.parent)}},
    )
    client.execute()
    target = source.with_suffix(".ipynb")
    jupytext.write(notebook, target, fmt="ipynb")
    return target


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    os.environ.setdefault("PYTHONHASHSEED", "0")
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    for path in paths:
        source = Path(path)
        if source.suffix != ".py" or not source.is_file():
            print(f"not a notebook source (.py): {path}", file=sys.stderr)
            return 2
        print(f"executed {execute(source)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
