"""Run the chapter's four exercises (5.5.5) and report what this machine measures.

Prints a table per exercise, optionally writes every number as JSON and the
timings as a figure. Progress goes to stderr, results to stdout.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import torch

from . import experiments as ex
from .devices import available_devices, cpu, try_all_gpus, try_gpu


def parse_device(text: str) -> torch.device:
    """An existing device named by ``text`` ('cpu', 'cuda', 'cuda:1', 'mps', ...)."""
    valid = [str(d) for d in available_devices()]
    try:
        device = torch.device(text.strip().lower())
    except RuntimeError:
        device = None
    if device is not None:
        # 'cuda' means the first GPU; the CPU is one device whatever its index.
        index = None if device.type == "cpu" else (device.index or 0)
        device = torch.device(device.type, index) if index is not None else torch.device("cpu")
    if device is None or str(device) not in valid:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a device this machine has; choose one of: {', '.join(valid)}"
        )
    return device


def _writable(text: str) -> Path:
    path = Path(text)
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: folder {path.parent} not found")
    return path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device",
        type=parse_device,
        help="device for exercises 1-3 (default: the first GPU, else the CPU); "
        "exercise 4 uses every visible GPU, or the CPU stand-in with --device cpu",
    )
    parser.add_argument("--quick", action="store_true", help="small sizes and short timings")
    parser.add_argument("--json", type=_writable, metavar="FILE", help="write all results here")
    parser.add_argument("--plot", type=_writable, metavar="FILE", help="save a figure (.png, .svg)")


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.4g}"


def format_matmul(rows: list[ex.MatmulRow], blas: dict[str, str] | None = None) -> str:
    """Exercise 1 as a table; "of best" is the share of the best rate in its series."""
    best = ex.best_gflops(rows)
    out = [
        "Exercise 1: n x n matrix products (GFLOP/s = 2 n^3 / median)",
        _table(
            ["library", "device", "dtype", "n", "median ms", "IQR ms", "runs"]
            + ["GFLOP/s", "of best"],
            [
                [r.backend, r.device, r.dtype, str(r.n), _ms(r.median), _ms(r.iqr), str(r.runs)]
                + [f"{r.gflops:.3g}", f"{r.gflops / best[(r.backend, r.device, r.dtype)]:.0%}"]
                for r in rows
            ],
        ),
    ]
    for device, n in ex.crossover(rows).items():
        verdict = f"from n = {n} upwards" if n else "at no size measured"
        out.append(f"{device} beats the CPU in float32 {verdict}")
    if blas:
        out.append("BLAS: " + ", ".join(f"{k} {v}" for k, v in blas.items()))
    return "\n".join(out)


def format_round_trip(rt: ex.RoundTrip) -> str:
    """Exercise 2: where each load put the tensors, and whether they came back exact."""
    return "\n".join(
        [
            f"Exercise 2: state_dict of {rt.tensors} tensors saved from {rt.saved_from}",
            f"locations recorded in the file: {', '.join(rt.recorded_locations)}",
            _table(
                ["map_location", "loaded on", "exact"],
                [[r.map_location, r.loaded_on, str(r.exact)] for r in rt.loads],
            ),
            f"without the device the file names ({rt.missing_gpu_how}):",
            f"  {rt.missing_gpu_error or 'no error'}",
        ]
    )


def format_norms(ns: ex.NormsStudy) -> str:
    """Exercise 3: the three logging methods, their times and host synchronizations."""
    return "\n".join(
        [
            f"Exercise 3: {ns.products} products of {ns.size}x{ns.size}, one norm each",
            _table(
                ["method", "device", "median ms", "IQR ms", "runs", "host syncs"],
                [
                    [r.method, r.device, _ms(r.median), _ms(r.iqr), str(r.runs)]
                    + [str(r.host_syncs) if r.host_syncs is not None else "n/a"]
                    for r in ns.rows
                ],
            ),
            f"norms agree: {ns.agree} (largest relative difference {ns.max_rel_diff:.1e})",
            f"host syncs: {ns.sync_note}",
        ]
    )


def format_two_products(cs: ex.ConcurrencyStudy) -> str:
    """Exercise 4, headed by what was really measured."""
    return "\n".join(
        [
            f"Exercise 4: two {cs.n}x{cs.n} products, measured as {cs.kind}",
            _table(
                ["mode", "devices", "median ms", "IQR ms", "runs"],
                [[r.mode, r.devices, _ms(r.median), _ms(r.iqr), str(r.runs)] for r in cs.rows],
            ),
            f"speedup (sequential / concurrent): {cs.speedup:.2f}x; {cs.note}",
        ]
    )


def format_report(results: dict[str, Any]) -> str:
    """All four exercises as tables a reader can scan in a terminal."""
    return "\n\n".join(
        [
            format_matmul(results["matmul"], results["blas"]),
            format_round_trip(results["round_trip"]),
            format_norms(results["norms"]),
            format_two_products(results["two_products"]),
        ]
    )


def to_json(results: dict[str, Any]) -> dict[str, Any]:
    """Plain data for ``--json``; the 1000 logged norms are left out."""
    data = {
        k: dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v for k, v in results.items()
    }
    data["matmul"] = [dataclasses.asdict(r) for r in results["matmul"]]
    data["norms"].pop("norms")
    return data


def measure(
    device: torch.device | None = None, quick: bool = False, progress: bool = True
) -> dict[str, Any]:
    """Run all four exercises on ``device`` (and the CPU for comparison)."""
    from tqdm import tqdm

    from .report import device_info, software_versions

    device = device if device is not None else try_gpu()
    cases = ex.matmul_cases([cpu()] if device.type == "cpu" else [cpu(), device], quick=quick)
    bar = tqdm(total=len(cases) + 3, file=sys.stderr, disable=not progress, unit="step")
    matmul = []
    for case in cases:
        bar.set_description(f"ex 1: {case.backend} {case.device} {case.dtype} n={case.n}")
        matmul.append(ex.measure_matmul(case, quick=quick))
        bar.update()
    bar.set_description("ex 2: state_dict round trip")
    round_trip = ex.round_trip(device)
    bar.update()
    bar.set_description("ex 3: logging 1000 norms")
    norms = ex.norms_study(device, quick=quick)
    bar.update()
    bar.set_description("ex 4: two products")
    two = ex.two_products([cpu()] if device.type == "cpu" else try_all_gpus(), quick=quick)
    bar.update()
    bar.close()
    return {
        "quick": quick,
        "devices": [d.as_dict() for d in device_info()],
        "software": software_versions(),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "blas": ex.blas_libraries(),
        "matmul": matmul,
        "round_trip": round_trip,
        "norms": norms,
        "two_products": two,
    }


def run(args: argparse.Namespace) -> int:
    results = measure(args.device, quick=args.quick)
    print(format_report(results))
    if args.json:
        args.json.write_text(json.dumps(to_json(results), indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {args.json}")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        from .plotting import summary_figure

        fig = summary_figure(results["matmul"], results["norms"], results["two_products"])
        fig.savefig(args.plot, dpi=120)
        print(f"wrote {args.plot}")
    return 0
