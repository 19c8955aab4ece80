"""Refresh a notebook's stored outputs from its py:percent source, reproducibly.

Usage: python .ci/execute_notebooks.py notebooks/en/01-introduction.py [...]

Each script runs in a fresh kernel of this environment, in the notebook's
folder (as nbval runs it), and the paired .ipynb is written through Jupytext
with the repository's jupytext.toml, so the pair stays in sync. Running it twice
on an unchanged script changes nothing but what truly varies (timings, figures):

- cell ids are kept from the existing .ipynb (matched by source, then by
  position), and a new cell gets an id derived from its content, not a random one;
- no execution timestamps (``record_timing=False``) and no kernel-session data;
- torch, Python and NumPy are seeded by the notebooks themselves, and
  PYTHONHASHSEED is fixed here;
- stored tracebacks name files relative to the repository or to site-packages,
  not by this machine's absolute paths.
"""

import hashlib
import os
import re
import site
import sys
from pathlib import Path

import jupytext
import nbformat
from jupytext.config import load_jupytext_config
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}


def _content_id(cell: nbformat.NotebookNode, taken: set[str]) -> str:
    """An id that depends only on the cell, made unique within the notebook."""
    digest = hashlib.sha1(f"{cell.cell_type}\n{cell.source}".encode()).hexdigest()
    candidate, n = digest[:8], 1
    while candidate in taken:
        candidate, n = f"{digest[:8]}-{n}", n + 1
    return candidate


def reuse_cell_ids(notebook: nbformat.NotebookNode, previous: Path) -> None:
    """Give each cell the id it had in ``previous`` so re-runs do not churn ids."""
    old_cells = nbformat.read(previous, as_version=4).cells if previous.exists() else []
    free = {c.get("id") for c in old_cells} - {None}
    taken: set[str] = set()
    pending = []
    for cell in notebook.cells:
        match = next(
            (c.id for c in old_cells if c.get("id") in free and c.source == cell.source), None
        )
        if match is None:
            pending.append(cell)
        else:
            free.discard(match)
            cell.id = match
            taken.add(match)
    for cell in pending:
        index = notebook.cells.index(cell)
        old = old_cells[index] if index < len(old_cells) else None
        if old is not None and old.get("id") in free and old.cell_type == cell.cell_type:
            free.discard(old.id)
            cell.id = old.id
        else:
            cell.id = _content_id(cell, taken | free)
        taken.add(cell.id)


def _path_prefixes() -> list[tuple[str, str]]:
    """Absolute folders to strip from tracebacks, longest first, with their stand-ins."""
    prefixes = [(p, "<site-packages>") for p in site.getsitepackages()]
    prefixes += [(sys.prefix, "<python>"), (str(ROOT), "<repository>")]
    pairs = [(str(Path(p)) + os.sep, f"{name}/") for p, name in prefixes]
    return sorted(pairs, key=lambda pair: -len(pair[0]))


def strip_local_paths(notebook: nbformat.NotebookNode) -> None:
    """Replace this machine's folders in stored tracebacks with short stand-ins."""
    prefixes = _path_prefixes()
    pattern = re.compile("|".join(re.escape(p) for p, _ in prefixes))
    names = dict(prefixes)
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output.traceback = [
                    pattern.sub(lambda m: names[m.group(0)], line) for line in output.traceback
                ]


def execute(source: Path) -> Path:
    config = load_jupytext_config(str(source.parent.resolve()))
    notebook = jupytext.read(source, config=config)
    notebook.metadata.get("jupytext", {}).pop("text_representation", None)
    notebook.metadata["kernelspec"] = KERNELSPEC
    target = source.with_suffix(".ipynb")
    reuse_cell_ids(notebook, target)
    client = NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=120,
        record_timing=False,
        resources={"metadata": {"path": str(source.parent)}},
    )
    client.execute()
    strip_local_paths(notebook)
    jupytext.write(notebook, target, fmt="ipynb", config=config)
    return target


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    sources = [Path(p) for p in paths]
    for source in sources:
        if source.suffix != ".py" or not source.is_file():
            print(f"not a notebook source (.py file): {source}", file=sys.stderr)
            return 2
    # Set before any kernel starts: kernels inherit this process's environment.
    os.environ["PYTHONHASHSEED"] = "0"
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    for source in sources:
        print(f"executed {execute(source)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
