"""Render the repository address from pyproject.toml into every notebook source.

Usage: python .ci/sync_notebooks.py [--check]

The address lives in one place, ``[tool.d2l_gpu]`` of pyproject.toml. Each
notebook needs it twice, in its Colab badge and in its setup cell's Colab
install line, and notebooks/README.md in its Colab links. This script rewrites
those in the .py sources, the index and the GPU runs published in notebooks/gpu/
(their .ipynb carry the same badge and setup cell, and have no .py); ``--check``
only reports what is out of date and exits 1 if anything is. Run ``jupytext
--sync`` (``make sync``) afterwards to carry the change into the paired .ipynb files.
"""

import re
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
COLAB = re.compile(
    r"https://colab\.research\.google\.com/github/[^/\s]+/[^/\s]+/blob/[^/\s]+/"
    r"notebooks/(?P<path>(?:en|zh)/\d\d-[a-z0-9-]+\.ipynb)"
)
# A backslash ends it too: in an .ipynb the URL is followed by an escaped quote.
INSTALL = re.compile(r"git\+https://github\.com/[^/\s\"'\\]+/[^/\s\"'\\]+")


def render(text: str, repository: str, branch: str) -> str:
    """The text with every Colab link and Colab install URL pointing at ``repository``."""
    colab = f"https://colab.research.google.com/github/{repository}/blob/{branch}/notebooks/"
    text = COLAB.sub(lambda m: colab + m.group("path"), text)
    return INSTALL.sub(f"git+https://github.com/{repository}", text)


def main(argv: list[str]) -> int:
    if argv not in ([], ["--check"]):
        print(__doc__, file=sys.stderr)
        return 2
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["d2l_gpu"]
    stale = []
    published = sorted(NOTEBOOKS.glob("gpu/*/*/*.ipynb"))
    for path in sorted(NOTEBOOKS.glob("*/*.py")) + [NOTEBOOKS / "README.md"] + published:
        text = path.read_text(encoding="utf-8")
        new = render(text, tool["repository"], tool["branch"])
        if new != text:
            stale.append(path.relative_to(ROOT))
            if not argv:
                path.write_text(new, encoding="utf-8")
    verb = "out of date" if argv else "updated"
    for path in stale:
        print(f"{verb}: {path}")
    return 1 if argv and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
