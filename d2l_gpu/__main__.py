"""``python -m d2l_gpu``: the package's command line (``info``, ``check``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from . import __version__, check
from .report import device_info, device_report, helpers_use, software_versions

_INFO_DOC = "Print every device this machine has, which ones the helpers use, and versions."


def _info(args: argparse.Namespace) -> int:
    """The table whatever ``D2L_DEVICE`` says; a bad value is flagged and makes it exit 1."""
    use = helpers_use()
    if args.json:
        rows = [r.as_dict() for r in device_info()]
        print(json.dumps({"devices": rows, "helpers use": use, "software": software_versions()}))
    else:
        print(device_report())
    return 1 if use.startswith("[FAIL]") else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m d2l_gpu",
        description="Helpers for the GPU chapter of Dive into Deep Learning.",
    )
    parser.add_argument("--version", action="version", version=f"d2l_gpu {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    info = sub.add_parser(
        "info", help="print the devices, their memory and software versions", description=_INFO_DOC
    )
    info.add_argument("--json", action="store_true", help="print JSON instead of a table")
    info.set_defaults(handler=_info)

    checker = sub.add_parser(
        "check",
        help="check this environment; prints [OK] / [FAIL] lines",
        description=check.__doc__,
    )
    checker.add_argument(
        "--core", action="store_true", help="check only torch, not the notebook packages"
    )
    checker.set_defaults(handler=check.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Exit status: 0 all well, 1 a failed check, 2 a usage error (argparse's)."""
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
