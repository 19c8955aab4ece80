"""``python -m d2l_gpu``: the package's command line."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence

from . import __version__

# Subcommands that live in their own module: name -> (module, one-line help).
# Each module offers add_arguments(parser) and run(args) -> int, and imports
# nothing heavy at the top, so `--help` stays fast.
_MODULES = {
    "check": ("d2l_gpu.check", "check this environment; prints [OK] / [FAIL] lines"),
    "bench": ("d2l_gpu.bench", "measure the chapter's four exercises; table, JSON, figure"),
}


def _info(args: argparse.Namespace) -> int:
    from .report import device_info, device_report, software_versions

    if args.json:
        rows = [r.as_dict() for r in device_info()]
        print(json.dumps({"devices": rows, "software": software_versions()}, indent=2))
    else:
        print(device_report())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m d2l_gpu",
        description="Helpers for the GPU chapter of Dive into Deep Learning.",
    )
    parser.add_argument("--version", action="version", version=f"d2l_gpu {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    info = sub.add_parser("info", help="print the devices, their memory and software versions")
    info.add_argument("--json", action="store_true", help="print JSON instead of a table")
    info.set_defaults(handler=_info)

    for name, (module_name, help_text) in _MODULES.items():
        module = importlib.import_module(module_name)
        command = sub.add_parser(name, help=help_text, description=module.__doc__)
        module.add_arguments(command)
        command.set_defaults(handler=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
