"""Check that this environment can run the tutorial, one [OK] / [FAIL] line each."""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import os

import torch

from .devices import ENV_VAR, _hardware_gpus, try_all_gpus

# Package -> what it is needed for; torch is checked separately.
_NOTEBOOK_PACKAGES = {
    "jupyterlab": "opening the notebooks",
    "jupytext": "pairing .py and .ipynb files",
    "matplotlib": "the plots",
    "numpy": "the NumPy comparisons",
}


def _environment_line() -> tuple[bool, str]:
    try:
        chosen = ", ".join(str(d) for d in try_all_gpus())
    except ValueError as error:  # it names the value and the valid ones
        return False, str(error)
    return True, f"{ENV_VAR}={os.environ[ENV_VAR]!r}: the helpers use {chosen}"


def _device_line() -> str:
    gpus = _hardware_gpus()  # the hardware, whatever D2L_DEVICE says
    if not gpus:
        return (
            "no GPU found: every notebook still runs on the CPU; for GPU timings use "
            "Colab (Runtime > Change runtime type > GPU) or a machine with CUDA or MPS"
        )
    return f"{len(gpus)} {gpus[0].type} device(s) found"


def check_lines(packages: dict[str, str] | None = None) -> list[tuple[bool, str]]:
    """Each requirement as (passed, description)."""
    # An older torch stops `import d2l_gpu` itself, with the version it needs.
    lines = [(True, f"torch {torch.__version__}")]
    if os.environ.get(ENV_VAR):
        lines.append(_environment_line())
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
