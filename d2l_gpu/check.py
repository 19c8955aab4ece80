"""Check that this environment can run the tutorial, one [OK] / [FAIL] line each."""

from __future__ import annotations

import argparse
import importlib.metadata as metadata

import torch

from .devices import accelerator_type, num_gpus

# Package -> what it is needed for; torch is checked separately.
_NOTEBOOK_PACKAGES = {
    "jupyterlab": "opening the notebooks",
    "jupytext": "pairing .py and .ipynb files",
    "matplotlib": "the plots",
    "numpy": "the NumPy comparisons",
}
MIN_TORCH = (2, 6)


def _torch_line() -> tuple[bool, str]:
    major, minor = (int(p) for p in torch.__version__.split(".")[:2])
    ok = (major, minor) >= MIN_TORCH
    need = ".".join(map(str, MIN_TORCH))
    return ok, f"torch {torch.__version__} (need >= {need})"


def _device_line() -> str:
    kind = accelerator_type()
    if kind is None:
        return (
            "no GPU found: every notebook still runs on the CPU; for GPU timings use "
            "Colab (Runtime > Change runtime type > GPU) or a machine with CUDA or MPS"
        )
    return f"{num_gpus()} {kind} device(s) found"


def check_lines(packages: dict[str, str] | None = None) -> list[tuple[bool, str]]:
    """Each requirement as (passed, description)."""
    lines = [_torch_line()]
    for name, why in (packages if packages is not None else _NOTEBOOK_PACKAGES).items():
        try:
            lines.append((True, f"{name} {metadata.version(name)}"))
        except metadata.PackageNotFoundError:
            fix = "pip install 'd2l-gpu[notebooks]'"
            lines.append((False, f"{name} is missing (needed for {why}): {fix}"))
    return lines


def run(args: argparse.Namespace) -> int:
    lines = check_lines({} if args.core else None)
    for ok, text in lines:
        print(f"[{'OK' if ok else 'FAIL'}] {text}")
    print(f"[INFO] {_device_line()}")
    return 0 if all(ok for ok, _ in lines) else 1
