"""Exercise 1: large and small matrix products, CPU against accelerator."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..devices import cpu, num_gpus, try_gpu
from ..timing import benchmark
from ._common import _min_run_time

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class MatmulCase:
    """One product to time: which library, where, in which precision, how big."""

    backend: str  # "torch" or "numpy"
    device: str
    dtype: str
    n: int


@dataclass(frozen=True)
class MatmulRow:
    """Seconds per n x n product (median, IQR) and the rate it implies."""

    backend: str
    device: str
    dtype: str
    n: int
    median: float
    iqr: float
    runs: int
    gflops: float


def bf16_supported(device: torch.device | str) -> bool:
    """Whether a bfloat16 product runs on ``device`` (tried, not guessed)."""
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return False
    try:
        x = torch.ones(2, 2, dtype=torch.bfloat16, device=device)
        (x @ x).sum().item()
    except (RuntimeError, TypeError):
        return False
    return True


def _sizes(device: torch.device, dtype: str, quick: bool) -> list[int]:
    if device.type != "cpu":
        return [16, 64, 256, 1024, 4096] if quick else [2**k for k in range(4, 14)]
    if dtype == "bfloat16":
        # Without AVX512-BF16 or AMX a CPU converts bfloat16 and is slower than
        # float32; larger sizes would take seconds per product and teach nothing new.
        return [16, 64, 256] if quick else [16, 32, 64, 128, 256, 512]
    return [16, 64, 256, 512] if quick else [2**k for k in range(4, 12)]


def matmul_cases(
    devices: Sequence[torch.device | str] | None = None,
    quick: bool = False,
    numpy: bool = True,
) -> list[MatmulCase]:
    """Every product the sweep times; by default the CPU and the first GPU, if any.

    On the CPU the sweep also times NumPy (float32) on the same sizes, since
    both libraries hand the product to a BLAS and the interesting question is
    which one.
    """
    devs = [torch.device(d) for d in devices] if devices else [cpu()]
    if devices is None and num_gpus() > 0:
        devs.append(try_gpu())
    cases = []
    for dev in devs:
        dtypes = ["float32"] + (["bfloat16"] if bf16_supported(dev) else [])
        for dtype in dtypes:
            cases += [MatmulCase("torch", str(dev), dtype, n) for n in _sizes(dev, dtype, quick)]
        if numpy and dev.type == "cpu":
            cases += [
                MatmulCase("numpy", str(dev), "float32", n) for n in _sizes(dev, "float32", quick)
            ]
    return cases


def measure_matmul(
    case: MatmulCase, min_run_time: float | None = None, quick: bool = False
) -> MatmulRow:
    """Time one product of two random n x n matrices and report GFLOP/s (2 n^3 flops)."""
    if case.backend not in ("torch", "numpy"):
        raise ValueError(f"backend must be 'torch' or 'numpy', got {case.backend!r}")
    if case.dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {case.dtype!r}")
    device = torch.device(case.device)
    a = torch.randn(case.n, case.n, device=device, dtype=DTYPES[case.dtype])
    b = torch.randn(case.n, case.n, device=device, dtype=DTYPES[case.dtype])
    if case.backend == "numpy":
        if device.type != "cpu" or case.dtype != "float32":
            raise ValueError("the NumPy comparison runs on the CPU in float32 only")
        import numpy as np

        fn, args = np.matmul, (a.numpy(), b.numpy())
    else:
        fn, args = torch.matmul, (a, b)
    m = benchmark(
        fn,
        *args,
        device=device,
        min_run_time=min_run_time or _min_run_time(device, quick),
        label=f"{case.backend} {case.dtype} {case.n}",
    )
    return MatmulRow(
        case.backend,
        case.device,
        case.dtype,
        case.n,
        m.median,
        m.iqr,
        m.runs,
        gflops=2 * case.n**3 / m.median / 1e9,
    )


def matmul_sweep(
    devices: Sequence[torch.device | str] | None = None,
    quick: bool = False,
    numpy: bool = True,
    min_run_time: float | None = None,
) -> list[MatmulRow]:
    """Exercise 1: time n x n products from tiny to large on each device."""
    cases = matmul_cases(devices, quick=quick, numpy=numpy)
    return [measure_matmul(case, min_run_time, quick) for case in cases]


def best_gflops(rows: Sequence[MatmulRow]) -> dict[tuple[str, str, str], float]:
    """The highest rate measured per (backend, device, dtype): the measured peak.

    Vendor peaks depend on clocks and tensor-core modes; the best rate this
    sweep reached is a figure the reader's own machine produced.
    """
    best: dict[tuple[str, str, str], float] = {}
    for r in rows:
        key = (r.backend, r.device, r.dtype)
        best[key] = max(best.get(key, 0.0), r.gflops)
    return best


def crossover(rows: Sequence[MatmulRow], dtype: str = "float32") -> dict[str, int | None]:
    """Per accelerator, the smallest n from which its torch products beat the CPU's.

    "Beat" means a higher rate at that n and at every larger n measured on both;
    None when it never does. Empty when no accelerator was measured.
    """
    rate = {(r.device, r.n): r.gflops for r in rows if r.backend == "torch" and r.dtype == dtype}
    result: dict[str, int | None] = {}
    for device in sorted({d for d, _ in rate if d != "cpu"}):
        sizes = sorted(n for d, n in rate if d == device and ("cpu", n) in rate)
        wins = [rate[(device, n)] > rate[("cpu", n)] for n in sizes]
        result[device] = None
        for i, n in enumerate(sizes):
            if all(wins[i:]):
                result[device] = n
                break
    return result


def blas_libraries() -> dict[str, str]:
    """Which BLAS torch and NumPy call for a CPU product, from their build records."""
    match = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    torch_blas = match.group(1) if match else "unknown"
    if torch_blas == "mkl":
        torch_blas = f"mkl ({torch.backends.mkl.is_available() and 'available' or 'missing'})"
    info = {"torch": torch_blas, "torch cpu capability": torch.backends.cpu.get_cpu_capability()}
    try:
        import numpy as np

        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        info["numpy"] = f"{blas.get('name', 'unknown')} {blas.get('version', '')}".strip()
    except (ImportError, KeyError, TypeError):
        # NumPy older than 1.25 has no mode="dicts"; say so rather than guess.
        info["numpy"] = "unknown (numpy missing or too old to report its BLAS)"
    return info
