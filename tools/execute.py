"""Refresh the stored outputs of lessons.

Usage: python tools/execute.py notebooks/en/01-introduction.py [...]

Each py:percent source runs in a fresh kernel of this environment, in its own folder
(as nbval runs it), and its paired .ipynb is written through Jupytext with
notebooks/jupytext.toml, so the pair stays in sync. Cells keep the ids they had in the
previous .ipynb, and new cells get ids from their content, so a re-run's diff shows
only what really changed. The notebook's metadata records what made the outputs (device,
torch version, date) under "executed": `make site` prints it on the lesson's page.
"""

import hashlib
import os
import signal
import sys
from collections import Counter
from datetime import datetime, timezone
from difflib import SequenceMatcher
from pathlib import Path

import jupytext
import nbformat
from jupytext.config import load_jupytext_config
from nbclient import NotebookClient

KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}


def keep_cell_ids(notebook: nbformat.NotebookNode, previous: Path) -> None:
    """Give each cell the id of its counterpart in the previous .ipynb (same or edited source)."""
    old = nbformat.read(previous, as_version=4).cells if previous.exists() else []
    for i, cell in enumerate(notebook.cells):  # a new cell: an id from its content, not random
        cell.id = hashlib.sha1(f"{i}\n{cell.source}".encode()).hexdigest()[:8]
    key = [(c.cell_type, c.source) for c in old], [(c.cell_type, c.source) for c in notebook.cells]
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, *key, autojunk=False).get_opcodes():
        edited = [c for c in old[i1:i2] if tag in ("equal", "replace")]
        for cell in notebook.cells[j1:j2]:  # edited cells: paired in order, by cell type
            same = [c for c in edited if c.cell_type == cell.cell_type]
            if same:
                cell.id = same[0].id
                edited.remove(same[0])


def what_runs_here() -> dict[str, str]:
    """The device the lessons find, torch's version and today's date (UTC). Read in this
    process: the kernel runs in the same environment, so it sees the same devices."""
    import torch  # here only: the module stays importable without torch

    device = "CPU"
    if torch.accelerator.is_available():
        kind = torch.accelerator.current_accelerator().type
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        if kind != "cuda" or not names:
            names = [kind.upper()]  # MPS, XPU, ...: torch names no model
        device = ", ".join(f"{n} × {name}" if n > 1 else name for name, n in Counter(names).items())
    today = datetime.now(timezone.utc).date().isoformat()
    return {"device": device, "torch": torch.__version__, "date": today}


def execute(source: Path, timeout: int = 120) -> Path:
    config = load_jupytext_config(str(source.parent.resolve()))
    notebook = jupytext.read(source, config=config)
    notebook.metadata.get("jupytext", {}).pop("text_representation", None)
    notebook.metadata["kernelspec"] = KERNELSPEC
    target = source.with_suffix(".ipynb")
    keep_cell_ids(notebook, target)
    client = NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=timeout,
        record_timing=False,
        resources={"metadata": {"path": str(source.parent)}},
        extra_arguments=["--IPKernelApp.log_level=CRITICAL"],  # its log is not the lesson's
    )
    try:
        client.execute()
    except Exception:  # nbclient's handler of SIGINT and SIGTERM stops the kernel, then fails
        if hasattr(client, "_async_cleanup_kernel_future"):  # set by that handler alone
            raise KeyboardInterrupt from None
        raise
    notebook.metadata["executed"] = what_runs_here()  # after the run: a stopped one needs no torch
    jupytext.write(notebook, target, fmt="ipynb", config=config)
    return target


def main(paths: list[str]) -> int:
    sources = [Path(p) for p in paths]
    if not sources or any(p.suffix != ".py" or not p.is_file() for p in sources):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    os.environ["PYTHONHASHSEED"] = "0"  # kernels inherit it: set ordering stays the same
    for source in sources:
        signal.signal(signal.SIGTERM, signal.default_int_handler)  # as Ctrl-C (nbclient resets it)
        try:
            print(f"executed {execute(source)}")
        except KeyboardInterrupt:
            print(f"interrupted: {source.with_suffix('.ipynb')} not written", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
