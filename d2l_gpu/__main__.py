"""``python -m d2l_gpu``: ``info`` (the devices) and ``check`` (this environment).

Exit status: 0 all well, 1 a failed check (or a bad ``D2L_DEVICE``), 2 a usage error.
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict

import torch

from . import __version__
from .devices import ENV_VAR, _hardware_gpus
from .report import device_info, device_report, helpers_use, software_versions

_NOTEBOOK_PACKAGES = {
    "jupyterlab": "opening the notebooks",
    "jupytext": "pairing .py and .ipynb files",
    "matplotlib": "the plots",
    "numpy": "the NumPy comparisons",
}

_NO_GPU = (
    "no GPU found: every notebook still runs on the CPU; for GPU timings use "
    "Colab (Runtime > Change runtime type > GPU) or a machine with CUDA or MPS"
)


def check_lines(packages: dict[str, str] | None = None) -> list[tuple[bool, str]]:
    """Each requirement as (passed, description); a bad ``D2L_DEVICE`` fails, naming
    the valid values. (An older torch stops ``import d2l_gpu`` itself.)"""
    lines = [(True, f"torch {torch.__version__}")]
    if os.environ.get(ENV_VAR):
        ok, use = helpers_use()
        lines.append(
            (ok, f"{ENV_VAR}={os.environ[ENV_VAR]!r}: the helpers use {use}" if ok else use)
        )
    for name, why in (packages if packages is not None else _NOTEBOOK_PACKAGES).items():
        try:
            lines.append((True, f"{name} {metadata.version(name)}"))
        except metadata.PackageNotFoundError:
            fix = "pip install 'd2l-gpu[notebooks]'"
            lines.append((False, f"{name} is missing (needed for {why}): {fix}"))
    return lines


def _check(args: argparse.Namespace) -> int:
    lines = check_lines({} if args.core else None)
    for ok, text in lines:
        print(f"[{'OK' if ok else 'FAIL'}] {text}")
    gpus = _hardware_gpus()  # the hardware, whatever D2L_DEVICE says
    print(f"[INFO] {f'{len(gpus)} {gpus[0].type} device(s) found' if gpus else _NO_GPU}")
    return 0 if all(ok for ok, _ in lines) else 1


def _info(args: argparse.Namespace) -> int:
    ok, use = helpers_use()  # the table is printed whatever D2L_DEVICE says
    if args.json:
        rows = [asdict(r) for r in device_info()]
        use = use if ok else f"[FAIL] {use}"
        print(json.dumps({"devices": rows, "helpers use": use, "software": software_versions()}))
    else:
        print(device_report())
    return 0 if ok else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m d2l_gpu", description=__doc__)
    parser.add_argument("--version", action="version", version=f"d2l_gpu {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    info = sub.add_parser(
        "info",
        help="print the devices, their memory and software versions",
        description="Print every device, its memory, which ones the helpers use, and versions.",
    )
    info.add_argument("--json", action="store_true", help="print JSON instead of a table")
    info.set_defaults(handler=_info)
    check = sub.add_parser(
        "check",
        help="check this environment; prints [OK] / [FAIL] lines",
        description="Check this environment can run the tutorial: one [OK] / [FAIL] line each.",
    )
    check.add_argument("--core", action="store_true", help="check torch, not the notebook extras")
    check.set_defaults(handler=_check)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    try:
        status = main()
        sys.stdout.flush()  # inside the try: a closed pipe often shows only here
    except BrokenPipeError:
        # The reader stopped reading (`| head`): normal for a CLI. Python would
        # report the unflushed rest again at exit, so stdout goes to devnull.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = 1
    sys.exit(status)
