"""``python -m d2l_gpu``: ``info`` (the devices) and ``check`` (this environment).

Exit status: 0 all well, 1 a failed check, 2 a usage error.
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import json
import os
import sys
from collections.abc import Sequence

import torch

from . import __version__
from .devices import accelerator_type, num_gpus
from .report import device_info, device_report, listed_gpus

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
_TAGS = {True: "OK", False: "FAIL", None: "INFO"}
_HIDING = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")  # "" or -1: GPUs hidden on purpose


def check_lines(packages: dict[str, str] | None = None) -> list[tuple[bool | None, str]]:
    """Each requirement as (passed, description), passed None for a note. (An older torch
    stops the import.)"""
    lines = [(True, f"torch {torch.__version__}")]
    for name, why in (packages if packages is not None else _NOTEBOOK_PACKAGES).items():
        try:
            lines.append((True, f"{name} {metadata.version(name)}"))
        except metadata.PackageNotFoundError:
            fix = "pip install 'd2l-gpu[notebooks]'"
            lines.append((False, f"{name} is missing (needed for {why}): {fix}"))
    hidden = any(os.environ.get(v, "unset").strip() in ("", "-1") for v in _HIDING)
    try:
        listed = [] if num_gpus() or hidden else listed_gpus()
    except TimeoutError as hung:
        listed = []
        lines.append((None, f"{hung}: whether it lists a GPU torch cannot see is unknown"))
    if listed:  # the machine has a GPU, and nobody hid it from torch on purpose
        lines.append((False, (
            f"nvidia-smi lists {'; '.join(listed)}, but torch {torch.__version__} (built for "
            f"CUDA {torch.version.cuda or 'none'}) sees no GPU: a CPU-only torch, or a driver "
            "too old for this build; install a torch built for this GPU"
        )))  # fmt: skip
    return lines


def _check(args: argparse.Namespace) -> int:
    lines = check_lines({} if args.core else None)
    for ok, text in lines:
        print(f"[{_TAGS[ok]}] {text}")
    n = num_gpus()
    print(f"[INFO] {f'{n} {accelerator_type()} device(s) found' if n else _NO_GPU}")
    return 1 if any(ok is False for ok, _ in lines) else 0


def _info(args: argparse.Namespace) -> int:
    print(json.dumps(device_info()) if args.json else device_report())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m d2l_gpu", description=__doc__)
    parser.add_argument("--version", action="version", version=f"d2l_gpu {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    info = sub.add_parser("info", help="print every device, its memory, and software versions")
    info.add_argument("--json", action="store_true", help="print JSON instead of a table")
    info.set_defaults(handler=_info)
    check = sub.add_parser("check", help="check this environment: one [OK] / [FAIL] line each")
    check.add_argument("--core", action="store_true", help="check torch, not the notebook extras")
    check.set_defaults(handler=_check)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    try:
        if sys.stdout is None:  # started with its output closed (`>&-`)
            raise OSError("standard output is closed")
        status = main()
        sys.stdout.flush()  # inside the try: a closed pipe or a full disk often shows only here
    except OSError as error:
        if sys.stdout is not None:  # else Python reports the unflushed rest again at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        if not isinstance(error, BrokenPipeError):  # `| head`: the reader stopped, normal
            print(f"python -m d2l_gpu: cannot write its output: {error}", file=sys.stderr)
        status = 1
    sys.exit(status)
