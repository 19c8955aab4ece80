"""Exercise 3: 1000 products of 100 x 100 matrices, logging each norm."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ..devices import try_gpu
from ..timing import Measurement, benchmark
from ._common import _min_run_time


@dataclass(frozen=True)
class NormRow:
    """One way of logging the norms: its time and how often it waited for the device."""

    method: str
    device: str
    median: float
    iqr: float
    runs: int
    host_syncs: int | None


@dataclass(frozen=True)
class NormsStudy:
    """The three logging methods side by side, and whether their norms agree."""

    device: str
    products: int
    size: int
    rows: list[NormRow]
    max_rel_diff: float
    agree: bool
    sync_note: str
    norms: list[float] = field(repr=False)


def _norms_item(a: torch.Tensor, b: torch.Tensor) -> list[float]:
    return [torch.linalg.matrix_norm(a[i] @ b[i]).item() for i in range(len(a))]


def _norms_device_log(a: torch.Tensor, b: torch.Tensor) -> list[float]:
    log = torch.empty(len(a), device=a.device, dtype=a.dtype)
    for i in range(len(a)):
        log[i] = torch.linalg.matrix_norm(a[i] @ b[i])
    return log.cpu().tolist()


def _norms_bmm(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> list[float]:
    torch.bmm(a, b, out=out)
    return torch.linalg.matrix_norm(out).cpu().tolist()


def _count_syncs(fn: Callable[[], object]) -> int:
    """How many times ``fn`` made the host wait for the CUDA device."""
    previous = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode(previous)
    return sum("synchroniz" in str(w.message) for w in caught)


def norms_study(
    device: torch.device | str | None = None,
    products: int = 1000,
    size: int = 100,
    quick: bool = False,
    min_run_time: float | None = None,
    rtol: float = 1e-4,
) -> NormsStudy:
    """Exercise 3: log the Frobenius norm of many small products in three ways.

    (a) ``.item()`` after each product, (b) each norm written into a device
    tensor that is copied to the host once, (c) one batched ``torch.bmm`` into a
    preallocated output. Host synchronizations are counted on CUDA with
    ``torch.cuda.set_sync_debug_mode``; elsewhere there is no such counter.
    """
    if products < 1 or size < 1:
        raise ValueError(f"products and size must be >= 1, got {products} and {size}")
    device = torch.device(device) if device is not None else try_gpu()
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(products, size, size, generator=gen).to(device)
    b = torch.randn(products, size, size, generator=gen).to(device)
    out = torch.empty_like(a)
    methods: list[tuple[str, Callable[[], list[float]]]] = [
        ("(a) .item() each step", lambda: _norms_item(a, b)),
        ("(b) device log, one copy", lambda: _norms_device_log(a, b)),
        ("(c) one bmm, preallocated", lambda: _norms_bmm(a, b, out)),
    ]
    # Each call takes tens of milliseconds on a CPU: allow a few for a spread.
    mrt = min_run_time or max(0.3, _min_run_time(device, quick))
    rows, results = [], []
    for name, fn in methods:
        results.append(torch.tensor(fn(), dtype=torch.float64))
        syncs = _count_syncs(fn) if device.type == "cuda" else None
        # The call above was the warm-up.
        m: Measurement = benchmark(fn, device=device, min_run_time=mrt, warmup=0, label=name)
        rows.append(NormRow(name, str(device), m.median, m.iqr, m.runs, syncs))
    ref = results[0]
    rel = max(((r - ref).abs() / ref.abs()).max().item() for r in results[1:])
    if device.type == "cuda":
        note = "counted with torch.cuda.set_sync_debug_mode('warn')"
    else:
        note = (
            f"not applicable on {device.type}: the CPU computes each result before the call "
            "returns, so there is no queue to wait for and no counter to read"
        )
    return NormsStudy(
        device=str(device),
        products=products,
        size=size,
        rows=rows,
        max_rel_diff=rel,
        agree=rel <= rtol,
        sync_note=note,
        norms=ref.tolist(),
    )
